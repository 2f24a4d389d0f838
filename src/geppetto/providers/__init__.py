"""The provider engines (one subpackage each) and the HTTP transport they share.

Pass one :class:`HttpTransport` as ``http=`` to many engines to share its connection pool and its
``max_in_flight`` bound; each engine still sends its own key.
"""

from ._http import HttpTransport
from ._retry import RetryPolicy

__all__ = ["HttpTransport", "RetryPolicy"]

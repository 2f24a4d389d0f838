"""The provider engines (one subpackage each) and the HTTP transport they share.

Pass one :class:`HttpTransport` as ``http=`` to many engines to share its connection pool and its
``max_in_flight`` bound; each engine still sends its own key.

The names imported as ``name as name`` and left out of ``__all__`` are geppetto's own internal API: how a
background request is handed to another process and how a retry of unknown outcome is counted, which the
durable sessions share. They are not part of the public API and may change in any release.
"""

from ._background import BACKGROUND_OBSERVER as BACKGROUND_OBSERVER
from ._background import PENDING_RESPONSE as PENDING_RESPONSE
from ._background import PendingResponse as PendingResponse
from ._http import HttpTransport, RetryPolicy
from ._landed import retried_unknown as retried_unknown

__all__ = ["HttpTransport", "RetryPolicy"]

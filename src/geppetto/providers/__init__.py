"""The provider engines (one subpackage each) and the HTTP transport they share.

Pass one :class:`HttpTransport` as ``http=`` to many engines to share its connection pool and its
``max_in_flight`` bound; each engine still sends its own key.

The names imported as ``name as name`` and left out of ``__all__`` are geppetto's own internal API: what
the reports and the observability read of the engines (the provider-diagnostics verdicts and their count),
and how a background request is handed to another process and a retry of unknown outcome is counted, which
the durable sessions share. They are not part of the public API and may change in any release.
"""

from ._background import BACKGROUND_OBSERVER as BACKGROUND_OBSERVER
from ._background import PENDING_RESPONSE as PENDING_RESPONSE
from ._background import PendingResponse as PendingResponse
from ._disagreements import CACHE_DIAGNOSTICS as CACHE_DIAGNOSTICS
from ._disagreements import DISAGREEMENT_METRICS as DISAGREEMENT_METRICS
from ._disagreements import disagreement_metrics as disagreement_metrics
from ._http import HttpTransport, RetryPolicy
from ._landed import retried_unknown as retried_unknown

__all__ = ["HttpTransport", "RetryPolicy"]

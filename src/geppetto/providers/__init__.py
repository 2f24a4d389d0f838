"""The provider engines (one subpackage each) and the HTTP transport they share.

Pass one :class:`HttpTransport` as ``http=`` to many engines to share its connection pool and its
``max_in_flight`` bound; each engine still sends its own key.

The names imported as ``name as name`` and left out of ``__all__`` are geppetto's own internal API: the
hook instrumentation adds to every provider request, the context through which ``geppetto serve`` follows a
background response and hands one to another worker (which the durable sessions share), how a retry of
unknown outcome is counted, the guess at which middleware edited a Turn (the inspector shows it), the file
types the Interactions API takes (the simulator checks them), and what the reports and the observability
read of the engines (the provider-diagnostics verdicts and their count). Not part of the public API; they
may change in any release.
"""

from ._background import BACKGROUND_OBSERVER as BACKGROUND_OBSERVER
from ._background import PENDING_RESPONSE as PENDING_RESPONSE
from ._background import PendingResponse as PendingResponse
from ._chain import likely_edit as likely_edit
from ._disagreements import CACHE_DIAGNOSTICS as CACHE_DIAGNOSTICS
from ._disagreements import DISAGREEMENT_METRICS as DISAGREEMENT_METRICS
from ._disagreements import disagreement_metrics as disagreement_metrics
from ._files import INTERACTIONS_AUDIO as INTERACTIONS_AUDIO
from ._files import INTERACTIONS_DOCUMENTS as INTERACTIONS_DOCUMENTS
from ._files import INTERACTIONS_VIDEO as INTERACTIONS_VIDEO
from ._http import REQUEST_HOOKS as REQUEST_HOOKS
from ._http import HttpTransport
from ._landed import retried_unknown as retried_unknown
from ._retry import RetryPolicy

__all__ = ["HttpTransport", "RetryPolicy"]

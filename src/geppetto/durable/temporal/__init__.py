"""Durable sessions on Temporal (the ``temporal`` extra): each prompt of a session runs as a workflow
update, each provider request and each tool call as an activity (docs/durable.md).

>>> client = await Client.connect("127.0.0.1:7233", data_converter=DATA_CONVERTER)  # doctest: +SKIP
>>> async with worker(client, task_queue="geppetto", engines={"default": "sim"}, tools=[get_weather]):  # doctest: +SKIP
...     s = DurableSession(client, task_queue="geppetto", engine="default")
...     turn = await s.run("What is the weather in Paris?")
"""

from __future__ import annotations

try:
    import temporalio  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is missing
    from ..._extras import install_hint

    raise ImportError(
        f"geppetto.durable.temporal needs temporalio: {install_hint('temporal')}", name="temporalio"
    ) from exc

from ._client import DurableSession, Timeouts, workflow_id
from ._converter import DATA_CONVERTER
from ._dev import dev_server
from ._worker import worker

__all__ = ["DATA_CONVERTER", "DurableSession", "Timeouts", "dev_server", "worker", "workflow_id"]

"""The session workflow replays recorded histories exactly (its code is deterministic).

The histories in tests/fixtures/durable were recorded from the tests here against a real dev server:
``GEPPETTO_RECORD_HISTORY=1 pytest tests/durable/test_durable_session.py tests/durable/test_kill.py -k "chained or approval"``.
Replaying needs no server: Temporal's Replayer runs the workflow code against each history and fails on any
command that differs from what the history recorded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

temporal = pytest.importorskip("geppetto.durable.temporal")
from temporalio import workflow  # noqa: E402
from temporalio.client import WorkflowHistory  # noqa: E402
from temporalio.worker import Replayer  # noqa: E402

from geppetto.durable.temporal._types import SessionStart  # noqa: E402
from geppetto.durable.temporal._worker import WORKFLOW_RUNNER  # noqa: E402
from geppetto.durable.temporal._workflow import WORKFLOW, SessionWorkflow  # noqa: E402

HISTORIES = Path(__file__).parent.parent / "fixtures" / "durable"
NAMES = ["chained_tool_loop", "approval"]


def _history(name: str) -> WorkflowHistory:
    return WorkflowHistory.from_json(f"geppetto-session-{name}", (HISTORIES / f"{name}.json").read_text())


def _activities(name: str) -> list[str]:
    events = json.loads((HISTORIES / f"{name}.json").read_text())["events"]
    return [
        e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for e in events
        if "activityTaskScheduledEventAttributes" in e
    ]


@pytest.mark.parametrize("name", NAMES)
async def test_recorded_history_replays(name: str) -> None:
    replayer = Replayer(
        workflows=[SessionWorkflow], data_converter=temporal.DATA_CONVERTER, workflow_runner=WORKFLOW_RUNNER
    )
    result = await replayer.replay_workflow(_history(name), raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
    # the histories hold the requests and the tool calls as activities
    assert "geppetto.request" in _activities(name) and "geppetto.tool" in _activities(name)


@workflow.defn(name=WORKFLOW)
class Changed(SessionWorkflow):
    """The workflow with a step changed: a timer where the history has a request activity."""

    @workflow.run
    async def run(self, start: SessionStart) -> None:
        await super().run(start)

    async def _request(self, req: Any) -> Any:
        await workflow.sleep(1)
        return await super()._request(req)


async def test_a_changed_workflow_fails_the_replay() -> None:
    replayer = Replayer(workflows=[Changed], data_converter=temporal.DATA_CONVERTER, workflow_runner=WORKFLOW_RUNNER)
    result = await replayer.replay_workflow(_history("chained_tool_loop"), raise_on_replay_failure=False)
    assert result.replay_failure is not None

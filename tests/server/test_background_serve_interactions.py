"""``geppetto serve`` with ``InteractionsEngine(background=True)``, two worker processes on one PostgreSQL store
and one Redis bus: the worker running an inference is killed (SIGKILL) mid-answer and the other finishes
the same interaction after the event id that was published last, as for a background response; a client
reading ``/events`` with ``Last-Event-ID`` sees every event once."""

from __future__ import annotations

from server_support import bus_url, two_script_workers
from test_background_serve import SCRIPT, assert_finished_and_chained, killed_mid_answer

from geppetto.simulator import Simulator

PATH = "/v1beta/interactions"


def test_a_killed_workers_background_interaction_is_finished_by_another(
    postgres_target: str, geppetto_sim: Simulator
) -> None:
    args = (SCRIPT, postgres_target, bus_url("redis"), geppetto_sim.url, "interactions")
    with two_script_workers(*args) as (a, b):
        sid, _, events = killed_mid_answer(a, b, geppetto_sim)
        assert (events[-1]["event"], events[-1]["data"]["status"]) == ("run_finished", "completed")
        posts = [r for r in geppetto_sim.requests if r.method == "POST" and r.path == PATH]
        resumes = [r for r in geppetto_sim.requests if r.method == "GET" and r.query.get("stream") == "true"]
        assert len(posts) == 1 and resumes and all(r.query.get("last_event_id") for r in resumes)
        iid = resumes[0].path.rsplit("/", 1)[-1]
        assert_finished_and_chained(b.url, sid, geppetto_sim, iid, "previous_interaction_id")

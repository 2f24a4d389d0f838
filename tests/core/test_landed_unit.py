"""``await_landed``: a read-back waits while the server still generates, is bounded, and a 404 proves the
attempt did not land."""

from __future__ import annotations

from typing import Any

import pytest

from geppetto._exceptions import NotFoundError, ProviderError
from geppetto.providers._landed import NotLanded, await_landed


def _answers(*answers: Any) -> tuple[Any, list[float], Any]:
    left, slept = list(answers), []

    async def get() -> Any:
        answer = left.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    return get, slept, sleep


async def test_a_response_in_progress_is_waited_for() -> None:
    get, slept, sleep = _answers({"status": "queued"}, {"status": "in_progress"}, {"status": "completed", "id": "r"})
    found = await await_landed(get, "response r", "r", poll_interval=0.5, sleep=sleep)
    assert found["id"] == "r" and slept == [0.5, 0.5]


async def test_a_404_proves_it_did_not_land() -> None:
    get, _, sleep = _answers(NotFoundError("Response with id 'r' not found.", status=404))
    with pytest.raises(NotLanded, match="response r is not on the server"):
        await await_landed(get, "response r", "r", poll_interval=0.5, sleep=sleep)


async def test_waiting_is_bounded() -> None:
    get, slept, sleep = _answers(*[{"status": "in_progress"}] * 5)
    with pytest.raises(ProviderError, match="still in_progress after 1 s of polling"):
        await await_landed(get, "response r", "r", poll_interval=0.5, max_wait=1.0, sleep=sleep)
    assert slept == [0.5, 0.5]


async def test_an_answer_that_is_no_object_is_an_error() -> None:
    get, _, sleep = _answers(["not", "an", "object"])
    with pytest.raises(ProviderError, match="answered without an object"):
        await await_landed(get, "response r", "r", poll_interval=0.5, sleep=sleep)


async def test_a_404_that_does_not_name_it_proves_nothing() -> None:
    get, _, sleep = _answers(NotFoundError("Not Found", status=404))  # a server without the route
    with pytest.raises(ProviderError, match="answered 404 without naming it") as caught:
        await await_landed(get, "response resp_9", "resp_9", poll_interval=0.5, sleep=sleep)
    assert not isinstance(caught.value, NotLanded)

"""The background responses a server's inferences read (schema 6): recorded with their Turn, the cursor only
moves forward, read back, forgotten when the inference ends, and gone with their session."""

from __future__ import annotations

from store_support import query

from geppetto.session.stores import open_store
from geppetto.session.stores._background import (
    background_response,
    forget_background_response,
    save_background_cursor,
    save_background_response,
)
from geppetto.turns import Block, Turn, turn_to_dict


async def test_a_background_response_is_recorded_read_and_forgotten(store_target: str) -> None:
    turn = Turn()
    turn.append(Block.system("be terse"))
    turn.append(Block.user("a long story, please"))
    with open_store(store_target) as store:
        await store.create_session("s1", {})
        assert await background_response(store, "s1", "inf-1") is None
        await save_background_response(store, "s1", "inf-1", "resp_a", turn_to_dict(turn))
        for cursor in (3, 9, 7):  # an older cursor never overwrites a newer one
            await save_background_cursor(store, "s1", "inf-1", "resp_a", cursor)
        await save_background_cursor(store, "s1", "inf-1", "resp_other", 50)  # not the response it reads
        found = await background_response(store, "s1", "inf-1")
        assert found is not None
        assert (found.response_id, found.cursor, found.turn) == ("resp_a", 9, turn)
        # the tool loop's next request replaces it, its cursor starts again
        await save_background_response(store, "s1", "inf-1", "resp_b", turn_to_dict(turn))
        found = await background_response(store, "s1", "inf-1")
        assert found is not None and (found.response_id, found.cursor) == ("resp_b", -1)
        await forget_background_response(store, "s1", "inf-1")
        assert await background_response(store, "s1", "inf-1") is None
        await save_background_response(store, "s1", "inf-2", "resp_c", turn_to_dict(turn))
        await store.delete_session("s1")
    assert query(store_target, "SELECT count(*) FROM background_responses") == [(0,)]


async def test_events_set_aside_keep_their_order_below_the_next_ones(store_target: str) -> None:
    from geppetto.events import EventMetadata, EventTextDelta
    from geppetto.session.stores._background import set_events_aside

    def deltas(*texts: str) -> list[tuple[float, EventTextDelta]]:
        return [(float(i), EventTextDelta(EventMetadata(inference_id="inf-1"), t)) for i, t in enumerate(texts)]

    with open_store(store_target) as store:
        await store.create_session("s1", {})
        assert await set_events_aside(store, "s1", "inf-1") == 0
        await store.save_events("s1", "inf-1", deltas("a", "b", "c"))  # the worker that stopped
        assert await set_events_aside(store, "s1", "inf-1") == 3
        await store.save_events("s1", "inf-1", deltas("d", "e"))  # the worker that picked it up, and stopped too
        assert await set_events_aside(store, "s1", "inf-1") == 5
        await store.save_events("s1", "inf-1", deltas("f"))
        logged = await store.load_events("s1", "inf-1")
    assert [(e.seq, e.event["delta"]) for e in logged] == [
        (-8, "a"),
        (-7, "b"),
        (-6, "c"),
        (-5, "d"),
        (-4, "e"),
        (0, "f"),
    ]

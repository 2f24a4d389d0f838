"""``geppetto sessions`` and the stored ``geppetto chat``, through the real console script."""

from __future__ import annotations

import json
from pathlib import Path

from _cli_helpers import geppetto

from geppetto import BlockKind, load_turn


def chat(tmp_path: Path, *args: str, stdin: str) -> str:
    res = geppetto("chat", "--profile", "sim", *args, config_dir=tmp_path, stdin=stdin)
    assert res.returncode == 0, res.stderr
    return res.stdout


def session_id_of(out: str) -> str:
    line = next(line for line in out.splitlines() if line.startswith("session "))
    return line.split()[1]


def test_chat_is_saved_and_continued(tmp_path: Path) -> None:
    first = chat(tmp_path, stdin="What is the weather in Paris?\n/exit\n")
    sid = session_id_of(first)
    assert f"saved in {tmp_path / 'data' / 'sessions.db'}" in first
    assert "get_weather" in first

    listed = geppetto("sessions", "list", "--json", config_dir=tmp_path)
    assert listed.returncode == 0, listed.stderr
    [info] = json.loads(listed.stdout)
    assert (info["session_id"], info["snapshots"], info["first_prompt"]) == (sid, 1, "What is the weather in Paris?")

    again = chat(tmp_path, "--continue", stdin="Thanks!\n")
    assert f"continuing session {sid}" in again and session_id_of(again) == sid
    by_id = chat(tmp_path, "--session", sid, stdin="Bye\n")
    assert session_id_of(by_id) == sid

    shown = geppetto("sessions", "show", sid, "--json", "--events", config_dir=tmp_path)
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert [s["seq"] for s in doc["snapshots"]] == [1, 2, 3]
    users = [b["payload"]["text"] for b in doc["latest"]["blocks"] if b["kind"] == "user"]
    assert users == ["What is the weather in Paris?", "Thanks!", "Bye"]
    types = {e["type"] for e in doc["events"]}
    assert {"start", "text_delta", "tool_call", "tool_result", "final"} <= types
    assert len({e["inference_id"] for e in doc["events"]}) == 3

    table = geppetto("sessions", "show", sid, config_dir=tmp_path)
    assert table.returncode == 0 and "latest snapshot" in table.stdout and "get_weather" in table.stdout


def test_export_and_delete(tmp_path: Path) -> None:
    sid = session_id_of(chat(tmp_path, stdin="Hello\nAgain\n"))
    out = tmp_path / "exported.yaml"
    res = geppetto("sessions", "export", sid, "--snapshot", "1", "-o", str(out), config_dir=tmp_path)
    assert res.returncode == 0, res.stderr
    turn = load_turn(out)
    assert [b.kind for b in turn.blocks] == [BlockKind.USER, BlockKind.LLM_TEXT]
    printed = geppetto("sessions", "export", sid, "--json", config_dir=tmp_path)
    assert json.loads(printed.stdout)["blocks"][2]["payload"]["text"] == "Again"
    assert geppetto("inspect", str(out), config_dir=tmp_path).returncode == 0

    refused = geppetto("sessions", "delete", sid, config_dir=tmp_path, stdin="")
    assert refused.returncode == 2 and "pass --yes" in refused.stderr
    assert geppetto("sessions", "delete", sid, "--yes", config_dir=tmp_path).returncode == 0
    assert json.loads(geppetto("sessions", "list", "--json", config_dir=tmp_path).stdout) == []


def test_bad_input_names_the_fix(tmp_path: Path) -> None:
    for args in (["sessions", "show", "nope"], ["sessions", "export", "nope"], ["sessions", "delete", "nope", "-y"]):
        res = geppetto(*args, config_dir=tmp_path)
        assert res.returncode in (1, 2), args
        assert res.stderr.startswith("error: no session 'nope'") and "geppetto sessions list" in res.stderr
    res = geppetto("chat", "--profile", "sim", "--session", "nope", config_dir=tmp_path, stdin="")
    assert res.returncode == 2 and "no session 'nope'" in res.stderr
    res = geppetto("chat", "--profile", "sim", "--continue", "--session", "x", config_dir=tmp_path, stdin="")
    assert res.returncode == 2 and "give one of them" in res.stderr

    sid = session_id_of(chat(tmp_path, stdin="Hi\n"))
    res = geppetto("sessions", "export", sid, "--snapshot", "5", config_dir=tmp_path)
    assert res.returncode == 2 and "snapshots 1 to 1" in res.stderr

    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"not a database" * 50)
    res = geppetto("sessions", "list", "--store", str(corrupt), config_dir=tmp_path)
    assert res.returncode == 1 and "not a readable SQLite database" in res.stderr and "Traceback" not in res.stderr
    assert corrupt.read_bytes() == b"not a database" * 50
    # The default store broken: chat still works, unsaved, and says so; a named store must work.
    res = geppetto("chat", "--profile", "sim", "--store", str(corrupt), config_dir=tmp_path, stdin="Hi\n")
    assert res.returncode == 1 and "move it aside" in res.stderr
    res = geppetto("sessions", "list", "--store", "postgresql://nobody:pw@127.0.0.1:9/none", config_dir=tmp_path)
    assert res.returncode == 1 and "cannot reach the PostgreSQL session store" in res.stderr and "pw@" not in res.stderr


def test_unwritable_default_store_leaves_chat_working_unsaved(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "sessions.db").write_bytes(b"garbage" * 100)
    out = chat(tmp_path, stdin="Hi\n")
    assert "warning:" in out and "this chat is not saved" in out and "not saved" in out
    assert "You said: Hi" in out
    assert (data / "sessions.db").read_bytes() == b"garbage" * 100


def test_a_long_session_is_shown_by_its_last_snapshots_and_exported_by_number(tmp_path: Path) -> None:
    import asyncio

    from geppetto.session import Session
    from geppetto.session.stores import open_store
    from geppetto.testing import ScriptedEngine
    from geppetto.turns import Block, turn_to_dict

    path = tmp_path / "long.db"

    async def make() -> tuple[str, dict[str, object], list[str]]:
        with open_store(str(path)) as store:
            session = Session(
                ScriptedEngine([Block.llm_text(f"a{i}") for i in range(40)]), store=store, record_events=True
            )
            for i in range(40):
                await session.run(f"q{i}")
            third = await store.load_snapshot(session.session_id, 3)
            assert third is not None
            infos = await store.snapshot_infos(session.session_id)
            return session.session_id, turn_to_dict(third), [i.inference_id or "" for i in infos]

    sid, third, inferences = asyncio.run(make())
    store = ("--store", str(path))
    shown = geppetto("sessions", "show", sid, "--json", "--events", *store, config_dir=tmp_path)
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert [s["seq"] for s in doc["snapshots"]] == list(range(21, 41)) and doc["snapshot_count"] == 40
    assert {e["inference_id"] for e in doc["events"]} == set(inferences[20:])  # the events of those shown
    assert [b["payload"]["text"] for b in doc["latest"]["blocks"]][-2:] == ["q39", "a39"]
    few = json.loads(geppetto("sessions", "show", sid, "--json", "--last", "3", *store, config_dir=tmp_path).stdout)
    assert [s["seq"] for s in few["snapshots"]] == [38, 39, 40]
    every = json.loads(geppetto("sessions", "show", sid, "--json", "--last", "0", *store, config_dir=tmp_path).stdout)
    assert len(every["snapshots"]) == 40
    table = geppetto("sessions", "show", sid, "--last", "5", *store, config_dir=tmp_path)
    assert table.returncode == 0 and "snapshots 36 to 40 of 40; --last N shows more" in table.stdout

    exported = geppetto("sessions", "export", sid, "--snapshot", "3", "--json", *store, config_dir=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout) == json.loads(json.dumps(third))
    for bad, message in (("41", "snapshots 1 to 40"), ("0", "from 1")):
        res = geppetto("sessions", "export", sid, "--snapshot", bad, *store, config_dir=tmp_path)
        assert res.returncode == 2 and message in res.stderr, res.stderr
    res = geppetto("sessions", "show", sid, "--last", "-1", *store, config_dir=tmp_path)
    assert res.returncode == 2 and "--last" in res.stderr


def test_the_sessions_table_reads_at_100_columns(tmp_path: Path) -> None:
    """Every header whole, every line within the width, ids cut to a unique start and the first prompt shown
    as far as it fits (it once got zero columns and headers were cut to ``sna…``)."""
    chat(tmp_path, stdin="What is the weather in Paris, and should I bring an umbrella today?\n/exit\n")
    chat(tmp_path, stdin="Hello\n/exit\n")
    ids = [s["session_id"] for s in json.loads(geppetto("sessions", "list", "--json", config_dir=tmp_path).stdout)]
    out = geppetto("sessions", "list", config_dir=tmp_path, COLUMNS="100")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, out.stdout
    header = next(line for line in lines if line.startswith("session "))
    expected = ["session", "provider", "model", "mode", "snaps", "blocks", "reqs", "tokens", "cost", "updated"]
    assert header.split()[: len(expected) + 2] == [*expected, "first", "prompt"], header
    rows = [line for line in lines if line[:8] in {sid[:8] for sid in ids}]
    assert len(rows) == 2 and all("openai-responses" in row and "chained" in row for row in rows), out.stdout
    assert any("What is the" in row for row in rows) and any(row.rstrip().endswith("Hello") for row in rows)
    assert not any(sid in out.stdout for sid in ids)  # short ids; --json has the full ones

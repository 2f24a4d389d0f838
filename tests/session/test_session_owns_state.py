"""A Session owns its state: history edits and approvals are functions of a Turn, and no module but the
session's own reads or writes a Session's private members (beyond the few the server's entries name)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import geppetto as gp
from geppetto.session import _approvals, _edits
from geppetto.turns import TURN_META_SESSION_ID, Block, BlockKind, Turn
from geppetto.turns._known import TURN_META_HISTORY_EDIT

SRC = Path(gp.__file__).parent
SESSION_MODULE = SRC / "session" / "_session.py"

ALLOWED = {
    # the server's two entries to the first half of a resume (a protocol names what each uses)
    ("session/_approvals.py", "_resume_seed"),
    ("session/_journal.py", "_go_on_from"),
    # the server's own reach-ins, left for the server's side of the redesign
    ("server/_inference.py", "_resume_journal"),
    ("server/_runner.py", "_stored"),
    ("server/_runner.py", "_meter"),
}
"""(file under ``geppetto/``, member): the places outside ``session/_session.py`` that may use a private
member of a Session."""


def _private_members() -> set[str]:
    """Every ``self._x`` attribute and ``_x`` method of the Session class."""
    tree = ast.parse(SESSION_MODULE.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Session")
    names: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _reach_ins() -> set[tuple[str, str]]:
    private = _private_members()
    found: set[tuple[str, str]] = set()
    for path in SRC.rglob("*.py"):
        # a store never holds a Session (its own `_run` shares a name with Session._run)
        if path == SESSION_MODULE or "stores" in path.relative_to(SRC).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in private
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls", "store"))
            ):
                found.add((path.relative_to(SRC).as_posix(), node.attr))
    return found


def test_no_module_but_the_sessions_own_reaches_into_a_sessions_private_state() -> None:
    assert "_timeline" in _private_members() and "_meter" in _private_members()  # the scan sees the class
    extra = _reach_ins() - ALLOWED
    assert not extra, (
        f"{sorted(extra)} use a Session's private members: have Session make the change (a method in "
        "session/_session.py) and give the other module the values it needs"
    )


def _conversation() -> Turn:
    turn = Turn()
    call = Block.tool_call("c1", "lookup", {"q": "x"})
    turn.extend([Block.user("one"), Block.llm_text("Answer one."), Block.user("two"), call])
    turn.extend([Block.tool_use("c1", "found"), Block.llm_text("Answer two.")])
    return turn


def test_history_edits_are_functions_of_a_turn() -> None:
    turn = _conversation()
    cut = [b.id for b in turn.blocks[2:]]
    assert [b.text for b in _edits.rewind(1)(turn).blocks] == ["one", "Answer one."]
    assert TURN_META_HISTORY_EDIT.get(turn.metadata) == {"op": "rewind", "prompts": 1, "removed": cut}

    turn = _conversation()
    call_id = turn.blocks[3].id
    left = _edits.remove(call_id)(turn)
    assert [b.kind for b in left.blocks] == [BlockKind.USER, BlockKind.LLM_TEXT, BlockKind.USER, BlockKind.LLM_TEXT]

    turn = _conversation()
    first = turn.blocks[0].id
    assert _edits.edit(first, "ONE", None)(turn).blocks[0].text == "ONE"
    assert TURN_META_HISTORY_EDIT.get(turn.metadata) == {"op": "edit", "block": first}

    turn = _edits.fork("s1", "t1", "s2")(_conversation())
    assert TURN_META_SESSION_ID.get(turn.metadata) == "s2"
    assert TURN_META_HISTORY_EDIT.get(turn.metadata) == {"op": "fork", "from": "s1", "turn": "t1"}


def test_an_edit_checks_its_arguments_when_it_is_made_and_the_turn_when_it_is_applied() -> None:
    for bad in (0, -1, True, "1"):
        with pytest.raises(gp.UsageError, match="at least 1"):
            _edits.rewind(bad)  # type: ignore[arg-type]
    with pytest.raises(gp.UsageError, match="needs the new text"):
        _edits.edit("b1", None, None)
    with pytest.raises(gp.UsageError, match="its own session id"):
        _edits.fork("s1", "t1", "s1")
    rewind_three = _edits.rewind(3)
    with pytest.raises(gp.UsageError, match="holds 2"):
        rewind_three(_conversation())
    with pytest.raises(gp.UsageError, match="no block 'nope'"):
        _edits.remove("nope")(_conversation())


def test_approval_checks_read_a_turn() -> None:
    turn = _conversation()
    assert _approvals.check_no_waiting(turn, "s1", "prompt") is False
    assert _approvals.check_no_waiting(None, "s1", "prompt") is False
    with pytest.raises(gp.UsageError, match="no tool call waiting for a decision to drop"):
        _approvals.check_drop(turn, "s1")
    with pytest.raises(gp.UsageError, match="mapping of call id"):
        _approvals.check_resume(turn, ["c1"], "s1", has_tools=True)
    with pytest.raises(gp.UsageError, match="session s1 has no tool call waiting"):
        _approvals.check_resume(turn, {"c1": True}, "s1", has_tools=True)

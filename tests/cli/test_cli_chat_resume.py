"""Continuing a chat as a new user does: the stored session remembers what it ran on (profile, provider,
model, endpoint, mode, /mode changes included) and `--continue` resumes there without flags; a resumed chain
that must resend the Turn says why once, on its own line; `--resume` on a new file says so; nothing is
shown before a resume error; `/load` errors name the problem, not the file's content; `sessions` lists
what each session ran on, takes a unique id prefix and never makes folders."""

from __future__ import annotations

import json
from pathlib import Path

from _cli_helpers import geppetto


def _chat(tmp_path: Path, *args: str, stdin: str) -> tuple[int, str, str]:
    out = geppetto("chat", *args, config_dir=tmp_path, stdin=stdin)
    return out.returncode, out.stdout, out.stderr


def test_continue_resumes_on_the_stored_profile_and_mode(tmp_path: Path) -> None:
    code, out, err = _chat(tmp_path, "--profile", "sim", stdin="/mode stateless\nHello\n/exit\n")
    assert code == 0, err
    code, out, err = _chat(tmp_path, "--continue", stdin="Again\n/exit\n")  # no key, no flags
    assert code == 0, err
    assert "geppetto chat · sim · openai-responses sim-1" in out
    assert "You said: Again" in out
    listed = json.loads(geppetto("sessions", "list", "--json", config_dir=tmp_path).stdout)
    assert [(s["provider"], s["model"], s["mode"]) for s in listed] == [("openai-responses", "sim-1", "stateless")]


def test_a_resumed_chain_says_once_on_its_own_line_why_it_resent_the_turn(tmp_path: Path) -> None:
    code, _, err = _chat(tmp_path, "--profile", "sim", stdin="Hello\n/exit\n")
    assert code == 0, err
    code, out, err = _chat(tmp_path, "--continue", stdin="Again\nOnce more\n/exit\n")
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1, err
    assert "not found on the server; sending the whole Turn (fallback: previous_response_not_found)" in notes[0]
    assert "responses:" not in out and "fallback" not in out  # nothing of the library inside the answers
    assert "You said: Again" in out and "You said: Once more" in out


def test_resume_on_a_missing_file_says_it_starts_one(tmp_path: Path) -> None:
    target = tmp_path / "new.yaml"
    code, out, err = _chat(tmp_path, "--profile", "sim", "--resume", str(target), stdin="Hello\n/exit\n")
    assert code == 0, err
    assert f"{target} does not exist yet; starting a new conversation, saved there after each answer" in out
    assert target.exists()


def test_nothing_is_shown_before_a_resume_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("blocks: [\n")
    code, out, err = _chat(tmp_path, "--profile", "sim", "--resume", str(broken), stdin="")
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {broken}: not valid YAML")


def test_load_errors_name_the_problem_not_the_content(tmp_path: Path) -> None:
    bad = tmp_path / "notes.yaml"
    bad.write_text("api_key: sk-live-DISTINCTIVE\nowner: someone\n")
    code, out, err = _chat(tmp_path, "--profile", "sim", "--no-store", stdin=f"/load {bad}\n/exit\n")
    assert code == 0, err
    lines = [line.removeprefix("you> ") for line in out.splitlines() if "error:" in line]
    assert lines == [
        f"error: {bad}: the mapping has no 'blocks' field (2 other fields), so this is not a turn; "
        "a turn file is a mapping with a list of blocks, for example "
        "{id: t1, blocks: [{kind: user, payload: {text: hello}}]}"
    ]
    assert "DISTINCTIVE" not in out + err and "api_key" not in out + err


def test_sessions_take_a_unique_prefix_and_list_what_they_ran_on(tmp_path: Path) -> None:
    for _ in range(2):
        assert _chat(tmp_path, "--profile", "sim", stdin="Hello\n/exit\n")[0] == 0
    ids = [s["session_id"] for s in json.loads(geppetto("sessions", "list", "--json", config_dir=tmp_path).stdout)]
    listed = geppetto("sessions", "list", config_dir=tmp_path).stdout
    assert "provider" in listed and "openai-responses" in listed and "chained" in listed
    first = ids[0]
    prefix = next(first[:n] for n in range(1, len(first)) if not ids[1].startswith(first[:n]))
    shown = geppetto("sessions", "show", prefix, "--json", config_dir=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["session_id"] == first
    common = next((first[:n] for n in range(len(first), 0, -1) if ids[1].startswith(first[:n])), "")
    if common:
        ambiguous = geppetto("sessions", "show", common, config_dir=tmp_path)
        assert ambiguous.returncode == 2
        assert f"2 sessions start with {common!r}" in ambiguous.stderr
    none = geppetto("sessions", "show", "zzz-none", config_dir=tmp_path)
    assert none.returncode == 2 and "no session 'zzz-none'" in none.stderr


def test_listing_a_missing_store_makes_no_folder(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "dir" / "x.db"
    out = geppetto("sessions", "list", "--store", str(target), config_dir=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"no sessions in {target}" in out.stdout
    assert not (tmp_path / "missing").exists()
    shown = geppetto("sessions", "show", "abc", "--store", str(target), config_dir=tmp_path)
    assert shown.returncode == 2 and f"no session 'abc' in {target}: nothing was saved there yet" in shown.stderr
    assert not (tmp_path / "missing").exists()

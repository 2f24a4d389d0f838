"""``sessions delete`` finds the session before it asks: a wrong id is said first, a prefix names the full id."""

from __future__ import annotations

from pathlib import Path

from _cli_helpers import geppetto


def test_delete_names_a_missing_session_before_asking_for_confirmation(tmp_path: Path) -> None:
    store = tmp_path / "missing" / "x.db"
    res = geppetto("sessions", "delete", "abc", "--store", str(store), config_dir=tmp_path)
    assert res.returncode == 2
    assert res.stderr.startswith("error: no session 'abc'"), res.stderr
    assert not store.parent.exists()


def test_delete_by_prefix_names_the_full_id(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    chat = geppetto("chat", "--profile", "sim", "--store", str(store), stdin="hello\n/exit\n", config_dir=tmp_path)
    assert chat.returncode == 0, chat.stderr
    [full_id] = [line.split()[1] for line in chat.stdout.splitlines() if line.startswith("session ")]
    refused = geppetto("sessions", "delete", full_id[:6], "--store", str(store), config_dir=tmp_path)
    assert (refused.returncode, refused.stderr.strip()) == (
        2,
        f"error: deleting session {full_id} cannot be undone; pass --yes to confirm",
    )
    done = geppetto("sessions", "delete", full_id[:6], "--yes", "--store", str(store), config_dir=tmp_path)
    assert (done.returncode, done.stdout) == (0, f"deleted session {full_id}\n"), done.stderr

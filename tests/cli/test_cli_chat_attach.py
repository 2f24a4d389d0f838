"""`geppetto chat --attach FILE` sends files with the first prompt, `/attach FILE` with the next one; the
simulator's answer names each file it was given; a missing file is refused before the chat starts (flag)
or at the prompt (command), and an attachment a provider cannot take is dropped with the error;
`geppetto run --attach` refuses a file over the inline limit before any request."""

from __future__ import annotations

from pathlib import Path

from _cli_helpers import geppetto

from geppetto.turns._files import MAX_ATTACHMENT_BYTES


def test_chat_attaches_files_to_the_first_prompt_and_with_attach_to_the_next(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("Paris is sunny.")
    report = tmp_path / "report.pdf"
    report.write_bytes(b"%PDF-1.4 tiny")
    stdin = f"Summarize.\nThanks.\n/attach {report}\n/attach\nAnd this?\n/exit\n"
    res = geppetto("chat", "--profile", "sim", "--no-store", "--attach", str(notes), config_dir=tmp_path, stdin=stdin)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert 'You said: Summarize. Attached: notes.txt (text/plain, 15 bytes): "Paris is sunny.".' in out
    assert "You said: Thanks.\n" in out  # sent once: the next prompt goes alone
    assert "attached report.pdf (application/pdf, 13 bytes); it goes with your next prompt" in out
    assert "attached now: report.pdf" in out
    assert "You said: And this? Attached: report.pdf (application/pdf, 13 bytes)." in out


def test_chat_refuses_a_missing_attachment(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pdf"
    res = geppetto("chat", "--profile", "sim", "--no-store", "--attach", str(missing), config_dir=tmp_path, stdin="")
    assert res.returncode == 2
    assert res.stdout == ""  # refused before the chat starts
    assert f"cannot attach '{missing}': no such file" in res.stderr
    res = geppetto(
        "chat", "--profile", "sim", "--no-store", config_dir=tmp_path, stdin=f"/attach {missing}\nHi\n/exit\n"
    )
    assert res.returncode == 0, res.stderr
    assert f"error: cannot attach '{missing}': no such file" in res.stdout
    assert "You said: Hi\n" in res.stdout


def test_chat_drops_an_attachment_the_provider_cannot_take(tmp_path: Path) -> None:
    audio = tmp_path / "hello.wav"
    audio.write_bytes(b"RIFF....WAVE")
    stdin = f"/attach {audio}\nListen.\nHi\n/exit\n"
    res = geppetto("chat", "--profile", "sim", "--no-store", config_dir=tmp_path, stdin=stdin)
    assert res.returncode == 0, res.stderr
    assert "The Responses API cannot take the audio 'hello.wav' (audio/wav) inline" in res.stdout
    assert "(the attached file was dropped)" in res.stdout
    assert "You said: Hi\n" in res.stdout


def test_run_refuses_a_file_over_the_inline_limit_before_any_request(tmp_path: Path) -> None:
    big = tmp_path / "big.pdf"
    with big.open("wb") as handle:
        handle.truncate(MAX_ATTACHMENT_BYTES + 1)  # sparse: nothing is written, nothing is read
    res = geppetto("run", "--profile", "sim", "--attach", str(big), "Summarize.", config_dir=tmp_path)
    assert res.returncode == 2, res.stderr
    assert f"{MAX_ATTACHMENT_BYTES + 1} bytes is more than the {MAX_ATTACHMENT_BYTES} bytes sent inline" in res.stderr
    assert "upload it to the provider and attach its file_id instead" in res.stderr

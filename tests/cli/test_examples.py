"""Every example runs offline against the simulator, as a subprocess, and prints what it promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _cli_helpers import clean_env

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(tmp_path: Path, name: str, *args: str) -> str:
    res = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(tmp_path),
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    return res.stdout


def test_every_example_is_tested() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(
        [
            "simple_inference.py",
            "middleware_inference.py",
            "chained_tool_loop.py",
            "conversation_mode.py",
            "cross_provider_session.py",
            "structured_output.py",
            "mcp_tools.py",
            "cost_and_limits.py",
            "approval.py",
            "compaction.py",
            "attachments.py",
            "durable_session.py",  # run by tests/durable/test_example.py (it needs the temporal extra)
        ]
    )


def test_approval_pauses_resumes_after_a_restore_and_stays_chained(tmp_path: Path) -> None:
    lines = _run(tmp_path, "approval.py").splitlines()
    assert lines[0] == "waiting: delete_file({'path': 'notes.txt'}) [approval]"
    assert lines[1].startswith("prompt refused: cannot prompt: session ") and lines[1].endswith("(delete_file)")
    assert lines[2].startswith("approved -> 'deleted notes.txt'; the model: ")
    assert lines[3] == "denied -> 'the user denied this tool call: over the monthly budget'"
    assert lines[4] == "client result -> 'sage green'"
    assert lines[5] == "requests: 6, chained after the first: True"


def test_cost_and_limits_prices_each_request_and_stops_at_the_limit(tmp_path: Path) -> None:
    lines = _run(tmp_path, "cost_and_limits.py").splitlines()
    requests = [line for line in lines if line.startswith("request: ")]
    assert len(requests) == 4
    assert "(0 cached," in requests[0] and "(0 cached," not in requests[1]  # the second reads what the first wrote
    assert lines[-2].startswith("session: 4 requests") and "$0.0" in lines[-2]
    assert lines[-1].startswith("stopped: max_requests at 5")


def test_mcp_tools_calls_the_time_server_and_a_python_tool(tmp_path: Path) -> None:
    pytest.importorskip("mcp_server_time", reason="mcp-server-time is not installed (the dev extra installs it)")
    lines = _run(tmp_path, "mcp_tools.py").splitlines()
    assert lines[0] == "tools: shout, get_current_time, convert_time"
    assert lines[1].startswith("get_current_time for 'Asia/Tokyo' -> ['{', '  \"timezone\": \"Asia/Tokyo\",'")
    assert lines[2] == "shout 'hello from python' -> ['HELLO FROM PYTHON']"


def test_structured_output_gives_a_model_on_every_engine_and_retries_a_wrong_answer(tmp_path: Path) -> None:
    lines = _run(tmp_path, "structured_output.py").splitlines()
    assert [line.split(":")[0].strip() for line in lines[:4]] == [
        "openai-responses",
        "openai-chat",
        "anthropic",
        "gemini",
    ]
    assert all("City(name='Paris', population=2100000, kind='capital'" in line for line in lines[:4])
    assert lines[4] == "retried after: population: Field required; kind: Input should be 'capital' or 'town'"
    assert lines[5].startswith("valid answer: name='Paris' population=2100000 kind='capital'")


def test_attachments_reach_every_engine_and_claude_refuses_audio(tmp_path: Path) -> None:
    lines = _run(tmp_path, "attachments.py").splitlines()
    named = 'Attached: report.pdf (application/pdf, 22 bytes); notes.txt (text/plain, 15 bytes): "Paris is sunny.".'
    assert lines[:3] == [f"{p}: You said: Summarize. {named}" for p in ("openai-responses", "openai-chat", "anthropic")]
    assert lines[3] == (
        "gemini: You said: Summarize. Attached: document (application/pdf, 22 bytes); "
        'document (text/plain, 15 bytes): "Paris is sunny.".'
    )
    assert lines[4] == (
        "refused: Claude cannot take the audio 'memo.wav' (audio/wav) inline: it takes no audio input; "
        "transcribe it first, or use GeminiEngine"
    )


def test_simple_inference(tmp_path: Path) -> None:
    assert _run(tmp_path, "simple_inference.py").splitlines() == [
        "  system: You are a helpful assistant.",
        "    user: Hello, geppetto!",
        "llm_text: You said: Hello, geppetto!",
    ]


@pytest.mark.parametrize(
    ("flags", "last_line"),
    [
        ((), "   llm_text: You said: What is the weather in Paris?"),
        (("--with-uppercase",), "   llm_text: YOU SAID: WHAT IS THE WEATHER IN PARIS?"),
        (
            ("--with-logging", "--with-uppercase", "--with-tools"),
            "   llm_text: HERE IS WHAT THE TOOLS RETURNED. GET_WEATHER: PARIS: 21°C, CLEAR SKY.",
        ),
    ],
)
def test_middleware_inference_flags(tmp_path: Path, flags: tuple[str, ...], last_line: str) -> None:
    out = _run(tmp_path, "middleware_inference.py", *flags)
    assert out.splitlines()[-1] == last_line
    assert ("  tool_call:" in out) == ("--with-tools" in flags)


def test_chained_tool_loop_chains_every_request_after_the_first(tmp_path: Path) -> None:
    out = _run(tmp_path, "chained_tool_loop.py")
    requests = out.split("requests:\n", 1)[1].splitlines()
    assert len(requests) == 5
    assert "previous_response_id=None" in requests[0]
    assert all("previous_response_id=resp_" in r and "input items=1" in r for r in requests[1:])
    assert "← add: 4.0" in out and "← get_weather: Lisbon: 18°C, light rain" in out


def test_conversation_mode_names_one_conversation(tmp_path: Path) -> None:
    out = _run(tmp_path, "conversation_mode.py")
    conv = out.split("conversation id: ", 1)[1].split("\n", 1)[0]
    assert conv.startswith("conv_")
    requests = out.split("requests:\n", 1)[1].splitlines()
    assert [r.split()[:2] for r in requests] == [["POST", "/v1/conversations"]] + [["POST", "/v1/responses"]] * 2
    assert all(r.endswith(f"conversation={conv}") for r in requests[1:])


def test_cross_provider_session_continues_one_turn(tmp_path: Path) -> None:
    out = _run(tmp_path, "cross_provider_session.py")
    assert "paths: ['responses', 'responses', 'messages', 'messages', 'sim-1:streamGenerateContent']" in out
    assert out.splitlines()[-1] == (
        "blocks: ['user', 'tool_call', 'tool_use', 'llm_text', 'user', 'tool_call', 'tool_use', 'llm_text', "
        "'user', 'llm_text']"
    )


def test_compaction_summarizes_the_older_blocks_and_chains_again(tmp_path: Path) -> None:
    out = _run(tmp_path, "compaction.py")
    turns = out.split("requests:\n", 1)[0].splitlines()
    assert [line.split(" -> ")[1].split(":")[0] for line in turns] == [
        "2 blocks",
        "4 blocks",
        "6 blocks",
        "8 blocks",
        "4 blocks",  # past eight: a summary and the last two steps
        "6 blocks",
        "8 blocks",
    ]
    assert turns[4].endswith("(7 blocks compacted)")
    requests = out.split("requests:\n", 1)[1].splitlines()[:-1]
    assert [r.split("chained=")[1] for r in requests] == [
        "False",  # the first request
        "True",
        "True",
        "True",
        "False (the summary)",
        "False",  # the request after the compaction: a new chain (the one fallback)
        "True",
        "True",
    ]
    assert out.splitlines()[-1] == "fallbacks: 1 (fallback:fingerprint_mismatch)"

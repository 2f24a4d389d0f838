"""Files in prompts: a PDF and a text file go to each of the four engines, and an audio file Claude cannot
take is refused before anything is sent. Runs offline against the bundled simulator, whose answer names
what it was given.

    python examples/attachments.py

With real keys, drop the simulator and pass ``api_key=`` and a real model to each engine.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import geppetto as gp
from geppetto.simulator import serve


async def main() -> None:
    folder = Path(tempfile.mkdtemp())
    (folder / "report.pdf").write_bytes(b"%PDF-1.4 a tiny report")
    (folder / "notes.txt").write_text("Paris is sunny.")
    (folder / "memo.wav").write_bytes(b"RIFF....WAVE")
    with serve() as sim:
        for provider in ("openai-responses", "openai-chat", "anthropic", "gemini"):
            async with sim.engine(provider) as engine:
                session = gp.Session(engine)
                turn = await session.run("Summarize.", files=[folder / "report.pdf", folder / "notes.txt"])
                print(f"{provider}: {turn.blocks[-1].text}")
        async with sim.engine("anthropic") as engine:
            try:
                await gp.Session(engine).run("Transcribe.", files=[folder / "memo.wav"])
            except gp.UsageError as exc:
                print(f"refused: {exc}")


if __name__ == "__main__":
    asyncio.run(main())

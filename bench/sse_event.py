"""One long server-sent event: decoding time against its size, the SSE decoder now vs the one before it.

The event is one `data:` line of N MiB (a JSON string) fed in 64 KiB chunks, as httpx hands a body over.
The earlier decoder re-joined the unfinished line with each new chunk, so its time grew with the square of
the event's size; the decoder now keeps the pieces and joins them once. The earlier algorithm is kept
below, verbatim in its line handling, only to be timed side by side (it is stopped past 64 MiB, where it
takes minutes). Run: `.venv/bin/python bench/sse_event.py [MAX_MIB]` (default 128).
"""

from __future__ import annotations

import codecs
import re
import sys
import time

from geppetto.providers._sse import SSEDecoder

CHUNK = 64 * 1024
_LINE_END = re.compile(r"\r\n|\r|\n")


class QuadraticDecoder:
    """The line splitting of the decoder before the fix (events are not built: only the joining is timed)."""

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._partial = ""
        self.lines = 0

    def feed(self, chunk: bytes) -> None:
        text = self._utf8.decode(chunk)
        lines = _LINE_END.split(text) if "\r" in text else text.split("\n")
        lines[0] = self._partial + lines[0]
        self._partial = lines.pop()
        self.lines += len(lines)


def _time(decoder: object, body: bytes) -> float:
    feed = decoder.feed  # type: ignore[attr-defined]
    start = time.perf_counter()
    for i in range(0, len(body), CHUNK):
        feed(body[i : i + CHUNK])
    return time.perf_counter() - start


def main() -> None:
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    sizes = [m for m in (16, 32, 64, 128, 256) if m <= top] or [top]  # below 16: that one size (a smoke test)
    print(f"one SSE event of N MiB in {CHUNK // 1024} KiB chunks; seconds (best of 3 for the new decoder)")
    print(f"{'MiB':>5} {'new s':>8} {'new s/MiB':>10} {'before s':>9} {'before/new':>11}")
    for mib in sizes:
        body = b'data: "' + b"x" * (mib << 20) + b'"\n\n'
        new = min(_time(SSEDecoder(max_event_size=1 << 40), body) for _ in range(3))
        if mib <= 64:
            old = _time(QuadraticDecoder(), body)
            print(f"{mib:>5} {new:>8.3f} {new / mib:>10.4f} {old:>9.2f} {old / new:>10.0f}x")
        else:
            print(f"{mib:>5} {new:>8.3f} {new / mib:>10.4f} {'(skipped)':>9} {'':>11}")
    print("SUMMARY new decoder: linear in the event's size (s/MiB flat); before: quadratic")


if __name__ == "__main__":
    main()

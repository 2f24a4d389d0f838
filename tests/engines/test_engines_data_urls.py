"""``data:`` URLs read per RFC 2397 (percent-encoded or base64, the default media type, parameters), and an
empty one refused naming the file, for files and images, through the engines to the simulator."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from conformance_support import check_sent

from geppetto import Block, Turn, UsageError
from geppetto.providers._streaming import image_parts
from geppetto.simulator import Simulator
from geppetto.turns._data_url import DataURL, parse_data_url
from geppetto.turns._files import file_refs


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("data:text/plain,hi", DataURL("text/plain", b64(b"hi"))),
        ("data:,A%20brief%20note", DataURL("text/plain", b64(b"A brief note"), given_type=False)),
        ("data:;charset=utf-8,h%C3%A9", DataURL("text/plain", b64("hé".encode()), {"charset": "utf-8"}, False)),
        (
            "data:text/plain;charset=UTF-8;base64,aGk=",
            DataURL("text/plain", "aGk=", {"charset": "UTF-8"}),
        ),
        ("data:Application/PDF;base64,JVBE%0AR i0=", DataURL("application/pdf", "JVBERi0=")),
        ("DATA:image/png;name=a%20b.png;base64,iVBO", DataURL("image/png", "iVBO", {"name": "a b.png"})),
        ("data:text/csv,a,b%0A1,2", DataURL("text/csv", b64(b"a,b\n1,2"))),
    ],
)
def test_data_urls_are_read_per_rfc_2397(url: str, parsed: DataURL) -> None:
    assert parse_data_url(url) == parsed


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("data:application/pdf;base64,", "holds no data (nothing after the comma)"),
        ("data:text/plain,", "holds no data (nothing after the comma)"),
        ("data:text/plain;base64", "has no comma"),
        ("data:pdf;base64,JVBE", "names the media type 'pdf'; give type/subtype"),
    ],
)
def test_a_bad_data_url_is_refused_naming_the_file(url: str, says: str) -> None:
    block = Block.user("read it", files=[{"url": url, "filename": "report.pdf"}])
    with pytest.raises(UsageError, match=r"report\.pdf") as raised:
        file_refs(block)
    assert says in str(raised.value)
    assert str(raised.value).startswith("file 0 of the user block (report.pdf) ")


def test_a_percent_encoded_file_keeps_its_media_type_and_bytes() -> None:
    [ref] = file_refs(Block.user("read it", files=[{"url": "data:text/plain,hi"}]))
    assert (ref.kind, ref.media_type, ref.source, ref.value) == ("document", "text/plain", "data", b64(b"hi"))
    # The file's own media_type wins over the URL's.
    [ref] = file_refs(Block.user("x", files=[{"url": "data:,hi", "media_type": "text/markdown"}]))
    assert ref.media_type == "text/markdown"


def test_images_given_as_data_urls_are_read_the_same_way() -> None:
    block = Block.user("see", images=[{"url": "data:image/svg+xml,%3Csvg%2F%3E"}])
    assert image_parts(block) == [("base64", b64(b"<svg/>"), "image/svg+xml")]
    with pytest.raises(UsageError, match="an image of the user block holds no data"):
        image_parts(Block.user("see", images=[{"url": "data:image/png;base64,"}]))


@pytest.mark.parametrize("provider", ["openai-responses", "openai-chat", "anthropic", "gemini"])
async def test_a_percent_encoded_text_file_reaches_the_provider_whole(geppetto_sim: Simulator, provider: str) -> None:
    files: list[dict[str, Any]] = [{"url": "data:text/plain,Paris%20is%20sunny.", "filename": "notes.txt"}]
    sim = geppetto_sim
    async with sim.engine(provider) as engine:
        turn = await engine.run_inference(Turn(blocks=[Block.user("Summarize.", files=files)]))
    for request in sim.requests:
        check_sent(request.path, request.body)
    assert "(text/plain, 15 bytes)" in turn.blocks[-1].text
    assert "text/plain,Paris" not in str(sim.requests[-1].body)

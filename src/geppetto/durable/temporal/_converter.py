"""The data converter of geppetto's Temporal workflows: Turns and Blocks as their JSON form (the one
``geppetto.turns`` saves and loads exactly), everything else as Temporal's default JSON does it.

A Turn in workflow history is the Turn's JSON document (``dumps_json``), so a history is readable with any
JSON tool and loads back exactly: a replay decodes the very Turns the first run recorded.
"""

from __future__ import annotations

import json
from typing import Any

from temporalio.converter import (
    AdvancedJSONEncoder,
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
    JSONTypeConverter,
)

from ...turns import Block, Turn, block_from_json, block_to_json, dumps_json, loads_json

__all__ = ["DATA_CONVERTER", "TurnPayloadConverter"]


class _Encoder(AdvancedJSONEncoder):
    def default(self, o: Any) -> Any:
        if isinstance(o, Turn):
            return json.loads(dumps_json(o))
        if isinstance(o, Block):
            return json.loads(block_to_json(o))
        return super().default(o)


class _TurnTypes(JSONTypeConverter):
    def to_typed_value(self, hint: type, value: Any) -> Any:
        if hint is Turn and isinstance(value, dict):
            return loads_json(json.dumps(value), source="workflow history")
        if hint is Block and isinstance(value, dict):
            return block_from_json(json.dumps(value), source="workflow history")
        return JSONTypeConverter.Unhandled


class TurnPayloadConverter(CompositePayloadConverter):
    """Temporal's default payload converters with JSON that knows Turns and Blocks."""

    def __init__(self) -> None:
        converters = [
            JSONPlainPayloadConverter(encoder=_Encoder, custom_type_converters=[_TurnTypes()])
            if isinstance(c, JSONPlainPayloadConverter)
            else c
            for c in DefaultPayloadConverter.default_encoding_payload_converters
        ]
        super().__init__(*converters)


DATA_CONVERTER = DataConverter(payload_converter_class=TurnPayloadConverter)
"""The converter a client talking to geppetto's workflows needs: ``Client.connect(addr, data_converter=DATA_CONVERTER)``."""


def check_client(client: Any, who: str) -> None:
    """Raise naming the fix when ``client`` does not use :data:`DATA_CONVERTER`."""
    from ..._exceptions import UsageError

    if not issubclass(client.data_converter.payload_converter_class, TurnPayloadConverter):
        raise UsageError(
            f"{who} needs a client that reads Turns: "
            "Client.connect(address, data_converter=geppetto.durable.temporal.DATA_CONVERTER)"
        )

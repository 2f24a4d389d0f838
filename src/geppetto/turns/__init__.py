"""The data model: Turn, Block, BlockKind, typed keys, serde and chat-message conversion.

The names imported as ``name as name`` and left out of ``__all__`` are geppetto's own internal API: the
copy-on-write snapshots, the edit watch, block serde and the data-URL and file readers that sessions, stores,
tools and engines share. They are not part of the public API (not in ``__all__``, not documented) and may
change in any release; the rest of geppetto imports them from here, never from this package's private modules.
"""

from ._attach import attachments as attachments
from ._builtin import (
    PAYLOAD_BUILTIN,
    PAYLOAD_CITATIONS,
    PAYLOAD_EXTRA,
    PAYLOAD_ITEM,
    PAYLOAD_LOGPROBS,
    PAYLOAD_PHASE,
    BuiltinTool,
    builtin_of,
    raw_block,
    with_extra,
)
from ._citations import citation_sources, source_key
from ._cow import Frozen as Frozen
from ._cow import FrozenBlock as FrozenBlock
from ._cow import LazyBlockList as LazyBlockList
from ._cow import Mark as Mark
from ._cow import added as added
from ._cow import block_ids as block_ids
from ._cow import freeze as freeze
from ._cow import frozen_from as frozen_from
from ._cow import held as held
from ._cow import mark as mark
from ._cow import new_blocks as new_blocks
from ._cow import origin_prefix as origin_prefix
from ._cow import rebase as rebase
from ._cow import settled as settled
from ._data_url import parse_data_url as parse_data_url
from ._files import PAYLOAD_FILES, attach_files, file_attachment
from ._files import FileRef as FileRef
from ._files import file_refs as file_refs
from ._keys import (
    BlockMetadata,
    JSONCodec,
    Key,
    KeyFamily,
    TurnData,
    TurnMetadata,
    block_meta_key,
    check_json_value,
    parse_key,
    turn_data_key,
    turn_meta_key,
)
from ._known import (
    BLOCK_META_INFERENCE_ID,
    BLOCK_META_MIDDLEWARE,
    BLOCK_META_PREFIX_FINGERPRINT,
    BLOCK_META_PROVIDER,
    BLOCK_META_RESPONSE_ID,
    TURN_META_INFERENCE_ID,
    TURN_META_MODEL,
    TURN_META_PROVIDER,
    TURN_META_SESSION_ID,
    TURN_META_STOP_REASON,
    TURN_META_USAGE,
)
from ._known import PREFIX_POLICIES as PREFIX_POLICIES
from ._known import TURN_DATA_PREFIX_POLICY as TURN_DATA_PREFIX_POLICY
from ._known import TURN_META_HISTORY_EDIT as TURN_META_HISTORY_EDIT
from ._messages import blocks_from_messages, messages_from_turn, result_text, turn_from_messages
from ._model import (
    PAYLOAD_ARGS,
    PAYLOAD_ENCRYPTED_CONTENT,
    PAYLOAD_ERROR,
    PAYLOAD_ID,
    PAYLOAD_IMAGES,
    PAYLOAD_ITEM_ID,
    PAYLOAD_NAME,
    PAYLOAD_RESULT,
    PAYLOAD_SIGNATURE,
    PAYLOAD_SUMMARY,
    PAYLOAD_TEXT,
    PAYLOAD_THOUGHT_SIGNATURE,
    Block,
    BlockKind,
    Turn,
    copy_json,
    new_id,
)
from ._model import seal_block as seal_block
from ._model import seal_of as seal_of
from ._serde import (
    FORMAT,
    dumps_json,
    dumps_yaml,
    loads_json,
    loads_yaml,
    turn_from_dict,
    turn_to_dict,
)
from ._serde import block_from_json as block_from_json
from ._serde import block_to_json as block_to_json
from ._serde import blocks_from_json as blocks_from_json
from ._serde_files import MAX_TURN_FILE_BYTES, load_turn, save_turn
from ._watch import NO_EDIT as NO_EDIT
from ._watch import BlockList as BlockList
from ._watch import Watch as Watch
from ._watch import watch_metadata_keys as watch_metadata_keys

__all__ = [
    "BLOCK_META_INFERENCE_ID",
    "BLOCK_META_MIDDLEWARE",
    "BLOCK_META_PREFIX_FINGERPRINT",
    "BLOCK_META_PROVIDER",
    "BLOCK_META_RESPONSE_ID",
    "FORMAT",
    "MAX_TURN_FILE_BYTES",
    "PAYLOAD_ARGS",
    "PAYLOAD_BUILTIN",
    "PAYLOAD_CITATIONS",
    "PAYLOAD_ENCRYPTED_CONTENT",
    "PAYLOAD_ERROR",
    "PAYLOAD_EXTRA",
    "PAYLOAD_FILES",
    "PAYLOAD_ID",
    "PAYLOAD_IMAGES",
    "PAYLOAD_ITEM",
    "PAYLOAD_ITEM_ID",
    "PAYLOAD_LOGPROBS",
    "PAYLOAD_NAME",
    "PAYLOAD_PHASE",
    "PAYLOAD_RESULT",
    "PAYLOAD_SIGNATURE",
    "PAYLOAD_SUMMARY",
    "PAYLOAD_TEXT",
    "PAYLOAD_THOUGHT_SIGNATURE",
    "TURN_META_INFERENCE_ID",
    "TURN_META_MODEL",
    "TURN_META_PROVIDER",
    "TURN_META_SESSION_ID",
    "TURN_META_STOP_REASON",
    "TURN_META_USAGE",
    "Block",
    "BlockKind",
    "BlockMetadata",
    "BuiltinTool",
    "JSONCodec",
    "Key",
    "KeyFamily",
    "Turn",
    "TurnData",
    "TurnMetadata",
    "attach_files",
    "block_meta_key",
    "blocks_from_messages",
    "builtin_of",
    "check_json_value",
    "citation_sources",
    "copy_json",
    "dumps_json",
    "dumps_yaml",
    "file_attachment",
    "load_turn",
    "loads_json",
    "loads_yaml",
    "messages_from_turn",
    "new_id",
    "parse_key",
    "raw_block",
    "result_text",
    "save_turn",
    "source_key",
    "turn_data_key",
    "turn_from_dict",
    "turn_from_messages",
    "turn_meta_key",
    "turn_to_dict",
    "with_extra",
]

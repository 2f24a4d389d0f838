"""geppetto: provider-agnostic LLM inference on a Turn/Block data model."""

from ._exceptions import *  # noqa: F403
from .turns import Block, BlockKind, Turn

__all__ = ["Block", "BlockKind", "Turn"]

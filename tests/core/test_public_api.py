"""The public surface: sorted, unique ``__all__`` lists that import, and the core names of DESIGN §7."""

from __future__ import annotations

import importlib
import subprocess
import sys
from types import ModuleType

import pytest

import geppetto as gp

PACKAGES = ["geppetto", "geppetto.turns", "geppetto.events", "geppetto.middleware", "geppetto.testing"]


def _isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions, each alphabetical."""
    group = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return group, name


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_unique_and_importable(name: str) -> None:
    module: ModuleType = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=_isort_key)
    assert len(exported) == len(set(exported))
    missing = [n for n in exported if not hasattr(module, n)]
    assert missing == []
    for n in exported:
        exec(f"from {name} import {n}", {})  # every name imports the way a user writes it


def test_every_name_in_geppetto_all_resolves() -> None:
    unresolved = [n for n in gp.__all__ if getattr(gp, n, None) is None]
    assert unresolved == []
    assert "__all__" not in gp.__all__


def test_the_test_doubles_are_public() -> None:
    """``geppetto.testing`` imports on its own (no import cycle) and its doubles are top-level names too."""
    import geppetto.testing as testing

    assert testing.__all__ == ["FunctionEngine", "ScriptedEngine"]
    assert set(testing.__all__) <= set(gp.__all__)
    assert all(getattr(gp, n) is getattr(testing, n) for n in testing.__all__)
    assert all(
        isinstance(getattr(testing, n)(*args), gp.Engine)
        for n, args in [("FunctionEngine", (print,)), ("ScriptedEngine", ())]
    )
    fresh = subprocess.run(
        [sys.executable, "-c", "import geppetto.testing as t; print(' '.join(t.__all__))"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (fresh.returncode, fresh.stdout, fresh.stderr) == (0, "FunctionEngine ScriptedEngine\n", "")


def test_isort_key_orders_groups() -> None:
    assert sorted(["run_sync", "Turn", "FORMAT", "Block", "append"], key=_isort_key) == [
        "FORMAT",
        "Block",
        "Turn",
        "append",
        "run_sync",
    ]


def test_core_names_of_design_section_7() -> None:
    from geppetto import Block, BlockKind, Engine, Middleware, Turn, run_sync, with_middleware
    from geppetto.middleware import (
        logging_middleware,
        new_blocks_not_in,
        reorder_tool_results,
        snapshot_block_ids,
        system_prompt,
    )

    core = {"Turn", "Block", "BlockKind", "Engine", "run_sync", "with_middleware", "Middleware"}
    assert core <= set(gp.__all__)
    assert {
        "system_prompt",
        "reorder_tool_results",
        "logging_middleware",
        "snapshot_block_ids",
        "new_blocks_not_in",
    } <= set(importlib.import_module("geppetto.middleware").__all__)
    assert all(
        callable(x)
        for x in (
            Turn,
            Block,
            run_sync,
            with_middleware,
            logging_middleware,
            new_blocks_not_in,
            reorder_tool_results,
            snapshot_block_ids,
            system_prompt,
        )
    )
    assert [k.value for k in BlockKind] == ["system", "user", "llm_text", "tool_call", "tool_use", "reasoning", "other"]
    assert Engine is gp.Engine and Middleware is gp.Middleware


def test_exception_tree() -> None:
    usage = [gp.ConfigurationError, gp.KeyFormatError, gp.SessionBusyError]
    provider = [
        gp.AuthenticationError,
        gp.BadRequestError,
        gp.NotFoundError,
        gp.RateLimitError,
        gp.ServerError,
        gp.ProviderConnectionError,
        gp.StreamError,
    ]
    assert all(issubclass(cls, gp.UsageError) for cls in usage)
    assert all(issubclass(cls, gp.ProviderError) for cls in provider)
    assert issubclass(gp.PreviousResponseNotFoundError, gp.BadRequestError)
    roots = [
        gp.UsageError,
        gp.TurnFormatError,
        gp.MetadataTypeError,
        gp.ToolDefinitionError,
        gp.MaxIterationsError,
        gp.StoreError,
        gp.ProviderError,
        gp.InferenceCancelled,
    ]
    assert [cls.__mro__[1] for cls in roots] == [gp.GeppettoError] * len(roots)
    err = gp.StreamError("stream ended early", received="3 text deltas", provider="anthropic", request_id="req_1")
    assert str(err) == "[anthropic] stream ended early; received: 3 text deltas (request id req_1)"
    assert (err.received, err.provider, err.request_id, err.status) == ("3 text deltas", "anthropic", "req_1", None)
    turn = gp.Turn()
    assert gp.MaxIterationsError("bound hit", turn=turn).turn is turn
    fmt = gp.TurnFormatError("bad", source="f.yaml", field="blocks[0].kind")
    assert (str(fmt), fmt.source, fmt.field) == ("f.yaml: blocks[0].kind: bad", "f.yaml", "blocks[0].kind")

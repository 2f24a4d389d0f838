"""Session: a conversation as an append-only history of turn snapshots, one inference at a time."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from .._exceptions import SessionBusyError, StoreError, UsageError, UsageLimitExceeded
from ..engine import Engine
from ..events import EventInterrupt, EventSink, check_sink, metadata_for, publish
from ..middleware import Middleware, structured_output, tool_loop, with_middleware
from ..output import STRUCTURED_OUTPUT, Validator, output_config, validating
from ..pricing import PriceTable
from ..tools import (
    ApprovalPolicy,
    JournalRecord,
    PendingCall,
    Require,
    RunJournal,
    Tool,
    ToolRegistry,
    awaiting,
    drop_calls,
    rebuild,
)
from ..turns import (
    TURN_META_HISTORY_EDIT,
    TURN_META_INFERENCE_ID,
    TURN_META_SESSION_ID,
    Block,
    BlockList,
    Frozen,
    LazyBlockList,
    Turn,
    new_id,
    rebase,
)
from . import _approvals, _journal, _running
from ._collector import settle
from ._handle import ExecutionHandle
from ._history import History, Timeline, _derive
from ._running import RUN_HOOKS
from ._store import EventLogStore, TimedEvent, TurnStore
from ._stream import InferenceStream, PartialValues, TextDeltas
from ._usage import TURN_META_INFERENCE_USAGE, TURN_META_SESSION_USAGE, SessionUsage, UsageLimits, UsageMeter

if TYPE_CHECKING:
    from ._edits import Edit

__all__ = ["INCOMING_HOOKS", "RUN_HOOKS", "ExecutionHandle", "Session"]

IncomingHook = Callable[[Mapping[str, str]], contextlib.AbstractContextManager[Any]]
INCOMING_HOOKS: list[IncomingHook] = []
"""Context managers a server enters while it handles a request (given the request's headers), so an
inference it starts inherits their context: e.g. an incoming W3C ``traceparent`` as the parent span."""

log = logging.getLogger("geppetto.session")

MODEL_STRING_ENGINE: Callable[[str], Engine] | None = None
"""What builds the engine of ``Session("provider:model")`` (``geppetto.engine_for``, set by the package)."""


def use_model_strings(build: Callable[[str], Engine]) -> None:
    """Have ``Session("provider:model")`` build its engine with ``build``: the package root passes
    ``geppetto.engine_for``, which reads profiles, a layer above this one."""
    global MODEL_STRING_ENGINE
    MODEL_STRING_ENGINE = build


class Session:
    """A conversation with one engine: ``session_id``, an append-only ``history`` of turn snapshots and
    at most one running inference.

    ``tools`` (a :class:`~geppetto.ToolRegistry` or a list of typed functions) wraps the engine in
    :func:`~geppetto.middleware.tool_loop` innermost, ``middlewares`` outside it (first outermost).
    ``store`` gets every completed output snapshot; ``sinks`` receive the events of every inference.
    With ``record_events=True`` the store (an :class:`~geppetto.session.EventLogStore`) also keeps each
    inference's events: with its snapshot, or alone when the inference failed or was cancelled.
    ``limits`` (:class:`~geppetto.UsageLimits`) bound what the session spends, checked before each request
    (:class:`~geppetto.UsageLimitExceeded`); ``prices`` is the table its requests are priced with
    (``geppetto.pricing``); :attr:`usage` holds the totals.

    ``approval`` (an :class:`~geppetto.ApprovalPolicy`, or its ``require`` rule: ``True``, ``False`` or a
    predicate ``(tool_name, arguments) -> bool``) decides which tool calls wait for a person; by default
    each tool's ``requires_approval`` does. An inference whose model calls such a tool (or a client-side
    tool) ends with the call waiting: see :attr:`pending_approvals`, :meth:`resume`, :meth:`drop_pending`.

    ``engine`` may be a model string (``Session("openai:gpt-4.1")``, see :func:`~geppetto.engine_for`);
    the session then closes that engine in :meth:`aclose` (``async with Session(...) as session``).
    ``deps`` is handed to every tool that takes a :class:`~geppetto.ToolContext` (``ctx.deps``).

    >>> session = Session(engine)                      # doctest: +SKIP
    >>> session.prompt("Hello")                        # doctest: +SKIP
    >>> out = await session.start_inference().wait()   # doctest: +SKIP
    """

    def __init__(
        self,
        engine: Engine | str | None,
        tools: ToolRegistry | Iterable[Tool | Callable[..., Any]] | None = None,
        middlewares: Sequence[Middleware] = (),
        store: TurnStore | None = None,
        *,
        session_id: str | None = None,
        sinks: Sequence[EventSink] = (),
        tool_loop_options: dict[str, Any] | None = None,
        record_events: bool = False,
        limits: UsageLimits | None = None,
        prices: PriceTable | None = None,
        approval: ApprovalPolicy | Require | None = None,
        deps: Any = None,
    ) -> None:
        self._owned: Engine | None = None
        if isinstance(engine, str):
            assert MODEL_STRING_ENGINE is not None  # set when the geppetto package is imported
            engine = self._owned = MODEL_STRING_ENGINE(engine)
        checked = self._check_engine(engine)
        self._made = (tuple(middlewares), tool_loop_options, approval)  # what a fork is made with too
        if limits is not None and not isinstance(limits, UsageLimits):
            raise UsageError(f"limits= takes a geppetto.UsageLimits(...), got {type(limits).__name__}")
        if record_events and not isinstance(store, EventLogStore):
            raise UsageError(
                "record_events=True needs a store that keeps event logs: pass store=open_store() "
                "(geppetto.session.stores) or MemoryTurnStore()"
            )
        self.session_id = session_id or new_id()
        self.deps = deps
        """The application object this session's tools receive as ``ctx.deps`` (:class:`~geppetto.ToolContext`)."""
        self.store = store
        self.record_events = record_events
        if callable(sinks) or not isinstance(sinks, Iterable):
            raise UsageError(
                f"Session(sinks=...) takes a list of sinks, e.g. sinks=[printer]; got a {type(sinks).__name__}"
            )
        self.sinks = tuple(check_sink(s, "Session(sinks=...)") for s in sinks)
        self.tools: ToolRegistry | None = None
        chain = [structured_output(), *middlewares]
        if tools is not None:
            self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
            options = dict(tool_loop_options or {})
            if approval is not None:
                options["approval"] = approval
            chain.append(tool_loop(self.tools, **options))
        self._meter = UsageMeter(limits)
        self.prices = prices
        """The price table this session's requests are priced with (None: ``geppetto.pricing.default_prices()``)."""
        chain.append(self._meter.middleware)  # innermost: it sees every request the tool loop makes
        self._chain = tuple(chain)
        self._run_output = False
        """Whether the latest turn's structured-output config came from ``run(..., output=...)``."""
        self.engine: Engine
        self._given: Engine
        self.use(checked)
        self._timeline = Timeline()
        self._ran: set[str] = set()  # the Turn ids this session's inferences ran as
        self._handle: ExecutionHandle | None = None
        self._interrupted: str | None = None  # an inference cut off mid tool loop, its journal in the store
        self._journal_dirty = False  # the store's journal holds rows of an inference this session left
        self._resume_journal: tuple[str, builtins.list[JournalRecord]] | None = None  # read for the next run
        self._stored: Turn | None = None  # the latest snapshot the store holds, as far as this session knows

    @staticmethod
    def _check_engine(engine: object) -> Engine:
        if isinstance(engine, type):
            raise UsageError(
                f"Session got the class {engine.__name__}, not an engine: instantiate it, "
                f"e.g. Session({engine.__name__}(...))"
            )
        if engine is None or not callable(getattr(engine, "run_inference", None)):
            raise UsageError(
                "Session needs a model string or an engine with `async run_inference(turn)`: pass one, e.g. "
                "Session('openai:gpt-4.1'), Session(geppetto.engine_for('anthropic:claude-sonnet-4-5', api_key=...)) "
                "or Session(geppetto.ScriptedEngine([...]))"
            )
        return cast(Engine, engine)

    async def aclose(self) -> None:
        """Close the engine this session built from a model string (``Session("openai:gpt-4.1")``): its
        HTTP client, and the simulator of ``"sim"``. An engine given as an object stays open: its owner
        closes it."""
        owned, self._owned = self._owned, None
        close = getattr(owned, "aclose", None)
        if close is not None:
            await close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def use(self, engine: Engine) -> None:
        """Run the next inferences on ``engine``, wrapped in this session's middlewares and tool loop.

        The history stays: a conversation started on one provider continues on another (reasoning the
        new provider cannot take stays in the Turn and out of its requests)."""
        self._check_engine(engine)
        self._given = engine
        remember = getattr(engine, "use_verdict_store", None)
        if callable(remember) and callable(getattr(self.store, "save_endpoint_verdict", None)):
            # what the engine learns of its endpoint's state-keeping is kept with the sessions
            remember(self.store)
        self._meter.attach(engine)
        self.engine = with_middleware(engine, *self._chain)

    @property
    def usage(self) -> SessionUsage:
        """What the session's requests used and cost so far (a copy): ``requests``, ``tool_calls``, tokens
        (``input_tokens``, ``output_tokens``, ``cached_tokens``, ``cache_write_tokens``, ``reasoning_tokens``)
        and ``cost`` in USD (None when a request could not be priced). A restored session starts from the
        totals its latest stored snapshot holds."""
        return self._meter.totals.copy()

    @property
    def limits(self) -> UsageLimits | None:
        """The :class:`~geppetto.UsageLimits` checked before each request; set it to change them."""
        return self._meter.limits

    @limits.setter
    def limits(self, value: UsageLimits | None) -> None:
        if value is not None and not isinstance(value, UsageLimits):
            raise UsageError(f"session.limits takes a geppetto.UsageLimits(...) or None, got {type(value).__name__}")
        self._meter.limits = value

    @classmethod
    async def restore(cls, engine: Engine | str, store: TurnStore, session_id: str, **kwargs: Any) -> Session:
        """A session continuing ``session_id`` from the latest snapshot ``store`` holds (raises
        :class:`~geppetto.UsageError` when it holds none). Only that snapshot is read: the restored
        session's :attr:`history` starts there, and older snapshots stay in the store
        (``store.load_snapshots``). When the store's journal shows an inference that stopped mid tool loop
        (its process died), :attr:`interrupted` names it and :meth:`resume` goes on with it."""
        load_latest = getattr(store, "load_latest", None)
        if load_latest is not None:
            latest = await load_latest(session_id)
        else:
            snapshots = await store.load_session(session_id)
            latest = snapshots[-1] if snapshots else None
        interrupted = await _journal.interrupted_in(store, session_id, latest)
        if latest is None and interrupted is None:
            raise UsageError(
                f"the store holds no snapshots for session {session_id!r}; list them with store.list_sessions()"
            )
        session = cls(engine, store=store, session_id=session_id, **kwargs)
        if latest is not None:  # None: its first inference was interrupted, and only the journal holds it
            session._adopt(latest)
            session._stored = latest
        session._interrupted = interrupted
        session._journal_dirty = interrupted is not None
        settle(collect=False)  # what it loaded is long-lived (session/_collector.py); a full cycle waits for a save
        return session

    def _push(self, turn: Turn) -> None:
        self._timeline.push(turn)

    def _adopt(self, turn: Turn) -> None:
        self._settle_latest()
        self._push(turn)
        totals = TURN_META_SESSION_USAGE.get(turn.metadata)
        own = TURN_META_SESSION_ID.get(turn.metadata) == self.session_id
        # A restored snapshot carries the session's totals so far, so limits hold across processes; another
        # session's totals are not ours, and totals already counted here are never replaced.
        if totals is not None and own and not self._meter.totals.requests:
            self._meter.totals = SessionUsage.from_dict(totals)

    def _settle_latest(self) -> Frozen | None:
        return self._timeline.settle_latest()

    @property
    def _known(self) -> set[str]:
        """The ids of the blocks earlier snapshots hold."""
        return self._timeline.known

    # -- history ------------------------------------------------------------------------------
    @property
    def history(self) -> History:
        """Every snapshot, oldest first (since the restore, for a restored session). Append-only: seeds
        from :meth:`prompt`/:meth:`append` and the output of each completed inference. The latest is
        the Turn object itself; older ones are isolated copies rebuilt on each read, sharing their
        unchanged blocks in memory."""
        return History(self._timeline.entries)

    @property
    def latest(self) -> Turn | None:
        return self._timeline.latest

    @property
    def running(self) -> bool:
        return self._handle is not None and self._handle.running

    def append(self, turn: Turn) -> Turn:
        """Add ``turn`` (for example a first turn holding a system block) as the latest snapshot. A snapshot
        of this same session (its stored latest, say) brings its usage totals along when none were counted yet."""
        self._check_idle("append a turn")
        _approvals.check_no_waiting(self.latest, self.session_id, "append a turn")
        self._interrupted = None  # the next inference starts from this turn, not from the journal
        self._adopt(turn)
        return turn

    def prompt(
        self,
        text: str,
        images: builtins.list[dict[str, Any]] | None = None,
        files: Iterable[Any] | None = None,
    ) -> Turn:
        """Start the next turn: copy the latest snapshot (its blocks shared until
        read, so the copy is isolated), give it a fresh ``Turn.id``, append a user block and add it to
        the history. Returns that seed. ``files`` are attachments, as :meth:`Block.user` takes them."""
        self._check_idle("prompt")
        expired = _approvals.check_no_waiting(self.latest, self.session_id, "prompt")
        user = Block.user(text, images, files)  # a bad attachment fails before the history changes
        self._interrupted = None  # a new turn: an interrupted inference is abandoned (its journal cleared)
        frozen = self._settle_latest()
        latest = self.latest
        seed = Turn() if latest is None or frozen is None else _derive(latest, frozen, new_id())
        TURN_META_INFERENCE_ID.delete(seed.metadata)  # the seed is not the product of an inference yet
        TURN_META_INFERENCE_USAGE.delete(seed.metadata)
        TURN_META_HISTORY_EDIT.delete(seed.metadata)  # it says what made the snapshot before
        if expired:
            drop_calls(seed, only_expired=True)  # the model reads that nobody approved them in time
        seed.append(user)
        self._push(seed)
        return seed

    # -- history edits (``_edits``: each a function Turn -> Turn) ------------------------------------
    async def rewind(self, n: int = 1) -> Turn:
        """Drop the last ``n`` prompts with their answers: a new latest snapshot (saved to the store) holds
        the Turn as it was before the ``n``-th last prompt. The next request re-anchors on the latest
        response still in it (a conversation is cut back to it). Raises :class:`~geppetto.UsageError` when the
        Turn holds fewer prompts (prompts folded into a compaction summary are not counted)."""
        from . import _edits  # loaded by the first history edit, not by `import geppetto`

        return await self._commit_edit(_edits.rewind(n), "rewind")

    async def fork(self, *, session_id: str | None = None) -> Session:
        """A new session (``session_id``, else a fresh id) sharing this one's history so far, made with the
        same engine, tools, middlewares, store and options; its first snapshot (saved) is this session's
        latest. Each goes on on its own: chained requests of both continue from the shared response; in
        conversation mode the fork's first request starts its own conversation."""
        from . import _edits

        seed = self._edit_seed("fork")
        origin = self.latest
        assert origin is not None
        child_id = session_id or new_id()
        forked = _edits.fork(self.session_id, origin.id, child_id)
        child = self._sibling(child_id)
        # the child's first snapshot: it goes on from there as any session from its latest
        await child._complete(forked(seed), None)
        return child

    async def edit(self, block_id: str, text: str | None = None, *, payload: Mapping[str, Any] | None = None) -> Turn:
        """Change block ``block_id`` of the latest turn: its ``text``, and/or the ``payload`` fields given. A new
        latest snapshot (saved) holds it, marked as edited by ``session.edit``; the next request re-anchors on
        the latest response before it."""
        from . import _edits

        return await self._commit_edit(_edits.edit(block_id, text, payload), "edit a block")

    async def remove(self, block_id: str) -> Turn:
        """Remove block ``block_id`` from the latest turn (a tool call together with its result, and the
        other way round): a new latest snapshot (saved); the next request re-anchors before it."""
        from . import _edits

        return await self._commit_edit(_edits.remove(block_id), "remove a block")

    def _edit_seed(self, action: str) -> Turn:
        """A copy of the latest snapshot under a fresh Turn id, not the product of an inference: what a
        history edit changes."""
        self._check_idle(action)
        frozen = self._settle_latest()
        latest = self.latest
        if latest is None or frozen is None:
            raise UsageError(f"cannot {action}: the session holds no turn yet; call session.run(text) first")
        seed = _derive(latest, frozen, new_id())
        # no inference made the edit: the ids and usage of the one that made the latest do not carry over
        TURN_META_INFERENCE_ID.delete(seed.metadata)
        TURN_META_INFERENCE_USAGE.delete(seed.metadata)
        TURN_META_SESSION_ID.set(seed.metadata, self.session_id)
        return seed

    async def _commit_edit(self, change: Edit, action: str) -> Turn:
        """Apply a history edit to a seed of the latest snapshot, add it as the latest and save it."""
        out = change(self._edit_seed(action))
        await self._complete(out, None)
        return out

    def _sibling(self, session_id: str) -> Session:
        """A session made as this one was, under ``session_id`` (a fork)."""
        middlewares, tool_loop_options, approval = self._made
        return type(self)(
            self._given,
            self.tools,
            middlewares,
            self.store,
            session_id=session_id,
            sinks=self.sinks,
            tool_loop_options=tool_loop_options,
            record_events=self.record_events,
            limits=self.limits,
            prices=self.prices,
            approval=approval,
            deps=self.deps,
        )

    # -- tool calls waiting for a person -----------------------------------------------------------
    def _continued(self) -> Turn:
        """A copy of the latest snapshot under the same Turn id (the same turn going on: a resume)."""
        frozen = self._settle_latest()
        latest = self.latest
        assert latest is not None and frozen is not None
        return _derive(latest, frozen, latest.id)

    @property
    def pending_approvals(self) -> builtins.list[PendingCall]:
        """The tool calls of the latest snapshot waiting for a person (``kind="approval"``) or the
        client (``kind="client"``), in call order; empty when nothing waits."""
        return awaiting(self.latest)

    @property
    def interrupted(self) -> str | None:
        """The id of an inference that stopped mid tool loop (its process died, or a request failed after tools
        ran) and that :meth:`resume` goes on with from the store's journal; None when there is none."""
        return self._interrupted

    async def resume(self, decisions: Mapping[str, Any] | None = None) -> Turn:
        """Answer waiting tool calls and continue the inference; returns its output turn.

        With no decisions and an :attr:`interrupted` inference, go on with it instead: the Turn as it stood
        before its last tools ran is rebuilt from the journal, a call whose result is journaled is not run
        again, one that started and never returned follows its tool's ``on_interrupted`` policy.

        ``decisions`` maps call ids to ``True`` (approve: the tool runs), ``False`` (deny) or a string (deny
        with that reason, which the model reads); for a client-side call, to the client's result (a
        :class:`~geppetto.tools.ToolReportedError` for its error). Calls left out keep waiting (the approved
        ones run now, and the model goes on once nothing waits); calls that expired are refused.
        Raises :class:`~geppetto.UsageError` for an id that does not wait or a decision of the wrong type.
        """
        if not decisions and self._interrupted is not None and not awaiting(self.latest):
            return await self._go_on()
        self._resume_seed(decisions or {})
        return await self.start_inference().wait()

    async def drop_pending(self, reason: str = "") -> Turn:
        """Refuse every waiting tool call without running it (the model will read that it was dropped,
        with ``reason``) and save that as the latest snapshot, so the session can be prompted again."""
        self._check_idle("drop pending tool calls")
        _approvals.check_drop(self.latest, self.session_id)
        out = _approvals.dropped(self._continued(), reason)
        await self._complete(out, None)
        return out

    def _resume_seed(self, decisions: Mapping[str, Any]) -> Turn:
        """Check ``decisions`` and add the seed snapshot that carries them (the same Turn, going on); the
        caller starts the inference. Nothing changes when they are refused."""
        self._check_idle("resume")
        _approvals.check_resume(self.latest, decisions, self.session_id, has_tools=self.tools is not None)
        seed = _approvals.decided(self._continued(), decisions)
        self._push(seed)
        return seed

    async def _go_on(self) -> Turn:
        """Go on with the interrupted inference from the store's journal; returns its output turn."""
        self._check_idle("resume")
        inference_id = self._interrupted
        assert inference_id is not None
        if self.tools is None:
            raise UsageError(
                "this session has no tools to go on with its interrupted inference: restore it with the same "
                "tools, e.g. Session.restore(engine, store, session_id, tools=[...])"
            )
        records = await _journal.journal_records(self.store, self.session_id)
        turn = rebuild(records, inference_id, self.latest)
        if turn is None:
            self._interrupted = None
            raise UsageError(
                f"inference {inference_id} of session {self.session_id} cannot be resumed: the store's journal "
                "no longer rebuilds its Turn; start the next turn with session.prompt(text)"
            )
        self._go_on_from(inference_id, records, turn)
        return await self.start_inference(inference_id=inference_id).wait()

    def _go_on_from(self, inference_id: str, records: builtins.list[JournalRecord], turn: Turn) -> None:
        """Make ``turn`` (rebuilt from ``records``) the latest snapshot, for ``inference_id`` to go on from; the
        caller starts the inference under that id."""
        totals = _journal.carried_totals(turn, self._meter.totals)
        if totals is not None:
            self._meter.totals = totals
        log.info("session %s: going on with interrupted inference %s from its journal", self.session_id, inference_id)
        self._settle_latest()
        self._push(_journal.seed_of(turn))
        self._resume_journal = (inference_id, records)
        self._interrupted = None
        self._journal_dirty = False  # the journal is this inference's own again

    # -- inference ----------------------------------------------------------------------------
    def start_inference(self, *, inference_id: str | None = None) -> ExecutionHandle:
        """Run the engine on a copy of the latest snapshot in a task and return its handle.

        ``inference_id`` names the inference (a fresh id when None), e.g. one a server recorded first.
        The working turn keeps the latest snapshot's ``Turn.id`` unless an inference already ran as that id
        (running again with no new prompt, or after ``append(latest.clone())``): then it gets a fresh one,
        which the handle's ``turn_id`` and the output carry.

        Raises :class:`~geppetto.SessionBusyError` while another inference runs, and
        :class:`~geppetto.UsageError` when there is nothing to run.
        """
        self._check_idle("start an inference")
        _approvals.check_can_start(self.latest, self.session_id)
        seed = self.latest
        if seed is None or not seed.blocks:
            raise UsageError(
                "the session has nothing to run: its latest turn is empty; call session.prompt(text) "
                "or session.append(turn) with at least one block first"
            )
        inference_id = inference_id or new_id()
        turn_id = _running.turn_id_for(seed, self._ran, self.session_id)
        # the seed's own new blocks, stamped with the id it can no longer run as, move to the fresh one
        moved = _running.own_blocks(seed, self._known) if turn_id != seed.id else []
        frozen = self._settle_latest()
        assert frozen is not None
        work = _running.working_turn(
            seed, frozen, turn_id, moved, session_id=self.session_id, inference_id=inference_id
        )
        prior = self._known
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise UsageError(
                "start_inference() needs a running event loop: call it from async code, "
                "e.g. asyncio.run(session.run(text))"
            ) from None
        self._ran.add(work.id)
        task = loop.create_task(self._run(work, inference_id, prior))
        self._handle = ExecutionHandle(task, inference_id=inference_id, turn_id=work.id)
        return self._handle

    async def run(
        self,
        text: str,
        *,
        output: Any = None,
        files: Iterable[Any] | None = None,
        validators: Sequence[Validator] | None = None,
    ) -> Turn:
        """``prompt(text)``, run the inference and return its output turn. Cancelling the caller (a
        timeout included) cancels the inference, as :meth:`ExecutionHandle.wait` describes.

        ``output`` asks for a structured answer: a pydantic model, dataclass, TypedDict, JSON schema dict
        or a :class:`~geppetto.StructuredOutputConfig` (``output_config(Model, require_valid=True)``).
        Read the answer with :func:`~geppetto.output_of` (``output_of(turn, Model)``). It holds for this
        run only; a config you set in the turn's data yourself stays. ``files`` are attachments (paths or
        dicts, as :meth:`Block.user` takes them).

        ``validators`` (with ``output``) are business rules the answer must pass: each is called with the
        answer (built as ``output`` when it is a type) and raises :class:`~geppetto.Retry` to send its
        message back and have the model answer again, up to the output's ``max_retries`` (default 2);
        then :class:`~geppetto.OutputValidationError` names the validator.
        """
        await self._unwound()
        with validating(output, validators):
            self._seed(text, output, files)
            handle = self.start_inference()
        return await handle.wait()

    def stream(
        self,
        text: str,
        *,
        files: Iterable[Any] | None = None,
        output: Any = None,
        validators: Sequence[Validator] | None = None,
    ) -> InferenceStream:
        """``prompt(text)`` and run the inference, giving its events as they happen::

            async for event in session.stream("Hello"):
                if isinstance(event, EventTextDelta):
                    print(event.delta, end="")
            answer = session.latest

        The events are those a sink gets (``geppetto.events``), the last one the ``final`` event of the
        last request; ``output``, ``files`` and ``validators`` are as :meth:`run` takes them. The loop raises what the
        inference raised. Leaving the loop early (``break``, ``await stream.aclose()``, an ``async with``
        block around it) stops the inference as :meth:`ExecutionHandle.cancel` does: no output is saved and
        the session can be prompted again. See the guide "Streaming in your own program".
        """
        return InferenceStream(self._streamed(text, output, files, validators))

    def stream_text(self, text: str, *, files: Iterable[Any] | None = None) -> TextDeltas:
        """:meth:`stream`, giving only the answer's text as it arrives (each ``text_delta``)."""
        return TextDeltas(self.stream(text, files=files))

    def stream_output(self, text: str, output: Any, *, files: Iterable[Any] | None = None) -> PartialValues:
        """:meth:`stream` with ``output``, giving the structured answer as its JSON arrives: the value parsed
        so far (plain JSON: a dict growing key by key, a string still open cut where it has got to) each
        time it changes. These partial values are not validated (a model with required fields cannot be
        built from half of them); the validated answer is ``output_of(session.latest, Model)`` once the
        loop ends."""
        return PartialValues(self.stream(text, files=files, output=output))

    def _streamed(
        self, text: str, output: Any, files: Iterable[Any] | None, validators: Sequence[Validator] | None
    ) -> Callable[[], Awaitable[ExecutionHandle]]:
        async def start() -> ExecutionHandle:
            await self._unwound()
            with validating(output, validators):
                self._seed(text, output, files)
                return self.start_inference()

        return start

    def _seed(self, text: str, output: Any, files: Iterable[Any] | None) -> Turn:
        """The prompt of a :meth:`run` or :meth:`stream`, asking for ``output`` (for this run only)."""
        seed = self.prompt(text, files=files)
        if output is not None:
            STRUCTURED_OUTPUT.set(seed.data, output_config(output))
            self._run_output = True
        elif self._run_output:
            STRUCTURED_OUTPUT.delete(seed.data)
            self._run_output = False
        return seed

    async def _unwound(self) -> None:
        """Wait for an inference a stream was left by (``break``) to finish stopping."""
        handle = self._handle
        if handle is not None and handle.running and handle._task.cancelling():
            await asyncio.wait({handle._task})

    async def _run(self, work: Turn, inference_id: str, prior: set[str]) -> Turn:
        """The inference's task: the engine on ``work``, then its output added to the history and saved."""
        origin = work.blocks.origin if isinstance(work.blocks, LazyBlockList) else None
        recorded: builtins.list[TimedEvent] | None = [] if self.record_events else None
        sinks = self.sinks if recorded is None else (*self.sinks, lambda e: recorded.append((time.time(), e)))
        start = self._meter.begin()
        journal = await self._journal_for(inference_id)
        context = _running.running(work, self.engine, sinks=sinks, prices=self.prices, deps=self.deps, journal=journal)
        with context:
            try:
                out = await self.engine.run_inference(work)
            except asyncio.CancelledError:
                publish(EventInterrupt(metadata_for(work), reason="cancelled"))
                await _running.save_failed_events(self.store, self.session_id, inference_id, recorded)
                raise
            except UsageLimitExceeded as exc:
                if not await self._save_stopped(work, exc, inference_id, start, recorded):
                    await _running.save_failed_events(self.store, self.session_id, inference_id, recorded)
                raise
            except BaseException:
                if journal is not None and journal.wrote:
                    self._interrupted = inference_id  # resume() goes on from its journal, tools not run again
                    self._journal_dirty = True
                await _running.save_failed_events(self.store, self.session_id, inference_id, recorded)
                raise
        out = _running.finished(
            out,
            work,
            used=self._meter.totals - start if self._meter.reported else None,
            totals=self._meter.totals,
            session_id=self.session_id,
            inference_id=inference_id,
            prior=prior,
            origin=origin,
        )
        await self._complete(out, recorded)
        if journal is not None and (journal.wrote or journal.resumed):
            await journal.clear()  # the snapshot holds what the tools returned
        return out

    async def _save_stopped(
        self,
        work: Turn,
        exc: UsageLimitExceeded,
        inference_id: str,
        start: SessionUsage,
        events: builtins.list[TimedEvent] | None,
    ) -> bool:
        """A usage limit stopped the inference: save the work it did so far (``_running.stopped``). Whether it
        was saved (not when no request was made)."""
        out = _running.stopped(
            exc,
            work,
            used=self._meter.totals - start,
            session_id=self.session_id,
            inference_id=inference_id,
            prior=self._known,
        )
        if out is None:
            return False
        try:
            await self._complete(out, events)
        except StoreError:
            log.exception(
                "could not save the work inference %s did before usage limit %s stopped it", inference_id, exc.limit
            )
            return False
        return True

    async def _journal_for(self, inference_id: str) -> RunJournal | None:
        """The journal of this inference (None when the store keeps none): going on from the records a resume
        or a pickup read, else empty; the rows an abandoned inference left are cleared first."""
        if not _running.keeps_journal(self.store):
            return None
        assert self.store is not None
        picked, self._resume_journal = self._resume_journal, None
        records = picked[1] if picked is not None and picked[0] == inference_id else []
        abandoned = not records and self._journal_dirty
        if abandoned:
            self._interrupted, self._journal_dirty = None, False  # a new inference: the interrupted one is abandoned
        return await _running.open_journal(
            self.store, self.session_id, inference_id, base=self._stored, records=records, abandoned=abandoned
        )

    async def _complete(self, out: Turn, events: builtins.list[TimedEvent] | None) -> None:
        """Save ``out`` and add it to the history. Once the engine has answered, the inference completes:
        a cancel that arrives while the store is writing waits for the write and is then ignored, so the
        history, the store and the caller agree."""
        self._settle_latest()
        self._push(out)
        frozen = self._settle_latest()
        assert frozen is not None
        # The output's own list becomes one over the frozen versions it was just compared with, so the
        # next prompt and the store start from them (a reader's proof comes along: the blocks are equal).
        blocks = out.blocks
        held = blocks.held() if isinstance(blocks, BlockList) else None
        if not rebase(blocks, frozen, held):  # in place when it can: O(what the inference read or added)
            out.blocks = frozen.lazy(held)
        saving = asyncio.ensure_future(self._save(out, frozen, events))
        try:
            await asyncio.shield(saving)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            await saving
        finally:
            settle()  # the history is long-lived: out of the collector's passes (session/_collector.py)

    async def _save(self, out: Turn, frozen: Frozen, events: builtins.list[TimedEvent] | None) -> None:
        if self.store is None:
            return
        if self._meter.totals.requests:
            # the session's totals so far, on every snapshot it saves (an edit's too): restoring any latest
            # snapshot gives them back, so a limit holds across prompts, edits and processes
            TURN_META_SESSION_USAGE.set(out.metadata, self._meter.totals.to_dict())
        await _running.save(self.store, self.session_id, out, frozen, events)
        self._stored = out

    def _check_idle(self, action: str) -> None:
        if self.running:
            assert self._handle is not None
            if self._handle._task.cancelling():
                raise SessionBusyError(
                    f"cannot {action}: session {self.session_id}'s inference is still stopping (a stream left "
                    "with break); session.run and session.stream wait for it, or leave the stream with "
                    "`async with session.stream(...)` or `await stream.aclose()`, which wait too"
                )
            raise SessionBusyError(
                f"cannot {action}: session {self.session_id} is running an inference; "
                "await handle.wait() or call handle.cancel() first"
            )

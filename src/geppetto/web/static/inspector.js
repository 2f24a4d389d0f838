// geppetto web: the Turn inspector (also the whole page written by `geppetto inspect FILE --html`).
import { $, enc, el, setNav } from "./dom.js";
import { bytes, cachedShare, costText, count, head, idCell, percent, tokens, usd } from "./format.js";
import { api, sessionProblem } from "./api.js";
import { refreshSessions, stopStream } from "./chat.js";
import { citationsBox } from "./sources.js";

// -- Turn inspector ------------------------------------------------------------------------------
function wordDiff(before, after) {
  const a = String(before).split(/(\s+)/);
  const b = String(after).split(/(\s+)/);
  if (a.length * b.length > 250000) return [el("del", {}, before), " ", el("ins", {}, after)];
  const n = a.length;
  const m = b.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push(a[i]);
      i++;
      j++;
    } else if (i < n && (j >= m || lcs[i + 1][j] >= lcs[i][j + 1])) out.push(el("del", {}, a[i++]));
    else out.push(el("ins", {}, b[j++]));
  }
  return out;
}

function change(c) {
  if (c.op === "edit") return el("li", {}, el("strong", {}, `edited ${c.kind} `), idCell(c.id), c.middleware ? ` by ${c.middleware}` : "", el("div", { class: "diff" }, wordDiff(c.before, c.after)));
  if (c.op === "insert") return el("li", {}, el("strong", {}, `inserted ${c.kind} `), idCell(c.id), ` at #${c.index}: `, el("ins", {}, c.after));
  if (c.op === "remove") return el("li", {}, el("strong", {}, `removed ${c.kind} `), idCell(c.id), ": ", el("del", {}, c.before));
  return el("li", {}, el("strong", {}, "reordered "), `${count(c.ids.length, "block")} moved: `, c.ids.map((id) => [idCell(id), " "]));
}

// a snapshot a history edit made (session.rewind/fork/edit/remove): what was done
function historyEdit(h) {
  if (h.op === "rewind") return `(rewound ${count(h.prompts, "prompt")})`;
  if (h.op === "fork") return ["(forked from session ", idCell(h.from), ")"];
  if (h.op === "edit") return ["(session.edit of ", idCell(h.block), ")"];
  return `(session.${h.op})`;
}

function requestSummary(q) {
  if (!q) return el("p", { class: "muted" }, "No request recorded for this session yet.");
  // the field that named the anchor on the engine's API (previous_interaction_id on Gemini's Interactions API)
  const anchorText = q.previous_response_id
    ? [`${q.anchor_field || "previous_response_id"} `, el("code", { class: "anchor-id" }, q.previous_response_id)]
    : q.conversation
      ? ["conversation ", el("code", { class: "anchor-id" }, q.conversation)]
      : ["no anchor: the whole Turn was sent"];
  const items = [
    el("dt", {}, "Mode"),
    el("dd", { class: "mode" }, q.mode + (q.inferred ? " (inferred from the blocks; no event log)" : "")),
    el("dt", {}, "Anchor"),
    el("dd", {}, anchorText),
    el("dt", {}, "Blocks sent"),
    el("dd", { class: "sent-count" }, q.sent ? `${q.sent.length} of ${q.context_blocks} in the Turn` : "unknown (no snapshot of this inference)"),
    el("dt", {}, "Input bytes"),
    el("dd", {}, q.input_bytes === null || q.input_bytes === undefined ? "—" : `${bytes(q.input_bytes)} sent; the stateless request would send ${bytes(q.stateless_bytes)} (saved ${percent(q.stateless_bytes - q.input_bytes, q.stateless_bytes)})`),
  ];
  if (q.why) items.push(el("dt", {}, q.repair ? "Repair" : "Why"), el("dd", { class: "anchor-why" }, q.why));
  if (q.state_evidence) items.push(el("dt", {}, "State kept?"), el("dd", { class: "state-evidence" }, q.state_evidence));
  if (q.fallback) items.push(el("dt", {}, "Fallback"), el("dd", { class: "fallback" }, q.fallback, q.fallback_detail ? `: ${q.fallback_detail}` : ""));
  if (q.response_id) items.push(el("dt", {}, "Response"), el("dd", {}, el("code", {}, q.response_id)));
  if (q.usage) items.push(el("dt", {}, "Tokens"), el("dd", {}, tokens(q.usage)));
  if (q.usage || q.cost !== undefined) {
    const cost = q.cost === null || q.cost === undefined ? "unpriced (no price for this model, or no usage reported)" : `${usd(q.cost)}; without caching ${usd(q.uncached_cost)} (a stateless request is billed the same input tokens)`;
    items.push(el("dt", {}, "Cost"), el("dd", { class: "cost" }, cost));
  }
  return el("dl", { class: "facts" }, items);
}

// A long session is inspected a window of snapshots at a time (the server's ?before=&limit=): say which,
// and link to the requests before it and back towards the latest.
function windowNav(report) {
  const w = report.window;
  const base = `#/inspect/${enc(report.session_id)}`;
  const links = [];
  if (report.older) links.push(" ", el("a", { href: `${base}/before/${w.first}`, id: "older-requests" }, "Older requests"));
  if (w.last < report.snapshot_count) {
    const before = w.last + 1 + w.limit;
    links.push(" ", el("a", { href: before > report.snapshot_count ? base : `${base}/before/${before}`, id: "newer-requests" }, "Newer requests"));
  }
  const whole = w.first === 1 && w.last === report.snapshot_count;
  return el(
    "p",
    { class: "muted", id: "inspector-window" },
    whole ? `All ${count(report.snapshot_count, "snapshot")} and their requests.` : `Snapshots ${w.first} to ${w.last} of ${report.snapshot_count} and their requests; the blocks are those of snapshot ${w.last}.`,
    links,
  );
}

// "1 chained, 1 stateless, 0 fallbacks", with the conversation requests counted apart (never as chained)
function modeCounts(t) {
  const parts = [`${t.chained || 0} chained`];
  if (t.conversation) parts.push(`${t.conversation} conversation`);
  parts.push(`${t.stateless || 0} stateless`, count(t.fallbacks || 0, "fallback"));
  return parts.join(", ");
}

// a row, kept in rows too (the selection marks them)
function kept(rows, row) {
  rows.push(row);
  return row;
}

function requestRow(q, k, select) {
  return el(
    "tr",
    { dataset: { request: String(k), responseId: q.response_id || "", anchor: q.anchor || "" } },
    el("td", {}, String(k + 1)),
    el("td", {}, idCell(q.inference_id)),
    el("td", {}, q.mode),
    el("td", {}, idCell(q.anchor, 14)),
    el("td", { class: "num" }, q.sent ? String(q.sent.length) : "?"),
    el("td", { class: "num" }, bytes(q.input_bytes)),
    el("td", { class: "num" }, bytes(q.stateless_bytes)),
    el("td", {}, q.fallback || ""),
    el("td", { class: "num" }, q.usage ? `${q.usage.input_tokens || 0} (${cachedShare(q.usage)})` : "—"),
    el("td", { class: "num" }, q.cost === null || q.cost === undefined ? "unpriced" : usd(q.cost)),
    el("td", {}, el("button", { type: "button", class: "small", "aria-pressed": "false", "aria-label": `Show request ${k + 1}`, onclick: () => select(k) }, "Show")),
  );
}

function requestsSection(report, rows, select, detail) {
  const table = el(
    "table",
    { id: "requests" },
    el("caption", {}, "Each request sent to the model; choose one to highlight its delta in the Turn below."),
    head(["#", "inference", "mode", "anchor", "sent", "input bytes", "stateless", "fallback", "tokens in (cached)", "cost", ""]),
    el("tbody", {}, report.requests.map((q, k) => kept(rows, requestRow(q, k, select)))),
  );
  return el("section", { "aria-labelledby": "requests-heading" }, el("h2", { id: "requests-heading" }, "Requests"), el("div", { class: "scroll" }, table), detail);
}

// What the provider's cache diagnostics said, when they disagree with what geppetto changed.
function disagreement(d) {
  if (!d || d.verdict !== "disagree") return null;
  const reason = d.reported && d.reported.cache_miss_reason ? d.reported.cache_miss_reason.type : "no change";
  const own = (d.expected || []).join(", ") || "nothing";
  return el("span", { class: "muted" }, ` · provider disagrees: it saw ${reason}, geppetto changed ${own}`);
}

// A block's row; a provider built-in tool's call or result names its tool beside the kind, a text that
// cites sources lists them under its content, and a provider diagnostics disagreement is said beside the kind.
function blockRow(b) {
  const builtin = b.builtin && typeof b.builtin === "object" ? b.builtin : null;
  return el(
    "tr",
    { dataset: { blockId: b.id, kind: b.kind, mark: "", builtin: builtin ? builtin.tool || "" : null } },
    el("td", {}, String(b.index)),
    el(
      "td",
      {},
      b.kind,
      builtin ? el("span", { class: "muted" }, ` · built-in ${builtin.tool || ""} ${builtin.phase || ""}`) : null,
      disagreement(b.cache_diagnostics),
    ),
    el("td", {}, b.role || ""),
    el("td", {}, idCell(b.id)),
    el("td", {}, idCell(b.turn_id)),
    el("td", {}, idCell(b.inference_id)),
    el("td", {}, idCell(b.response_id, 14)),
    el("td", { class: "mark" }, ""),
    el("td", { class: "content" }, b.text.length > 400 ? `${b.text.slice(0, 399)}…` : b.text, b.sources ? citationsBox(b.sources) : null),
  );
}

function blocksSection(report, rows) {
  const table = el(
    "table",
    { id: "blocks" },
    el("caption", {}, "The blocks of the last snapshot, in order. Legend: sent = in the selected request's delta; anchor = the last block of its anchor response; held = before the anchor, held by the server and not sent again; after = added after that request."),
    head(["#", "kind", "role", "id", "turn", "inference", "response", "request", "content"]),
    el("tbody", {}, report.blocks.map((b) => kept(rows, blockRow(b)))),
  );
  return el("section", { "aria-labelledby": "blocks-heading" }, el("h2", { id: "blocks-heading" }, "Blocks"), el("div", { class: "scroll" }, table));
}

// edits between snapshots
function changesSection(report) {
  const edited = (report.snapshots || []).map((s, k) => ({ s, k })).filter(({ s }) => s.changes.length || s.history_edit);
  return el(
    "section",
    { "aria-labelledby": "changes-heading", id: "changes" },
    el("h2", { id: "changes-heading" }, "Changes between snapshots"),
    edited.length
      ? edited.map(({ s, k }) => el("div", { class: "snapshot" }, el("h3", {}, `Snapshot ${s.seq || k + 1} `, s.history_edit ? historyEdit(s.history_edit) : ["(inference ", idCell(s.inference_id), ")"]), el("ul", {}, s.changes.map(change))))
      : el("p", { class: "muted" }, "No middleware edited, inserted, removed or moved a block between snapshots."),
  );
}

// A healthy chain: the Turn ends where the server's context ends (the request now would have nothing new
// to send) and the one after a new prompt chains on it. As `geppetto inspect` words it.
function heldPlan(now) {
  const after = now.next;
  return now.fallback === "empty_delta" && after && !after.error && !after.full && (after.anchor || after.conversation) ? after : null;
}

// the engine's own plan for the request after the next prompt (the server works it out with the
// engine's planning code, so this is what the engine will send)
function nextSection(report) {
  const now = report.chained || {};
  const next = now.next || now;
  const blocksWord = (n) => `${n} block${n === 1 ? "" : "s"}`;
  const field = next.anchor_field || "previous_response_id";
  const carrying = (plan) => (plan.conversation ? ["conversation=", el("code", { class: "anchor-id" }, plan.conversation)] : [`${field}=`, el("code", { class: "anchor-id" }, plan.anchor || "")]);
  const held = heldPlan(now);
  const n = report.blocks.length;
  // why the whole Turn goes again; a fingerprint mismatch names the block and the middleware most likely behind it
  const reason = now.fallback === "fingerprint_mismatch" && now.reason ? now.reason : next.reason || now.reason || "no response yet";
  let nextText;
  if (next.error) nextText = `no request can be sent: ${next.reason}`;
  else if (held) {
    const kept = n === 1 ? "its 1 block" : `all ${n} blocks`;
    const alone = held.sends.length ? `with ${blocksWord(held.sends.length)} before it` : "alone";
    nextText = [`${held.mode}: the server holds ${kept}; the next prompt is sent ${alone}, with `, carrying(held)];
  } else if (next.full) {
    const how = next.anchor ? ["after ", el("code", {}, next.anchor)] : next.mode === "conversation" ? "in a new conversation" : `without ${field}`;
    nextText = [`${next.mode}: the whole Turn (${blocksWord(next.sends.length)} and the next prompt) is sent `, how, `: ${reason}`];
  } else {
    const before = next.sends.length ? `the next prompt and the ${blocksWord(next.sends.length)} before it` : "the next prompt";
    nextText = [`${next.mode}: sends ${before}, with `, carrying(next)];
  }
  return el(
    "section",
    { "aria-labelledby": "next-heading" },
    el("h2", { id: "next-heading" }, next.mode === "conversation" ? "Next request (conversation mode)" : "Next chained request"),
    el("p", { id: "next-request" }, nextText),
  );
}

export function renderInspector(main, report, backLink) {
  main.replaceChildren();
  const t = report.totals || {};
  const title = report.session_id ? ["Turn inspector: ", el("code", {}, report.session_id)] : ["Turn inspector: turn ", el("code", {}, report.turn_id)];
  main.append(el("div", { class: "title" }, el("h1", {}, title), backLink ? el("a", { href: backLink }, "Back to the chat") : null));
  main.append(
    el(
      "p",
      { class: "muted", id: "inspector-summary" },
      `${count(report.blocks.length, "block")} · ${count(report.requests.length, "request")} · ${modeCounts(t)} · input ${bytes(t.input_bytes)} of ${bytes(t.stateless_bytes)} stateless · ${costText(t)}`,
    ),
  );
  if (report.window) main.append(windowNav(report));
  const detail = el("div", { id: "request-detail", "aria-live": "polite" });
  const requestRows = [];
  const blockRows = [];
  // a request chosen: its row pressed, the blocks it sent, its anchor and what came after marked
  function select(k) {
    const q = report.requests[k];
    requestRows.forEach((row, i) => {
      row.classList.toggle("selected", i === k);
      $("button", row).setAttribute("aria-pressed", String(i === k));
    });
    const sent = new Set((q && q.sent) || []);
    const anchorIndex = q && q.anchor_index !== undefined ? q.anchor_index : -1;
    blockRows.forEach((row, i) => {
      let mark = "";
      if (q && q.context_blocks !== undefined && i >= q.context_blocks) mark = "later";
      else if (i === anchorIndex) mark = "anchor";
      else if (sent.has(report.blocks[i].id)) mark = "delta";
      else if (i < anchorIndex) mark = "held"; // before the anchor, not sent: the server holds it
      row.dataset.mark = mark;
      row.cells[row.cells.length - 2].textContent = { delta: "sent", anchor: "anchor", held: "held", later: "after" }[mark] || "";
    });
    detail.replaceChildren(el("h3", {}, q ? `Request ${k + 1}` : "Requests"), requestSummary(q));
  }
  main.append(requestsSection(report, requestRows, select, detail), blocksSection(report, blockRows), changesSection(report), nextSection(report));
  select(report.requests.length - 1);
}

export async function showInspector(sessionId, before) {
  stopStream();
  setNav(null);
  refreshSessions(sessionId);
  const main = $("#main");
  main.replaceChildren(el("p", { class: "muted" }, "Loading…"));
  try {
    const report = await api(`/api/sessions/${enc(sessionId)}/inspect${before ? `?before=${enc(before)}` : ""}`);
    renderInspector(main, report, `#/chat/${enc(sessionId)}`);
  } catch (e) {
    main.replaceChildren(el("h1", {}, "Turn inspector"), el("div", { class: "error", role: "alert", id: "session-problem" }, sessionProblem(e, sessionId)));
  }
}

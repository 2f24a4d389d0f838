// geppetto web: the conversation as it streams: messages, reasoning, tool cards and their approvals, the
// provider's built-in tools and the sources an answer cites.
import { el, markdown } from "./dom.js";
import { asText } from "./format.js";
import { citationsBox, sourceList } from "./sources.js";

const APPROVAL = "geppetto.approval@v1"; // a tool call's approval state, in its block's metadata

function blockText(block) {
  const payload = block.payload || {};
  return typeof payload.text === "string" ? payload.text : "";
}

export class ChatView {
  constructor(log) {
    this.log = log;
    this.cards = new Map();
    this.builtins = []; // built-in tool cards, in the order their calls came
    this.text = null;
    this.reasoning = null;
    this.answer = null; // the latest answer's message, where its sources go
    this.denied = new Set(); // calls a person denied: their refusal is no failure
  }

  scroll() {
    this.log.scrollTop = this.log.scrollHeight;
  }

  add(node) {
    this.log.append(node);
    this.scroll();
    return node;
  }

  user(text, files) {
    this.end();
    const names = (files || []).map((f) => f.filename || f.url || f.file_id || f.media_type);
    const attached = names.length ? [el("div", { class: "attached muted" }, `Attached: ${names.join(", ")}`)] : [];
    this.add(el("div", { class: "msg user" }, el("span", { class: "who" }, "You"), el("div", { class: "body plain" }, text), ...attached));
  }

  textDelta(delta) {
    if (!this.text) {
      this.reasoning = null;
      const body = el("div", { class: "body" });
      this.text = { source: "", body };
      this.answer = this.add(el("div", { class: "msg assistant" }, el("span", { class: "who" }, "Assistant"), body));
    }
    this.text.source += delta;
    this.text.body.replaceChildren(markdown(this.text.source));
    this.scroll();
  }

  // Reasoning summaries are Markdown (a bold heading, then prose), rendered as the answer is.
  reasoningDelta(delta) {
    if (!this.reasoning) {
      const body = el("div", { class: "body" });
      this.reasoning = { source: "", body };
      this.add(el("details", { class: "reasoning" }, el("summary", {}, "Reasoning"), body));
    }
    this.reasoning.source += delta;
    this.reasoning.body.replaceChildren(markdown(this.reasoning.source));
  }

  toolCall(callId, name, args) {
    this.end();
    const result = el("pre", { class: "result pending" }, "waiting for the result…");
    const status = el("span", { class: "badge" }, "requested");
    const card = el(
      "section",
      { class: "tool-card", "aria-label": `Tool call ${name || ""}`, dataset: { callId: callId || "" } },
      el("h3", {}, "Tool ", el("code", {}, name || "?"), " ", status),
      el("div", { class: "label" }, "arguments"),
      el("pre", { class: "args" }, args === null || args === undefined ? "" : asText(args)),
      el("div", { class: "label" }, "result"),
      result,
    );
    this.cards.set(callId, { card, result, status });
    this.add(card);
  }

  // A call that waits for a person: Approve and Deny buttons on its card (plain buttons, so Tab reaches
  // them); a client-side call only says it waits, since this page runs no client-side tools.
  waiting(call, decide) {
    if (!this.cards.has(call.call_id)) this.toolCall(call.call_id, call.name, call.arguments);
    const card = this.cards.get(call.call_id);
    if (card.approval) return;
    card.card.classList.add("waiting");
    if (call.kind === "client") {
      card.status.textContent = "waiting for the client";
      card.result.textContent = "a client-side tool: the client that runs it sends the result";
      return;
    }
    card.status.textContent = "waits for your approval";
    card.result.textContent = "not run yet: approve or deny it";
    const name = call.name || "the tool";
    const approve = el("button", { type: "button", class: "approve", "aria-label": `Approve ${name}` }, "Approve");
    const deny = el("button", { type: "button", class: "deny secondary", "aria-label": `Deny ${name}` }, "Deny");
    const box = el("div", { class: "approval", role: "group", "aria-label": `Approve or deny ${name}` }, approve, deny);
    const answer = async (value) => {
      approve.disabled = true;
      deny.disabled = true;
      if (value !== true) this.denied.add(call.call_id); // false, or a reason: the call is denied
      if (await decide(call.call_id, value)) {
        box.remove();
        card.approval = null;
        card.card.classList.remove("waiting");
        card.status.textContent = value === true ? "approved" : "denied";
      } else {
        this.denied.delete(call.call_id);
        approve.disabled = false;
        deny.disabled = false;
      }
    };
    approve.addEventListener("click", () => answer(true));
    deny.addEventListener("click", () => answer(false));
    card.approval = box;
    card.card.append(box);
    this.scroll();
    // The question is what comes next (a prompt would be refused while it waits): focus it, unless the
    // person is typing something.
    const active = document.activeElement;
    const typing = active && active.id === "prompt" && active.value.trim();
    if (!typing && !(active && active.closest && active.closest(".approval"))) approve.focus();
  }

  // The calls whose cards still wait for an answer given on this page.
  waitingCalls() {
    return [...this.cards].filter(([, card]) => card.approval).map(([callId]) => callId);
  }

  toolStarted(callId) {
    const card = this.cards.get(callId);
    if (card) card.status.textContent = "running";
  }

  toolResult(callId, name, result, error, denied = false) {
    if (!this.cards.has(callId)) this.toolCall(callId, name, null);
    if (denied) this.denied.add(callId); // refused here, in another tab or by another client
    const card = this.cards.get(callId);
    if (card.approval) card.approval.remove(); // answered elsewhere: nothing is left to press here
    card.approval = null;
    const failed = error !== null && error !== undefined;
    // a denied call is answered with a refusal for the model: it was not run, and nothing failed
    const outcome = failed ? (this.denied.has(callId) ? "denied" : "failed") : "done";
    card.result.className = `result ${outcome}`;
    card.result.textContent = outcome === "denied" ? `not run: ${error}` : failed ? `error: ${error}` : asText(result);
    card.status.textContent = outcome;
    card.card.classList.remove("waiting");
    card.card.classList.add(outcome);
    this.scroll();
  }

  // A tool the provider ran itself (web search, code execution, MCP...): a card with what it was asked and,
  // when the provider sends it apart, its result and the sources it found. Nothing runs here, nothing waits.
  builtinTool(d) {
    this.end();
    if (d.phase !== "result") {
      this.builtins.push(this.builtinCard(d));
      return;
    }
    const open = this.builtins.filter((c) => !c.done);
    let card = d.call_id ? open.find((c) => c.id === d.call_id) : open.find((c) => c.tool === d.tool);
    if (!card) this.builtins.push((card = this.builtinCard(d)));
    card.done = true;
    const failed = Boolean(d.error);
    card.result.className = failed ? "result failed" : "result";
    card.result.textContent = d.output === null || d.output === undefined ? (failed ? "error" : "") : asText(d.output);
    if (!card.result.textContent) card.result.hidden = card.label.hidden = true;
    card.status.textContent = failed ? "failed" : "done";
    card.card.classList.add(failed ? "failed" : "done");
    const sources = (d.sources || []).filter((s) => s && (s.url || s.title));
    if (sources.length) card.card.append(el("div", { class: "label" }, "sources"), sourceList(sources.map((s) => ({ url: s.url || "", title: s.title || "", text: "" }))));
    this.scroll();
  }

  builtinCard(d) {
    const tool = d.tool || d.name || "built-in";
    const result = el("pre", { class: "result" }, "the provider sent no separate result");
    const status = el("span", { class: "badge" }, "run by the provider");
    const input = d.input === null || d.input === undefined ? "" : asText(d.input);
    const label = el("div", { class: "label" }, "result");
    const card = el(
      "section",
      { class: "tool-card builtin", "aria-label": `Built-in tool ${tool}`, dataset: { callId: d.call_id || "", tool } },
      el("h3", {}, "Built-in ", el("code", {}, tool), d.name && d.name !== tool ? [" ", el("span", { class: "muted" }, d.name)] : null, " ", status),
      input ? [el("div", { class: "label" }, "input"), el("pre", { class: "args" }, input)] : null,
      label,
      result,
    );
    this.add(card);
    return { id: d.call_id || "", tool: d.tool, card, label, result, status, done: false };
  }

  // The sources the latest answer cites (normalized by the server), under that answer.
  citations(cited) {
    const box = citationsBox(cited);
    if (!box) return;
    if (this.answer) this.answer.append(box);
    else this.add(box);
    this.scroll();
  }

  end() {
    this.text = null;
    this.reasoning = null;
  }

  // ``kind`` (the server's error type) lets a later step take the box away once it no longer applies.
  error(message, kind) {
    this.end();
    const box = el("div", { class: "error", role: "alert" }, el("strong", {}, "Error: "), message);
    if (kind) box.dataset.kind = kind;
    this.add(box);
  }

  clearErrors(kind) {
    for (const box of this.log.querySelectorAll(`.error[data-kind="${kind}"]`)) box.remove();
  }

  note(message) {
    this.end();
    this.add(el("p", { class: "note" }, message));
  }

  // The saved blocks; `sources` maps each cited text block's id to its citations, normalized by the server.
  history(blocks, sources) {
    for (const block of blocks) {
      const p = block.payload || {};
      if (block.kind === "user") this.user(blockText(block), [...(p.files || []), ...(p.images || [])]);
      else if (block.kind === "llm_text") {
        this.textDelta(blockText(block));
        if (sources[block.id]) this.citations(sources[block.id]);
      } else if (block.kind === "reasoning") {
        const text = blockText(block) || (Array.isArray(p.summary) ? p.summary.join(" ") : String(p.summary || ""));
        if (text) this.reasoningDelta(text);
      } else if (block.kind === "tool_call") {
        this.toolCall(p.id, p.name, p.args);
        const approval = (block.metadata || {})[APPROVAL];
        if (approval && approval.state === "denied") this.denied.add(p.id);
      }
      else if (block.kind === "tool_use") this.toolResult(p.id, p.name, p.result, p.error);
      else if (block.kind === "other" && p.builtin && typeof p.builtin === "object") this.builtinTool(p.builtin);
      else if (block.kind === "system") {
        this.end();
        this.add(el("details", { class: "system" }, el("summary", {}, "System prompt"), el("div", { class: "plain" }, blockText(block))));
      }
    }
    this.end();
  }
}

// geppetto web: chat, Turn inspector and dashboard over `geppetto serve`, or the inspector alone on a page
// written by `geppetto inspect FILE --html`. No framework, no build step, nothing loaded from elsewhere.
// Text from models, tools and turn files only ever reaches the DOM through text nodes: this file builds
// every element with createElement and never assigns HTML.
"use strict";
(function () {
  const $ = (selector, root) => (root || document).querySelector(selector);
  const enc = encodeURIComponent;

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "dataset") Object.assign(node.dataset, value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    return append(node, children);
  }

  // -- Markdown, as DOM nodes ------------------------------------------------------------------------
  const SAFE_URL = /^(https?:\/\/|mailto:)/i;
  const INLINE =
    /(`+)([\s\S]*?[^`])\1(?!`)|\*\*(?=\S)([\s\S]*?\S)\*\*|(?<!\w)__(?=\S)([\s\S]*?\S)__(?!\w)|\*(?=[^\s*])([^*]*[^\s*])\*|(?<!\w)_(?=\S)([^_]*\S)_(?!\w)|\[([^\]\n]+)\]\(([^)\s]+)\)/g;

  function inline(text) {
    const out = [];
    const pattern = new RegExp(INLINE.source, "g");
    let last = 0;
    let m;
    while ((m = pattern.exec(text))) {
      if (m.index > last) out.push(text.slice(last, m.index));
      if (m[1]) out.push(el("code", {}, m[2]));
      else if (m[3] || m[4]) out.push(el("strong", {}, inline(m[3] || m[4])));
      else if (m[5] || m[6]) out.push(el("em", {}, inline(m[5] || m[6])));
      else if (SAFE_URL.test(m[8])) out.push(el("a", { href: m[8], rel: "noopener noreferrer nofollow", target: "_blank" }, inline(m[7])));
      else out.push(m[0]);
      last = pattern.lastIndex;
    }
    if (last < text.length) out.push(text.slice(last));
    return out;
  }

  const FENCE = /^\s*(```|~~~)\s*([\w+.-]*)\s*$/;
  const HEADING = /^(#{1,6})\s+(.*)$/;
  const BULLET = /^\s*[-*+]\s+(.*)$/;
  const NUMBERED = /^\s*\d{1,9}[.)]\s+(.*)$/;
  const QUOTE = /^\s*>\s?(.*)$/;

  function markdown(source) {
    const root = el("div", { class: "md" });
    const lines = String(source).replace(/\r\n?/g, "\n").split("\n");
    let i = 0;
    const starts = (line) => FENCE.test(line) || HEADING.test(line) || BULLET.test(line) || NUMBERED.test(line) || QUOTE.test(line);
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if ((m = line.match(FENCE))) {
        const body = [];
        i++;
        while (i < lines.length && lines[i].trim() !== m[1]) body.push(lines[i++]);
        i++;
        const code = el("code", {}, body.join("\n"));
        if (m[2]) code.dataset.lang = m[2];
        root.append(el("pre", {}, code));
      } else if (!line.trim()) {
        i++;
      } else if ((m = line.match(HEADING))) {
        root.append(el(`h${Math.min(6, m[1].length + 2)}`, {}, inline(m[2])));
        i++;
      } else if (BULLET.test(line) || NUMBERED.test(line)) {
        const pattern = BULLET.test(line) ? BULLET : NUMBERED;
        const list = el(pattern === BULLET ? "ul" : "ol");
        while (i < lines.length && (m = lines[i].match(pattern))) {
          list.append(el("li", {}, inline(m[1])));
          i++;
        }
        root.append(list);
      } else if (QUOTE.test(line)) {
        const quoted = [];
        while (i < lines.length && (m = lines[i].match(QUOTE))) {
          quoted.push(m[1]);
          i++;
        }
        root.append(el("blockquote", {}, markdown(quoted.join("\n"))));
      } else {
        const p = el("p");
        let first = true;
        do {
          if (!first) p.append(el("br"));
          append(p, inline(lines[i]));
          first = false;
          i++;
        } while (i < lines.length && lines[i].trim() && !starts(lines[i]));
        root.append(p);
      }
    }
    return root;
  }

  // -- formatting --------------------------------------------------------------------------------------
  const short = (value, width) => (value ? String(value).slice(0, width || 8) : "");
  function bytes(n) {
    if (n === null || n === undefined) return "—";
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
    return `${(n / 1024 / 1024).toFixed(2)} MiB`;
  }
  const count = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`; // 1 request, 2 requests
  const percent = (part, whole) => (whole ? `${Math.round((100 * part) / whole)} %` : "—");
  // USD: enough digits for a cheap request. Unpriced is shown as such, never as $0.
  function usd(v) {
    if (v === null || v === undefined) return "unpriced";
    return v >= 0.01 ? `$${v.toFixed(4)}` : `$${v.toFixed(6)}`;
  }
  const cachedShare = (u) => percent(u.cached_tokens || 0, u.input_tokens || 0) + " cached";
  const tokens = (u) => `${u.input_tokens || 0} in (${u.cached_tokens || 0} cached, ${u.cache_write_tokens || 0} written), ${u.output_tokens || 0} out (${u.reasoning_tokens || 0} reasoning)`;
  // Totals: the priced requests' cost, and how many could not be priced (their cost is unknown, not zero).
  function costText(t) {
    if (!t.requests) return "—";
    const unpriced = t.unpriced_requests || 0;
    if (unpriced === t.requests) return "unpriced";
    return unpriced ? `${usd(t.cost || 0)} + ${unpriced} unpriced` : usd(t.cost || 0);
  }
  function asText(value) {
    if (typeof value !== "string") return JSON.stringify(value, null, 2);
    if (!/^\s*[[{]/.test(value)) return value;
    try {
      return JSON.stringify(JSON.parse(value), null, 2); // a tool's JSON result, indented
    } catch (e) {
      return value;
    }
  }
  const head = (headings) => el("thead", {}, el("tr", {}, headings.map((h) => el("th", { scope: "col" }, h))));
  const idCell = (value, width) => (value ? el("code", { title: value }, short(value, width)) : "—");

  // -- the server's API ------------------------------------------------------------------------------
  const state = { key: "", info: null, running: null, sending: false, stream: null, view: null, session: null };
  try {
    state.key = sessionStorage.getItem("geppetto.key") || "";
  } catch (e) {
    state.key = "";
  }

  function headers(extra) {
    const all = Object.assign({}, extra || {});
    if (state.key) all.authorization = `Bearer ${state.key}`;
    return all;
  }

  async function failure(response) {
    let message = "";
    try {
      const body = await response.json();
      message = body && body.error && body.error.message;
    } catch (e) {
      message = "";
    }
    if (response.status === 401) askKey();
    const error = new Error(message || `the server answered ${response.status} ${response.statusText}`);
    error.status = response.status;
    return error;
  }

  // What a person reads when a page's session cannot be loaded: an unknown id in words, not the API's.
  function sessionProblem(e, sessionId) {
    if (e.status !== 404) return e.message;
    return el(
      "p",
      {},
      "There is no session ",
      el("code", {}, sessionId),
      " on this server: it may have been deleted, or the link came from another server. ",
      el("a", { href: "#/" }, "Start a new chat"),
      " or pick a session from the list.",
    );
  }

  async function api(path, options) {
    const opts = options || {};
    const init = { method: opts.method || "GET", headers: headers() };
    if (opts.body !== undefined) {
      init.headers["content-type"] = "application/json";
      init.body = JSON.stringify(opts.body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (e) {
      throw new Error(`the server did not answer (${e.message}); is geppetto serve still running?`);
    }
    if (!response.ok) throw await failure(response);
    return response.status === 204 ? null : response.json();
  }

  // Server-Sent Events over fetch (EventSource cannot send the Authorization header).
  async function* events(path, signal) {
    const response = await fetch(path, { headers: headers({ accept: "text/event-stream" }), signal });
    if (!response.ok) throw await failure(response);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const chunk = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = { data: [] };
        for (const line of chunk.split("\n")) {
          if (!line || line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const name = colon < 0 ? line : line.slice(0, colon);
          let field = colon < 0 ? "" : line.slice(colon + 1);
          if (field.startsWith(" ")) field = field.slice(1);
          if (name === "data") event.data.push(field);
          else event[name] = field;
        }
        if (!event.data.length) continue;
        let data = event.data.join("\n");
        try {
          data = JSON.parse(data);
        } catch (e) {
          /* not JSON: keep the text */
        }
        yield { id: event.id, event: event.event, data };
      }
    }
  }

  function askKey() {
    const dialog = $("#key-dialog");
    if (!dialog || !dialog.hidden) return;
    dialog.hidden = false;
    $("#api-key").focus();
  }

  // -- chat ------------------------------------------------------------------------------------------
  function blockText(block) {
    const payload = block.payload || {};
    return typeof payload.text === "string" ? payload.text : "";
  }

  class ChatView {
    constructor(log) {
      this.log = log;
      this.cards = new Map();
      this.text = null;
      this.reasoning = null;
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
        this.add(el("div", { class: "msg assistant" }, el("span", { class: "who" }, "Assistant"), body));
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
        if (await decide(call.call_id, value)) {
          box.remove();
          card.approval = null;
          card.card.classList.remove("waiting");
          card.status.textContent = value === true ? "approved" : "denied";
        } else {
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

    toolStarted(callId) {
      const card = this.cards.get(callId);
      if (card) card.status.textContent = "running";
    }

    toolResult(callId, name, result, error) {
      if (!this.cards.has(callId)) this.toolCall(callId, name, null);
      const card = this.cards.get(callId);
      const failed = error !== null && error !== undefined;
      card.result.className = failed ? "result failed" : "result";
      card.result.textContent = failed ? `error: ${error}` : asText(result);
      card.status.textContent = failed ? "failed" : "done";
      card.card.classList.add(failed ? "failed" : "done");
      this.scroll();
    }

    end() {
      this.text = null;
      this.reasoning = null;
    }

    error(message) {
      this.end();
      this.add(el("div", { class: "error", role: "alert" }, el("strong", {}, "Error: "), message));
    }

    note(message) {
      this.end();
      this.add(el("p", { class: "note" }, message));
    }

    history(blocks) {
      for (const block of blocks) {
        const p = block.payload || {};
        if (block.kind === "user") this.user(blockText(block), [...(p.files || []), ...(p.images || [])]);
        else if (block.kind === "llm_text") {
          this.textDelta(blockText(block));
        } else if (block.kind === "reasoning") {
          const text = blockText(block) || (Array.isArray(p.summary) ? p.summary.join(" ") : String(p.summary || ""));
          if (text) this.reasoningDelta(text);
        } else if (block.kind === "tool_call") this.toolCall(p.id, p.name, p.args);
        else if (block.kind === "tool_use") this.toolResult(p.id, p.name, p.result, p.error);
        else if (block.kind === "system") {
          this.end();
          this.add(el("details", { class: "system" }, el("summary", {}, "System prompt"), el("div", { class: "plain" }, blockText(block))));
        }
      }
      this.end();
    }
  }

  function stopStream() {
    if (state.stream) state.stream.abort();
    state.stream = null;
    state.running = null;
  }

  function setRunning(inferenceId) {
    state.running = inferenceId;
    const send = $("#send");
    const cancel = $("#cancel");
    const status = $("#status");
    if (!send || !cancel) return;
    const hadFocus = document.activeElement;
    send.disabled = Boolean(inferenceId);
    cancel.disabled = !inferenceId;
    if (status) status.textContent = inferenceId ? "Answering… press Escape or Cancel to stop it." : "";
    if (inferenceId && (hadFocus === send || hadFocus === document.body)) cancel.focus();
    if (!inferenceId && (hadFocus === cancel || hadFocus === document.body)) $("#prompt").focus();
  }

  async function follow(sessionId, view, after, inferenceId, promptShown) {
    const controller = new AbortController();
    if (state.stream) state.stream.abort();
    state.stream = controller;
    setRunning(inferenceId);
    let failed = false;
    const path = `/api/sessions/${enc(sessionId)}/events?after=${enc(after)}&until=finished&inference_id=${enc(inferenceId)}`;
    try {
      for await (const event of events(path, controller.signal)) {
        const d = event.data;
        if (!d || typeof d !== "object" || (d.inference_id && d.inference_id !== inferenceId)) continue;
        switch (event.event) {
          case "run_started":
            if (!promptShown && d.prompt) view.user(d.prompt);
            break;
          case "text_delta":
            view.textDelta(d.delta || "");
            break;
          case "reasoning_delta":
            view.reasoningDelta(d.delta || "");
            break;
          case "tool_call":
            view.toolCall(d.call_id, d.name, d.args);
            break;
          case "tool_call_started":
            view.toolStarted(d.call_id);
            break;
          case "approval_requested":
            for (const call of d.calls || []) view.waiting(call, (callId, value) => decideCall(sessionId, view, callId, value));
            break;
          case "tool_result":
            view.toolResult(d.call_id, d.name, d.result, d.error);
            break;
          case "final":
            view.end();
            break;
          case "error":
            failed = true;
            view.error(d.message || "the inference failed");
            break;
          case "run_finished":
            if (d.status === "cancelled") view.note("Cancelled: the answer so far was not saved.");
            else if (d.status === "failed" && !failed) view.error(d.error || "the inference failed");
            break;
          default:
            break;
        }
      }
    } catch (e) {
      if (e.name !== "AbortError") view.error(`the event stream broke off (${e.message}); reload the page to see what was saved`);
    } finally {
      view.log.dataset.finished = String(Number(view.log.dataset.finished || 0) + 1); // runs seen to their end
      if (state.stream === controller) {
        state.stream = null;
        setRunning(null);
        refreshSessions(sessionId);
      }
    }
  }

  // A chosen file as the server takes it: its media type, base64 data and name.
  async function attachment(file) {
    const data = new Uint8Array(await file.arrayBuffer());
    let binary = "";
    for (let i = 0; i < data.length; i += 0x8000) binary += String.fromCharCode(...data.subarray(i, i + 0x8000));
    return { media_type: file.type || "application/octet-stream", data: btoa(binary), filename: file.name };
  }

  async function sendPrompt(sessionId) {
    const prompt = $("#prompt");
    const picker = $("#attach");
    const text = prompt.value.trim();
    if (!text || state.running || state.sending) return;
    let started;
    let files = [];
    state.sending = true; // a second Enter before the server answers sends nothing
    try {
      files = await Promise.all([...(picker ? picker.files : [])].map(attachment));
      const body = files.length ? { text, files } : { text };
      started = await api(`/api/sessions/${enc(sessionId)}/messages`, { method: "POST", body });
    } catch (e) {
      state.view.error(e.message);
      return;
    } finally {
      state.sending = false;
    }
    prompt.value = "";
    if (picker) picker.value = "";
    state.view.user(text, files);
    follow(sessionId, state.view, started.after, started.inference_id, true);
  }

  // Answers one waiting call (true approves, false denies) and follows the inference that resumes.
  async function decideCall(sessionId, view, callId, value) {
    // The question arrives just before its run finishes: an answer given at once waits for that end.
    for (let i = 0; i < 100 && state.running; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    if (state.running || state.sending) return false;
    let started;
    state.sending = true;
    try {
      started = await api(`/api/sessions/${enc(sessionId)}/approvals`, { method: "POST", body: { decisions: { [callId]: value } } });
    } catch (e) {
      view.error(e.message);
      return false;
    } finally {
      state.sending = false;
    }
    follow(sessionId, view, started.after, started.inference_id, true);
    return true;
  }

  async function cancelRun(sessionId) {
    if (!state.running) return;
    try {
      await api(`/api/sessions/${enc(sessionId)}/cancel`, { method: "POST", body: {} });
      $("#status").textContent = "Cancelling…";
    } catch (e) {
      state.view.error(e.message);
    }
  }

  function settingsLine(settings, info) {
    const s = settings || {};
    const parts = [`model ${s.model || (info && info.model) || "?"}`, `mode ${s.mode || (info && info.mode) || "profile default"}`];
    if (s.system) parts.push("with a system prompt");
    return el("p", { class: "muted" }, parts.join(" · "));
  }

  async function showChat(sessionId) {
    stopStream();
    setNav("chat");
    const main = $("#main");
    main.replaceChildren();
    refreshSessions(sessionId);
    if (!sessionId) {
      main.append(el("h1", {}, "Chat"), el("p", { class: "muted" }, "Create a session or pick one from the list."));
      return;
    }
    let session;
    try {
      session = await api(`/api/sessions/${enc(sessionId)}`);
    } catch (e) {
      main.append(el("h1", {}, "Chat"), el("div", { class: "error", role: "alert", id: "session-problem" }, sessionProblem(e, sessionId)));
      return;
    }
    const log = el("div", { id: "messages", class: "messages", role: "log", "aria-label": "Conversation", tabindex: "0" });
    const prompt = el("textarea", { id: "prompt", rows: "3", placeholder: "Ask something (Enter sends, Shift+Enter starts a new line)" });
    const form = el(
      "form",
      { id: "composer", class: "composer" },
      el("label", { for: "prompt" }, "Message"),
      prompt,
      el(
        "div",
        { class: "buttons" },
        el("button", { type: "submit", id: "send" }, "Send"),
        el("button", { type: "button", id: "cancel", class: "secondary", disabled: true, onclick: () => cancelRun(sessionId) }, "Cancel"),
        el("label", { for: "attach", class: "attach" }, "Attach files"),
        el("input", { type: "file", id: "attach", multiple: true }),
      ),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      sendPrompt(sessionId);
    });
    prompt.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    main.append(
      el(
        "div",
        { class: "title" },
        el("h1", {}, "Session ", el("code", {}, sessionId)),
        el("a", { href: `#/inspect/${enc(sessionId)}`, id: "open-inspector" }, "Open the Turn inspector"),
      ),
      settingsLine(session.settings, state.info),
      log,
      el("p", { id: "status", class: "status", role: "status" }),
      form,
    );
    const view = new ChatView(log);
    state.view = view;
    state.session = sessionId;
    const last = session.latest;
    if (last) view.history(last.blocks);
    for (const call of session.pending_approvals || []) view.waiting(call, (callId, value) => decideCall(sessionId, view, callId, value));
    if (session.status === "running" && session.running_inference) {
      follow(sessionId, view, "0", session.running_inference, false);
    } else {
      prompt.focus();
    }
  }

  async function refreshSessions(current) {
    const list = $("#session-list");
    if (!list) return;
    let data;
    try {
      data = await api("/api/sessions");
    } catch (e) {
      list.replaceChildren(el("li", { class: "error" }, e.message));
      return;
    }
    list.replaceChildren(
      ...data.sessions.map((s) => {
        const label = s.first_prompt || s.session_id;
        const here = s.session_id === current;
        return el(
          "li",
          { class: here ? "current" : null },
          el("a", { href: `#/chat/${enc(s.session_id)}`, "aria-current": here ? "page" : null, class: "session-link" }, label),
          el("a", { href: `#/inspect/${enc(s.session_id)}`, class: "small", "aria-label": `Inspect: ${label}` }, "inspect"),
        );
      }),
    );
  }

  async function createSession(event) {
    event.preventDefault();
    const error = $("#new-session-error");
    error.hidden = true;
    const body = {};
    for (const key of ["model", "mode", "system"]) {
      const value = $(`#new-${key}`).value.trim();
      if (value) body[key] = value;
    }
    try {
      const made = await api("/api/sessions", { method: "POST", body });
      $("#new-system").value = "";
      location.hash = `#/chat/${enc(made.id)}`;
    } catch (e) {
      error.textContent = e.message;
      error.hidden = false;
    }
  }

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
    const anchorText = q.previous_response_id
      ? ["previous_response_id ", el("code", { class: "anchor-id" }, q.previous_response_id)]
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

  function renderInspector(main, report, backLink) {
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

    // requests
    const detail = el("div", { id: "request-detail", "aria-live": "polite" });
    const requestRows = [];
    const blockRows = [];
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
        row.dataset.mark = mark;
        row.cells[row.cells.length - 2].textContent = { delta: "sent", anchor: "anchor", later: "after" }[mark] || "";
      });
      detail.replaceChildren(el("h3", {}, q ? `Request ${k + 1}` : "Requests"), requestSummary(q));
    }
    const requestTable = el(
      "table",
      { id: "requests" },
      el("caption", {}, "Each request sent to the model; choose one to highlight its delta in the Turn below."),
      head(["#", "inference", "mode", "anchor", "sent", "input bytes", "stateless", "fallback", "tokens in (cached)", "cost", ""]),
      el(
        "tbody",
        {},
        report.requests.map((q, k) => {
          const row = el(
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
          requestRows.push(row);
          return row;
        }),
      ),
    );
    main.append(el("section", { "aria-labelledby": "requests-heading" }, el("h2", { id: "requests-heading" }, "Requests"), el("div", { class: "scroll" }, requestTable), detail));

    // blocks
    const blockTable = el(
      "table",
      { id: "blocks" },
      el("caption", {}, "The blocks of the last snapshot, in order. Legend: sent = in the selected request's delta; anchor = the last block of its anchor response; after = added after that request."),
      head(["#", "kind", "role", "id", "turn", "inference", "response", "request", "content"]),
      el(
        "tbody",
        {},
        report.blocks.map((b) => {
          const row = el(
            "tr",
            { dataset: { blockId: b.id, kind: b.kind, mark: "" } },
            el("td", {}, String(b.index)),
            el("td", {}, b.kind),
            el("td", {}, b.role || ""),
            el("td", {}, idCell(b.id)),
            el("td", {}, idCell(b.turn_id)),
            el("td", {}, idCell(b.inference_id)),
            el("td", {}, idCell(b.response_id, 14)),
            el("td", { class: "mark" }, ""),
            el("td", { class: "content" }, b.text.length > 400 ? `${b.text.slice(0, 399)}…` : b.text),
          );
          blockRows.push(row);
          return row;
        }),
      ),
    );
    main.append(el("section", { "aria-labelledby": "blocks-heading" }, el("h2", { id: "blocks-heading" }, "Blocks"), el("div", { class: "scroll" }, blockTable)));

    // edits between snapshots
    const edited = (report.snapshots || []).map((s, k) => ({ s, k })).filter(({ s }) => s.changes.length || s.history_edit);
    main.append(
      el(
        "section",
        { "aria-labelledby": "changes-heading", id: "changes" },
        el("h2", { id: "changes-heading" }, "Changes between snapshots"),
        edited.length
          ? edited.map(({ s, k }) => el("div", { class: "snapshot" }, el("h3", {}, `Snapshot ${s.seq || k + 1} `, s.history_edit ? historyEdit(s.history_edit) : ["(inference ", idCell(s.inference_id), ")"]), el("ul", {}, s.changes.map(change))))
          : el("p", { class: "muted" }, "No middleware edited, inserted, removed or moved a block between snapshots."),
      ),
    );

    // the next request
    // the engine's own plan for the request after the next prompt (the server works it out with the
    // engine's planning code, so this is what the engine will send)
    const next = (report.chained || {}).next || report.chained || {};
    const blocksWord = (n) => `${n} block${n === 1 ? "" : "s"}`;
    const nextText = next.error
      ? `no request can be sent: ${next.reason}`
      : next.full
        ? `the whole Turn (${blocksWord(next.sends.length)} and the next prompt), ${next.anchor ? "after " + next.anchor : next.mode === "conversation" ? "in a new conversation" : "without previous_response_id"}: ${next.reason || "no response yet"}`
        : next.conversation
          ? ["conversation ", el("code", {}, next.conversation), `, then the next prompt${next.sends.length ? ` and the ${blocksWord(next.sends.length)} before it` : ""}`]
          : ["previous_response_id ", el("code", {}, next.anchor || ""), `, then the next prompt${next.sends.length ? ` and the ${blocksWord(next.sends.length)} before it` : ""}`];
    main.append(
      el(
        "section",
        { "aria-labelledby": "next-heading" },
        el("h2", { id: "next-heading" }, next.mode === "conversation" ? "Next request (conversation mode)" : "Next chained request"),
        el("p", { id: "next-request" }, nextText),
      ),
    );
    select(report.requests.length - 1);
  }

  async function showInspector(sessionId, before) {
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

  // -- dashboard ---------------------------------------------------------------------------------------
  // A session by its first prompt (cut to a line), its id after it; the id alone when it has no prompt.
  function sessionLink(r) {
    const prompt = (r.first_prompt || "").replace(/\s+/g, " ").trim();
    const label = prompt.length > 60 ? `${prompt.slice(0, 59)}…` : prompt;
    return [
      el("a", { href: `#/inspect/${enc(r.session_id)}`, title: r.session_id, class: "session-name" }, label || short(r.session_id, 12)),
      label ? el("span", { class: "muted session-id" }, ` ${short(r.session_id, 8)}`) : null,
    ];
  }

  function tile(label, value, id) {
    return el("div", { class: "tile", id }, el("span", { class: "value" }, String(value)), el("span", { class: "label" }, label));
  }

  function countTable(id, caption, counts, heading) {
    const rows = Object.entries(counts || {});
    return el(
      "table",
      { id, class: "counts" },
      el("caption", {}, caption),
      head([heading, "count"]),
      el("tbody", {}, rows.length ? rows.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", { class: "num" }, String(v)))) : el("tr", {}, el("td", { colspan: "2" }, "none"))),
    );
  }

  function plot(rows) {
    const shown = rows.filter((r) => r.stateless_bytes > 0).slice(-24);
    const width = 720;
    const height = 240;
    const left = 64;
    const bottom = 28;
    const max = Math.max(1, ...shown.map((r) => r.stateless_bytes));
    const band = Math.min(64, (width - left - 8) / Math.max(1, shown.length));
    const y = (v) => height - bottom - ((height - bottom - 12) * v) / max;
    const bars = [];
    shown.forEach((r, i) => {
      const x = left + i * band + band * 0.1;
      const w = band * 0.38;
      bars.push(
        svg("rect", { x, y: y(r.stateless_bytes), width: w, height: height - bottom - y(r.stateless_bytes), class: "bar-stateless" }, svg("title", {}, `${r.session_id}: stateless ${bytes(r.stateless_bytes)}`)),
        svg("rect", { x: x + w, y: y(r.input_bytes), width: w, height: height - bottom - y(r.input_bytes), class: "bar-sent" }, svg("title", {}, `${r.session_id}: sent ${bytes(r.input_bytes)}`)),
        svg("text", { x: x + w, y: height - bottom + 14, "text-anchor": "middle", class: "tick" }, String(i + 1)),
      );
    });
    const axis = [0, 0.5, 1].map((f) => [
      svg("line", { x1: left - 4, x2: width - 8, y1: y(max * f), y2: y(max * f), class: "grid" }),
      svg("text", { x: left - 8, y: y(max * f) + 4, "text-anchor": "end", class: "tick" }, bytes(Math.round(max * f))),
    ]);
    return el(
      "figure",
      { id: "bytes-plot" },
      svg(
        "svg",
        { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": "plot-title", class: "plot" },
        svg("title", { id: "plot-title" }, "Input bytes per session: sent versus the stateless equivalent"),
        axis,
        bars,
      ),
      el("figcaption", {}, el("span", { class: "key key-stateless" }, "stateless equivalent"), " ", el("span", { class: "key key-sent" }, "sent"), ` · input bytes of the last ${count(shown.length, "session")} with requests, numbered as in the table below`),
    );
  }

  async function showDashboard() {
    stopStream();
    setNav("dashboard");
    refreshSessions(null);
    const main = $("#main");
    main.replaceChildren(el("h1", {}, "Dashboard"), el("p", { class: "muted" }, "Loading…"));
    let d;
    try {
      d = await api("/api/dashboard");
    } catch (e) {
      main.replaceChildren(el("h1", {}, "Dashboard"), el("div", { class: "error", role: "alert" }, e.message));
      return;
    }
    const sessions = d.per_session.filter((r) => r.requests > 0);
    main.replaceChildren(
      el("h1", {}, "Dashboard"),
      el("p", { class: "muted" }, `Over ${count(d.sessions, "session")} in the store${d.limited ? ` (the ${d.sessions} most recent)` : ""}.`),
      el(
        "div",
        { class: "tiles" },
        tile("requests", d.requests, "tile-requests"),
        tile("chained (delta only)", d.chained, "tile-chained"),
        d.conversation ? tile("conversation", d.conversation, "tile-conversation") : null,
        tile("stateless", d.stateless, "tile-stateless"),
        tile("fallbacks", d.fallbacks, "tile-fallbacks"),
        tile("input bytes saved", `${bytes(d.bytes_saved)} (${percent(d.bytes_saved, d.stateless_bytes)})`, "tile-saved"),
        tile("API rejections", d.rejections, "tile-rejections"),
        tile("cost", costText(d), "tile-cost"),
        tile("input tokens cached", `${(d.cached_tokens || 0).toLocaleString()} of ${(d.input_tokens || 0).toLocaleString()} (${percent(d.cached_tokens || 0, d.input_tokens || 0)})`, "tile-cached"),
      ),
      el("section", { "aria-labelledby": "plot-heading" }, el("h2", { id: "plot-heading" }, "Bytes per session"), plot(sessions)),
      el(
        "section",
        { "aria-labelledby": "counts-heading", class: "count-tables" },
        el("h2", { id: "counts-heading" }, "Breakdown"),
        countTable("fallback-reasons", "Fallback reasons", d.fallback_reasons, "reason"),
        countTable("delta-sizes", "Delta sizes (blocks sent by chained requests)", d.delta_blocks, "blocks"),
        countTable("rejections", "API rejections by type", d.rejection_types, "type"),
        countTable("modes", "Requests by mode", d.modes, "mode"),
      ),
      el(
        "section",
        { "aria-labelledby": "sessions-table-heading" },
        el("h2", { id: "sessions-table-heading" }, "Sessions"),
        el(
          "div",
          { class: "scroll" },
          el(
            "table",
            { id: "session-table" },
            head(["#", "session", "requests", "chained", "stateless", "fallbacks", "sent", "stateless bytes", "tokens in (cached)", "cost"]),
            el(
              "tbody",
              {},
              sessions.map((r, i) =>
                el(
                  "tr",
                  {},
                  el("td", {}, String(i + 1)),
                  el("td", {}, sessionLink(r)),
                  el("td", { class: "num" }, String(r.requests)),
                  el("td", { class: "num" }, String(r.chained)),
                  el("td", { class: "num" }, String(r.stateless)),
                  el("td", { class: "num" }, String(r.fallbacks)),
                  el("td", { class: "num" }, bytes(r.input_bytes)),
                  el("td", { class: "num" }, bytes(r.stateless_bytes)),
                  el("td", { class: "num" }, `${(r.input_tokens || 0).toLocaleString()} (${(r.cached_tokens || 0).toLocaleString()})`),
                  el("td", { class: "num" }, costText(r)),
                ),
              ),
            ),
          ),
        ),
      ),
    );
  }

  // -- the app ---------------------------------------------------------------------------------------
  function setNav(current) {
    for (const [name, id] of [["chat", "nav-chat"], ["dashboard", "nav-dashboard"]]) {
      const link = document.getElementById(id);
      if (!link) continue;
      if (name === current) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
  }

  function route() {
    const hash = location.hash || "#/";
    if (!hash.startsWith("#/")) return;
    let m;
    if ((m = hash.match(/^#\/chat\/(.+)$/))) showChat(decodeURIComponent(m[1]));
    else if ((m = hash.match(/^#\/inspect\/([^/]+)\/before\/(\d+)$/))) showInspector(decodeURIComponent(m[1]), m[2]);
    else if ((m = hash.match(/^#\/inspect\/(.+)$/))) showInspector(decodeURIComponent(m[1]));
    else if (hash === "#/dashboard") showDashboard();
    else showChat(null);
  }

  async function loadInfo() {
    try {
      state.info = await api("/api/info");
    } catch (e) {
      state.info = null;
      return;
    }
    const i = state.info;
    $("#server-info").textContent = `profile ${i.profile} · ${i.provider} · ${i.model}${i.tools.length ? ` · tools: ${i.tools.join(", ")}` : ""}`;
    $("#profile-line").textContent = `Profile ${i.profile} (${i.provider}); empty fields take its defaults.`;
    $("#new-model").placeholder = i.model;
  }

  function start() {
    const embedded = document.getElementById("geppetto-report");
    if (embedded) {
      renderInspector($("#main"), JSON.parse(embedded.textContent), null);
      return;
    }
    $(".skip").addEventListener("click", (event) => {
      event.preventDefault();
      $("#main").focus();
    });
    $("#new-session").addEventListener("submit", createSession);
    $("#key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      state.key = $("#api-key").value.trim();
      try {
        sessionStorage.setItem("geppetto.key", state.key);
      } catch (e) {
        /* private mode: the key lasts as long as the page */
      }
      $("#key-dialog").hidden = true;
      loadInfo();
      route();
    });
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && state.running && state.session) {
        event.preventDefault();
        cancelRun(state.session);
      }
    });
    window.addEventListener("hashchange", route);
    loadInfo();
    route();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

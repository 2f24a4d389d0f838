// geppetto web: the chat page: sessions, sending a prompt, following its inference, answering approvals.
import { $, enc, el, setNav } from "./dom.js";
import { api, events, sessionProblem, state } from "./api.js";
import { ChatView } from "./chatview.js";
import { bytes } from "./format.js";

export function stopStream() {
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
          watchWaiting(sessionId, view);
          break;
        case "tool_result":
          view.toolResult(d.call_id, d.name, d.result, d.error, d.denied);
          break;
        case "builtin_tool":
          view.builtinTool(d);
          break;
        case "citations": // what the model call's text cites, normalized by the server
          view.citations(d.citations || []);
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
  const chosen = [...(picker ? picker.files : [])];
  state.sending = true; // a second Enter before the server answers sends nothing
  try {
    files = await Promise.all(chosen.map(attachment));
    const body = files.length ? { text, files } : { text };
    started = await api(`/api/sessions/${enc(sessionId)}/messages`, { method: "POST", body });
  } catch (e) {
    if (e.type === "approval_pending") {
      // In the chat's own terms: the card above has the buttons (the API's message names its route).
      state.view.error("A tool call above waits for your decision: press Approve or Deny on its card, then send your message again.", e.type);
    } else {
      // too large: name the files and their sizes, as the person chose them, before the server's words
      const sizes = chosen.map((f) => `${f.name} (${bytes(f.size)})`).join(", ");
      state.view.error(e.status === 413 && sizes ? `Not sent: ${sizes} ${chosen.length === 1 ? "is" : "are"} too large for this server. ${e.message.charAt(0).toUpperCase()}${e.message.slice(1)}` : e.message);
    }
    return;
  } finally {
    state.sending = false;
  }
  prompt.value = "";
  if (picker) picker.value = "";
  state.view.user(text, files);
  follow(sessionId, state.view, started.after, started.inference_id, true);
}

// Another tab or HTTP client may answer a call that waits here: while one waits and this page runs nothing,
// look at the session every 2 s and follow the run the answer started (or show the session again if that run
// has already ended), so the card ends as approved, denied or failed without a reload.
function watchWaiting(sessionId, view) {
  if (view.watching) return;
  view.watching = setInterval(async () => {
    const calls = view.waitingCalls();
    if (state.view !== view || !calls.length) {
      clearInterval(view.watching);
      view.watching = null;
      return;
    }
    if (state.stream || state.sending) return;
    let session;
    try {
      session = await api(`/api/sessions/${enc(sessionId)}`);
    } catch {
      return; // the next look tries again
    }
    const waiting = new Set((session.pending_approvals || []).map((call) => call.call_id));
    if (state.view !== view || state.stream || calls.every((callId) => waiting.has(callId))) return;
    clearInterval(view.watching);
    view.watching = null;
    if (session.status === "running" && session.running_inference) follow(sessionId, view, "0", session.running_inference, true);
    else showChat(sessionId);
  }, 2000);
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
  view.clearErrors("approval_pending"); // answered: what the box asked for is done
  follow(sessionId, view, started.after, started.inference_id, true);
  return true;
}

export async function cancelRun(sessionId) {
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

export async function showChat(sessionId) {
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
  if (last) view.history(last.blocks, session.sources || {}); // what each cited text block cites, normalized
  for (const call of session.pending_approvals || []) view.waiting(call, (callId, value) => decideCall(sessionId, view, callId, value));
  if ((session.pending_approvals || []).length) watchWaiting(sessionId, view);
  if (session.status === "running" && session.running_inference) {
    follow(sessionId, view, "0", session.running_inference, false);
  } else {
    prompt.focus();
  }
}

export async function refreshSessions(current) {
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

export async function createSession(event) {
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

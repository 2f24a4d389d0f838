// geppetto web: the server's API, its event streams (Server-Sent Events over fetch) and its key.
import { $, el } from "./dom.js";

// -- the server's API ------------------------------------------------------------------------------
export const state = { key: "", info: null, running: null, sending: false, stream: null, view: null, session: null };
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
  let type = "";
  try {
    const body = await response.json();
    message = body && body.error && body.error.message;
    type = (body && body.error && body.error.type) || "";
  } catch (e) {
    message = "";
  }
  if (response.status === 401) askKey();
  const error = new Error(message || `the server answered ${response.status} ${response.statusText}`);
  error.status = response.status;
  error.type = type; // the server's stable kind: approval_pending, session_busy, ...
  return error;
}

// What a person reads when a page's session cannot be loaded: an unknown id in words, not the API's.
export function sessionProblem(e, sessionId) {
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

export async function api(path, options) {
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
export async function* events(path, signal) {
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

export function askKey() {
  const dialog = $("#key-dialog");
  if (!dialog || !dialog.hidden) return;
  dialog.hidden = false;
  $("#api-key").focus();
}

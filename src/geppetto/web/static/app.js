// geppetto web: chat, Turn inspector and dashboard over `geppetto serve`, or the inspector alone on a page
// written by `geppetto inspect FILE --html`. No framework, no build step, nothing loaded from elsewhere: the
// page loads this module, which imports the others. Text from models, tools and turn files only ever reaches
// the DOM through text nodes: every element is built with createElement and no HTML is ever assigned.
import { $ } from "./dom.js";
import { api, state } from "./api.js";
import { cancelRun, createSession, showChat } from "./chat.js";
import { renderInspector, showInspector } from "./inspector.js";
import { showDashboard } from "./dashboard.js";

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

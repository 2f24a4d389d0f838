// geppetto web: the dashboard over the sessions of the store.
import { $, enc, el, setNav, svg } from "./dom.js";
import { bytes, costText, count, head, percent, short } from "./format.js";
import { api } from "./api.js";
import { refreshSessions, stopStream } from "./chat.js";

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

export async function showDashboard() {
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

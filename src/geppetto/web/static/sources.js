// geppetto web: what a provider cites. The server normalizes every provider's citations
// ({url | document, title, cited_text}, see geppetto.turns.citation_sources): the `citations` event, the session's
// `sources` and the inspector's report carry them so; a built-in search result keeps its sources as {url, title}.
// All are shown as one list.
import { el } from "./dom.js";

const WEB_URL = /^https?:\/\//i;

// Normalized citations as {url, title, text}, one entry per source, in the order the provider gave them.
export function citationSources(cited) {
  const found = [];
  const seen = new Set();
  for (const c of Array.isArray(cited) ? cited : []) {
    if (!c || typeof c !== "object") continue;
    const key = c.url || c.document;
    if (!key || seen.has(key)) continue;
    seen.add(key);
    found.push({ url: String(c.url || ""), title: String(c.title || c.document || ""), text: String(c.cited_text || "") });
  }
  return found;
}

// The sources as a numbered list: a web address is a link (http and https only), anything else (a provider's
// file id, a document's title) is text.
export function sourceList(sources) {
  return el(
    "ol",
    { class: "sources" },
    sources.map((s) => {
      const label = s.title || s.url;
      const link = WEB_URL.test(s.url) ? el("a", { href: s.url, rel: "noopener noreferrer nofollow", target: "_blank" }, label) : el("span", {}, label);
      return el("li", {}, link, s.text ? el("span", { class: "muted" }, ` — “${s.text}”`) : null);
    }),
  );
}

// What a text block cites, under a "Sources" label; null when it cites nothing.
export function citationsBox(cited) {
  const sources = citationSources(cited);
  if (!sources.length) return null;
  return el("div", { class: "citations" }, el("span", { class: "label" }, "Sources"), sourceList(sources));
}

// geppetto web: what a provider cites. The `citations` event carries a model call's citations normalized by the
// server ({url | document, title, cited_text}); a saved text block keeps them as the provider sent them
// (Responses and Chat annotations, Claude citations, Gemini grounding and citation metadata), read here for
// the history; a built-in search result keeps its sources as {url, title}. All are shown as one list.
import { el } from "./dom.js";

const WEB_URL = /^https?:\/\//i;

// Each citation as {url, title, text}, one entry per source, in the order the provider gave them.
export function citationSources(raw) {
  const found = [];
  const add = (url, title, text) => {
    if (url || title) found.push({ url: String(url || ""), title: String(title || ""), text: String(text || "") });
  };
  if (Array.isArray(raw)) {
    for (const c of raw) {
      if (c && typeof c === "object") add(c.url || c.source, c.title || c.document_title || c.filename || c.file_id || c.document, c.cited_text);
    }
  } else if (raw && typeof raw === "object") {
    for (const chunk of (raw.groundingMetadata || {}).groundingChunks || []) {
      const source = (chunk && (chunk.web || chunk.retrievedContext)) || {};
      add(source.uri, source.title);
    }
    for (const c of (raw.citationMetadata || {}).citations || []) add(c.uri, c.title);
    for (const u of (raw.urlContextMetadata || {}).urlMetadata || []) add(u.retrievedUrl, "");
  }
  const seen = new Set();
  return found.filter((s) => {
    const key = s.url || s.title;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
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
export function citationsBox(raw) {
  const sources = citationSources(raw);
  if (!sources.length) return null;
  return el("div", { class: "citations" }, el("span", { class: "label" }, "Sources"), sourceList(sources));
}

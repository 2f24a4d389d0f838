// geppetto web: building the page. Text from models, tools and turn files only ever reaches the DOM through
// text nodes: every element is built with createElement, Markdown too, and no HTML is ever assigned.

export const $ = (selector, root) => (root || document).querySelector(selector);
export const enc = encodeURIComponent;

export function el(tag, attrs, ...children) {
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

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const SVG = "http://www.w3.org/2000/svg";
export function svg(tag, attrs, ...children) {
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

export function markdown(source) {
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

export function setNav(current) {
  for (const [name, id] of [["chat", "nav-chat"], ["dashboard", "nav-dashboard"]]) {
    const link = document.getElementById(id);
    if (!link) continue;
    if (name === current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

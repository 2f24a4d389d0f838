// geppetto web: numbers, sizes, costs and ids as a person reads them.
import { el } from "./dom.js";

// -- formatting --------------------------------------------------------------------------------------
export const short = (value, width) => (value ? String(value).slice(0, width || 8) : "");
export function bytes(n) {
  if (n === null || n === undefined) return "—";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(2)} MiB`;
}
export const count = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`; // 1 request, 2 requests
export const percent = (part, whole) => (whole ? `${Math.round((100 * part) / whole)} %` : "—");
// USD: enough digits for a cheap request. Unpriced is shown as such, never as $0.
export function usd(v) {
  if (v === null || v === undefined) return "unpriced";
  return v >= 0.01 ? `$${v.toFixed(4)}` : `$${v.toFixed(6)}`;
}
export const cachedShare = (u) => percent(u.cached_tokens || 0, u.input_tokens || 0) + " cached";
export const tokens = (u) => `${u.input_tokens || 0} in (${u.cached_tokens || 0} cached, ${u.cache_write_tokens || 0} written), ${u.output_tokens || 0} out (${u.reasoning_tokens || 0} reasoning)`;
// Totals: the priced requests' cost, and how many could not be priced (their cost is unknown, not zero).
export function costText(t) {
  if (!t.requests) return "—";
  const unpriced = t.unpriced_requests || 0;
  if (unpriced === t.requests) return "unpriced";
  return unpriced ? `${usd(t.cost || 0)} + ${unpriced} unpriced` : usd(t.cost || 0);
}
export function asText(value) {
  if (typeof value !== "string") return JSON.stringify(value, null, 2);
  if (!/^\s*[[{]/.test(value)) return value;
  try {
    return JSON.stringify(JSON.parse(value), null, 2); // a tool's JSON result, indented
  } catch (e) {
    return value;
  }
}
export const head = (headings) => el("thead", {}, el("tr", {}, headings.map((h) => el("th", { scope: "col" }, h))));
export const idCell = (value, width) => (value ? el("code", { title: value }, short(value, width)) : "—");

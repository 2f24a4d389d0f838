// geppetto web: /docs, the server's API document (/openapi.json) to read: every route by tag, with its
// parameters, request body and answers. Built from the document with el, as the other pages are.
import { $, append, el } from "./dom.js";

const METHODS = ["get", "post", "put", "patch", "delete"];
const refName = (ref) => ref.split("/").pop();

// The schema a $ref names in the document (one level: nested refs stay refs, named).
function resolve(doc, schema) {
  return schema && schema.$ref ? doc.components?.schemas?.[refName(schema.$ref)] || {} : schema || {};
}

function typeOf(schema) {
  if (schema.$ref) return refName(schema.$ref);
  const union = schema.anyOf || schema.oneOf;
  if (union) return union.map(typeOf).join(" | ");
  if (schema.type === "array") return `${typeOf(schema.items || {})}[]`;
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  return schema.type || "any";
}

function fields(doc, schema) {
  const body = resolve(doc, schema);
  const props = Object.entries(body.properties || {});
  const required = new Set(body.required || []);
  const json = el("details", {}, el("summary", {}, "Schema as JSON"), el("pre", {}, JSON.stringify(body, null, 2)));
  if (!props.length) return [el("p", {}, el("code", {}, typeOf(schema))), json];
  const rows = props.map(([name, prop]) =>
    el("tr", {}, el("td", {}, el("code", {}, name)), el("td", {}, typeOf(prop)), el("td", {}, required.has(name) ? "yes" : "no"), el("td", {}, prop.description || "")),
  );
  return [table(["field", "type", "required", "description"], rows, "body-fields"), json];
}

function table(heads, rows, cls) {
  return el("table", { class: cls }, el("thead", {}, el("tr", {}, heads.map((h) => el("th", { scope: "col" }, h)))), el("tbody", {}, rows));
}

function parameters(doc, op) {
  const params = (op.parameters || []).map((p) => ("$ref" in p ? resolve(doc, p) : p));
  if (!params.length) return null;
  const rows = params.map((p) =>
    el("tr", {}, el("td", {}, el("code", {}, p.name)), el("td", {}, p.in), el("td", {}, p.required ? "yes" : "no"), el("td", {}, p.description || p.schema?.description || "")),
  );
  return [el("h4", {}, "Parameters"), table(["name", "in", "required", "description"], rows, "params")];
}

function requestBody(doc, op) {
  const content = op.requestBody?.content;
  if (!content) return null;
  return Object.entries(content).map(([type, media]) => [el("h4", {}, `Request body (${type})`), fields(doc, media.schema)]);
}

function responses(op) {
  const media = (content) => Object.entries(content || {}).map(([type, m]) => (m.schema ? `${type}: ${typeOf(m.schema)}` : type));
  const rows = Object.entries(op.responses || {}).map(([code, answer]) =>
    el("tr", { dataset: { code } }, el("td", {}, el("code", {}, code)), el("td", {}, answer.description || ""), el("td", {}, media(answer.content).join(", "))),
  );
  return [el("h4", {}, "Answers"), table(["code", "description", "media type"], rows, "answers")];
}

function operation(doc, path, method, op) {
  const head = el("summary", { class: "op-head" }, el("span", { class: `method ${method}` }, method.toUpperCase()), " ", el("code", { class: "path" }, path), " ", el("span", { class: "muted" }, op.summary || ""));
  const open = doc.security?.length && op.security?.length === 0 ? el("p", { class: "note" }, "Open: no API key needed.") : null;
  return el("details", { class: "operation", dataset: { path, method } }, head, op.description ? el("p", {}, op.description) : null, open, parameters(doc, op), requestBody(doc, op), responses(op));
}

// Every operation under its first tag ("other" without one), tags in the document's order of first use.
function byTag(doc) {
  const groups = new Map();
  for (const [path, ops] of Object.entries(doc.paths || {})) {
    for (const method of METHODS) {
      if (!ops[method]) continue;
      const tag = (ops[method].tags || ["other"])[0];
      if (!groups.has(tag)) groups.set(tag, []);
      groups.get(tag).push(operation(doc, path, method, ops[method]));
    }
  }
  return groups;
}

function render(doc) {
  const main = $("#main");
  const sections = [...byTag(doc)].map(([tag, ops]) => el("section", { class: "tag", dataset: { tag } }, el("h2", {}, tag), ops));
  main.replaceChildren();
  const keyed = doc.security?.length ? el("p", { class: "note" }, "This server needs Authorization: Bearer <key> on every route not marked open.") : null;
  const title = el("h1", {}, doc.info?.title || "API", " ", el("span", { class: "badge" }, `version ${doc.info?.version || "?"}`));
  append(main, [title, doc.info?.description ? el("p", {}, doc.info.description) : null, keyed, sections]);
  const filter = $("#route-filter");
  filter.addEventListener("input", () => {
    const text = filter.value.trim().toLowerCase();
    for (const op of main.querySelectorAll(".operation")) op.hidden = !op.dataset.path.toLowerCase().includes(text);
    for (const section of main.querySelectorAll("section.tag")) section.hidden = !section.querySelector(".operation:not([hidden])");
  });
}

fetch("/openapi.json")
  .then((answer) => (answer.ok ? answer.json() : Promise.reject(new Error(`/openapi.json answered ${answer.status}`))))
  .then(render)
  .catch((error) => $("#docs-status").replaceChildren(el("span", { class: "error", role: "alert" }, `Could not read the API document: ${error.message}`)));

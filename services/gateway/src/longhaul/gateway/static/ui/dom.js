// Tiny DOM helpers: everything is built with textContent, never from HTML strings.
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name === "style") node.style.cssText = value;  // CSSOM: allowed by the CSP
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// replaceChildren without the nulls of conditional parts (which it would print as "null").
export function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return node;
}

export function showError(err) {
  const box = document.getElementById("error");
  box.textContent = err ? String(err.message || err) : "";
}

// Run an async action from a control; a refusal shows the API's error message.
export async function act(fn) {
  try { showError(null); return await fn(); } catch (err) { showError(err); return undefined; }
}

export function contentText(content) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  return content.map((part) => part.text || JSON.stringify(part)).join("\n");
}

const FOLD_CHARS = 800, FOLD_LINES = 16;

// Long text is folded: a one-line summary that opens to the full output.
export function foldable(text, cls) {
  const lines = text.split("\n");
  if (text.length <= FOLD_CHARS && lines.length <= FOLD_LINES) return el("pre", { class: cls, text });
  return el("details", { class: "fold", "data-testid": "folded" },
    el("summary", { text: lines[0].slice(0, 120) + " … (" + lines.length + " lines, " + text.length + " chars)" }),
    el("pre", { class: cls, text }));
}

export function statusBadge(status, reason) {
  return el("span", { class: "status " + status, "data-testid": "status", text: reason ? status + " (" + reason + ")" : status });
}

export const fmtCost = (c) => "$" + (c || 0).toFixed(4);
export function fmtMs(ms) {
  if (!ms) return "0 ms";
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
}
export const fmtTime = (ts) => ts ? new Date(ts * 1000).toLocaleString() : "";

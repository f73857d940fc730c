// The run viewer: vanilla JS, no build step. Lists the caller's traces, shows one trace's
// main path (messages and tool calls) and follows it live over SSE. SSE is read with fetch()
// rather than EventSource so the API key can travel in the Authorization header; the stream
// resumes from the last event id after a dropped connection, like EventSource would.
"use strict";

const state = { traceId: null, lastEventId: 0, abort: null, refreshTimer: null };
const $ = (id) => document.getElementById(id);

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const key = localStorage.getItem("longhaul.apiKey");
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = headers(opts.headers);
  const response = await fetch(path, opts);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const err = (body && body.error) || { message: response.statusText };
    throw new Error(err.message || ("HTTP " + response.status));
  }
  return body;
}

function showError(err) { $("error").textContent = err ? String(err.message || err) : ""; }

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function contentText(content) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  return content.map((part) => part.text || JSON.stringify(part)).join("\n");
}

async function loadList() {
  try {
    const data = await api("/api/traces?limit=100");
    const list = $("trace-list");
    list.replaceChildren();
    for (const t of data.traces) {
      const li = el("li");
      li.dataset.traceId = t.trace_id;
      if (t.trace_id === state.traceId) li.classList.add("selected");
      li.append(el("span", "status " + t.status, t.status), " ",
                el("span", null, t.name || t.trace_id));
      li.addEventListener("click", () => openTrace(t.trace_id));
      list.append(li);
    }
    showError(null);
  } catch (err) { showError(err); }
}

function renderMessage(m) {
  const box = el("div", "msg " + m.role);
  box.dataset.sequence = m.sequence;
  box.append(el("div", "role", m.role + " #" + m.sequence));
  const text = contentText(m.content);
  if (text) box.append(el("pre", null, text));
  for (const call of m.tool_calls || []) {
    box.append(el("div", "tool-call", "→ " + call.function.name + "(" + call.function.arguments + ")"));
  }
  return box;
}

async function refreshTrace() {
  const id = state.traceId;
  if (!id) return;
  try {
    const [trace, msgs] = await Promise.all([
      api("/api/traces/" + encodeURIComponent(id)),
      api("/api/traces/" + encodeURIComponent(id) + "/messages?mode=main_path"),
    ]);
    if (id !== state.traceId) return;
    $("trace-title").textContent = trace.name || trace.trace_id;
    const t = trace.totals;
    $("trace-meta").textContent =
      trace.status + " · " + (t.prompt_tokens + t.completion_tokens) + " tokens · $" +
      t.cost.toFixed(4) + (trace.error ? " · " + trace.error : "");
    $("messages").replaceChildren(...msgs.messages.map(renderMessage));
    showError(null);
  } catch (err) { showError(err); }
}

function scheduleRefresh() {
  if (state.refreshTimer) return;
  state.refreshTimer = setTimeout(() => { state.refreshTimer = null; refreshTrace(); loadList(); }, 150);
}

function handleEvent(name, data, id) {
  if (id) state.lastEventId = Number(id);
  if (name === "live") {
    const update = JSON.parse(data);
    if (update.kind === "delta") $("live").textContent += update.text;
    else if (update.kind === "tool_start") $("live").textContent = "running " + update.tool + "…";
    return;
  }
  if (name === "heartbeat") return;
  if (name === "message_appended") $("live").textContent = "";
  scheduleRefresh();
}

async function follow(traceId, signal) {
  // Reconnects with Last-Event-ID until the trace changes or the page goes away.
  while (!signal.aborted) {
    try {
      const response = await fetch("/api/traces/" + encodeURIComponent(traceId) + "/events", {
        headers: headers({ "Last-Event-ID": String(state.lastEventId) }), signal,
      });
      if (!response.ok) throw new Error("event stream: HTTP " + response.status);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let name = "message", data = "", id = null;
          for (const line of block.split("\n")) {
            if (line.startsWith("event: ")) name = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
            else if (line.startsWith("id: ")) id = line.slice(4);
          }
          if (data) handleEvent(name, data, id);
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      showError(err);
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

function openTrace(traceId) {
  if (state.abort) state.abort.abort();
  state.traceId = traceId;
  state.lastEventId = 0;
  state.abort = new AbortController();
  $("empty").hidden = true;
  $("trace").hidden = false;
  $("messages").replaceChildren();
  $("live").textContent = "";
  history.replaceState(null, "", "#" + traceId);
  for (const li of document.querySelectorAll("#trace-list li")) {
    li.classList.toggle("selected", li.dataset.traceId === traceId);
  }
  refreshTrace();
  follow(traceId, state.abort.signal);
}

async function startTrace(event) {
  event.preventDefault();
  const text = $("new-task").value.trim();
  if (!text) return;
  try {
    const accepted = await api("/api/traces", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: text }] }),
    });
    $("new-task").value = "";
    await loadList();
    openTrace(accepted.trace_id);
  } catch (err) { showError(err); }
}

async function loadInfo() {
  try {
    const info = await api("/api/info");
    $("banner").textContent = "model " + info.default_model + (info.offline ? " (offline scripted)" : "");
  } catch (err) { $("banner").textContent = ""; }
}

function init() {
  const keyInput = $("api-key");
  keyInput.value = localStorage.getItem("longhaul.apiKey") || "";
  keyInput.addEventListener("change", () => {
    localStorage.setItem("longhaul.apiKey", keyInput.value.trim());
    loadInfo(); loadList();
  });
  $("new-trace").addEventListener("submit", startTrace);
  loadInfo();
  loadList().then(() => { if (location.hash.length > 1) openTrace(location.hash.slice(1)); });
  setInterval(loadList, 5000);
}

init();

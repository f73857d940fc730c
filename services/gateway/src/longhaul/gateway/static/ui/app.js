// The run viewer's entry point: hash routes (#/, #/traces/<id>, #/tasks, #/tasks/<id>,
// #/evals, #/evals/<id>, #/evals/<a>/vs/<b>, #/schedules, #/inbox, #/usage) and the API key box. No build step: plain ES modules served by the gateway.
import { api, apiKey, setApiKey } from "./api.js";
import { showError } from "./dom.js";
import { comparePage, evalListPage, evalPage } from "./evals.js";
import { inboxPage, refreshCount, watchCount } from "./inbox.js";
import { listPage } from "./list.js";
import { scheduleListPage } from "./schedules.js";
import { taskListPage, taskPage } from "./tasks.js";
import { tracePage } from "./trace.js";
import { usagePage } from "./usage.js";

let leave = null;

function route() {
  if (leave) leave();
  showError(null);
  refreshCount();
  const view = document.getElementById("view");
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query] = hash.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(query || "");
  if (parts[0] === "traces" && parts[1]) leave = tracePage(view, parts[1]);
  else if (parts[0] === "tasks" && parts[1]) leave = taskPage(view, parts[1]);
  else if (parts[0] === "tasks") leave = taskListPage(view);
  else if (parts[0] === "evals" && parts[2] === "vs" && parts[3]) leave = comparePage(view, parts[1], parts[3]);
  else if (parts[0] === "evals" && parts[1]) leave = evalPage(view, parts[1]);
  else if (parts[0] === "evals") leave = evalListPage(view);
  else if (parts[0] === "schedules") leave = scheduleListPage(view);
  else if (parts[0] === "inbox") leave = inboxPage(view);
  else if (parts[0] === "usage") leave = usagePage(view);
  else if (parts.length === 1 && parts[0].startsWith("t_")) { location.replace("#/traces/" + parts[0]); return; }
  else leave = listPage(view, params);
}

async function loadInfo() {
  const banner = document.getElementById("banner");
  try {
    const info = await api("/api/info");
    banner.textContent = "model " + info.default_model + (info.offline ? " (offline scripted)" : "");
  } catch (err) { banner.textContent = err.status === 401 ? "this gateway needs an API key" : ""; }
}

function init() {
  const keyInput = document.getElementById("api-key");
  keyInput.value = apiKey();
  keyInput.addEventListener("change", () => { setApiKey(keyInput.value.trim()); loadInfo(); route(); });
  window.addEventListener("hashchange", route);
  loadInfo();
  route();
  watchCount();
}

init();

// The trace list: status filter, text search on names, newest first with paging, sub-traces
// nested under their parents with totals rolled up over the subtree; refreshed every few
// seconds. Also the form that starts a run.
import { api, post } from "./api.js";
import { act, el, fmtCost, fmtTime, showError, statusBadge } from "./dom.js";

const STATUSES = ["", "running", "waiting", "completed", "failed", "stopped"];
const POLL_MS = 3000;
const PAGE = 50;

export function listPage(root, params) {
  const s = { status: params.get("status") || "", q: params.get("q") || "", pages: [null], page: 0, timer: null, gone: false };
  const status = el("select", { "data-testid": "status-filter", "aria-label": "status" },
    STATUSES.map((v) => el("option", { value: v, text: v || "any status" })));
  status.value = s.status;
  const search = el("input", { type: "search", "data-testid": "search", placeholder: "search names", value: s.q });
  const body = el("div", { class: "trace-list", "data-testid": "trace-list" });
  const pager = el("div", { class: "pager" });
  const ask = el("textarea", { "data-testid": "new-task", placeholder: "Ask the agent something…" });
  const form = el("form", { class: "new-run", onsubmit: (e) => { e.preventDefault(); start(); } },
    ask, el("button", { type: "submit", "data-testid": "start", text: "Run" }));
  root.replaceChildren(el("div", { class: "list-page" },
    form, el("div", { class: "filters" }, status, search), body, pager));

  status.addEventListener("change", () => { s.status = status.value; reset(); });
  let debounce = null;
  search.addEventListener("input", () => { clearTimeout(debounce); debounce = setTimeout(() => { s.q = search.value.trim(); reset(); }, 250); });

  function reset() {
    s.pages = [null]; s.page = 0;
    const query = new URLSearchParams();
    if (s.status) query.set("status", s.status);
    if (s.q) query.set("q", s.q);
    history.replaceState(null, "", "#/" + (query.toString() ? "?" + query : ""));
    load();
  }

  async function start() {
    const text = ask.value.trim();
    if (!text) return;
    await act(async () => {
      const accepted = await post("/api/traces", { messages: [{ role: "user", content: text }] });
      location.hash = "#/traces/" + accepted.trace_id;
    });
  }

  async function load() {
    clearTimeout(s.timer);
    try {
      const query = new URLSearchParams({ limit: String(PAGE) });
      if (s.status) query.set("status", s.status);
      if (s.q) query.set("q", s.q);
      const cursor = s.pages[s.page];
      if (cursor) query.set("cursor", cursor);
      const data = await api("/api/traces?" + query);
      if (s.gone) return;
      s.pages[s.page + 1] = data.next_cursor;
      render(data.traces, data.next_cursor);
    } catch (err) { showError(err); }
    if (!s.gone) s.timer = setTimeout(load, POLL_MS);
  }

  function render(traces, next) {
    const byId = new Map(traces.map((t) => [t.trace_id, t]));
    const kids = new Map();
    const roots = [];
    for (const t of traces) {
      if (t.parent_trace_id && byId.has(t.parent_trace_id)) {
        if (!kids.has(t.parent_trace_id)) kids.set(t.parent_trace_id, []);
        kids.get(t.parent_trace_id).push(t);
      } else roots.push(t);
    }
    const rollup = (t) => {
      const sum = { tokens: t.totals.prompt_tokens + t.totals.completion_tokens, cost: t.totals.cost, count: 1 };
      for (const k of kids.get(t.trace_id) || []) { const r = rollup(k); sum.tokens += r.tokens; sum.cost += r.cost; sum.count += r.count; }
      return sum;
    };
    const row = (t) => {
      const r = rollup(t);
      const children = kids.get(t.trace_id) || [];
      return el("li", { class: "trace-row", "data-testid": "trace-row", dataset: { traceId: t.trace_id, status: t.status } },
        el("div", { class: "row-line" },
          statusBadge(t.status, t.status === "waiting" ? t.wait_reason : null), " ",
          el("a", { href: "#/traces/" + t.trace_id, class: "trace-name", text: t.name || t.trace_id }),
          el("span", { class: "meta", text: " " + r.tokens + " tok · " + fmtCost(r.cost) + (r.count > 1 ? " (" + r.count + " traces)" : "") + " · " + fmtTime(t.created_at) }),
          t.task_id ? el("a", { class: "meta", href: "#/tasks/" + t.task_id, text: " task " + (t.phase_id || "") }) : null,
          (t.waiting_below || []).length ? el("span", { class: "tag warn", text: "help needed below" }) : null),
        children.length ? el("ul", { class: "children", "data-testid": "children" }, children.map(row)) : null);
    };
    body.replaceChildren(traces.length ? el("ul", {}, roots.map(row)) : el("div", { class: "meta", text: "no traces" }));
    pager.replaceChildren(
      el("button", { type: "button", "data-testid": "newer", disabled: s.page === 0, onclick: () => { s.page -= 1; load(); }, text: "‹ newer" }),
      el("span", { class: "meta", text: " page " + (s.page + 1) + " " }),
      el("button", { type: "button", "data-testid": "older", disabled: !next, onclick: () => { s.page += 1; load(); }, text: "older ›" }));
  }

  load();
  return () => { s.gone = true; clearTimeout(s.timer); };
}

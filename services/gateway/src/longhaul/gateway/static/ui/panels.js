// The side panels of a trace page: totals, goal tree (with each goal's cost), collaborators,
// sub-traces, timeline.
import { el, fmtCost, fmtMs, statusBadge } from "./dom.js";
import { timeline } from "./tree.js";

export function totalsPanel(trace) {
  const t = trace.totals || {};
  const row = (name, value) => el("tr", {}, el("th", { text: name }), el("td", { text: String(value) }));
  return el("section", { class: "panel", "data-testid": "totals" },
    el("h3", { text: "Totals" }),
    el("table", {},
      row("prompt tokens", t.prompt_tokens || 0),
      row("completion tokens", t.completion_tokens || 0),
      row("cached tokens", (t.cache_read_tokens || 0) + (t.cache_write_tokens ? " (+" + t.cache_write_tokens + " written)" : "")),
      row("cache hit", t.prompt_tokens ? Math.round(100 * (t.cache_read_tokens || 0) / t.prompt_tokens) + " %" : "—"),
      row("saved by offloading", ((t.saved_tokens || {}).offload || 0) + " tokens"),
      row("saved by compaction", ((t.saved_tokens || {}).compaction || 0) + " tokens"),
      row("cost", fmtCost(t.cost)),
      row("model time", fmtMs(t.duration_ms)),
      row("wall time", trace.created_at && trace.updated_at ? fmtMs(Math.round((trace.updated_at - trace.created_at) * 1000)) : "—"),
      row("runs", trace.runs || 0)));
}

export function goalPanel(trace) {
  const goals = (trace.goal_tree && trace.goal_tree.goals) || [];
  const focus = trace.goal_tree && trace.goal_tree.focus;
  const kids = new Map();
  for (const g of goals) {
    const key = g.parent_id || "";
    if (!kids.has(key)) kids.set(key, []);
    kids.get(key).push(g);
  }
  const list = (parent) => {
    const items = kids.get(parent) || [];
    if (!items.length) return null;
    return el("ul", {}, items.map((g) => el("li", { class: "goal " + g.status + (g.id === focus ? " focus" : ""), dataset: { goalId: g.id, status: g.status } },
      el("span", { class: "goal-status", text: g.status }), " ", el("span", { text: g.title }),
      g.id === focus ? el("span", { class: "focus-mark", text: " ◀ focus" }) : null,
      g.type === "agent_call" ? el("span", { class: "meta", text: " → " + (g.sub_trace_ids || []).join(", ") }) : null,
      goalCost(g),
      g.reason && g.id !== "root" ? el("div", { class: "meta goal-reason", text: "why: " + g.reason }) : null,
      g.summary ? el("div", { class: "meta", text: g.summary }) : null,
      list(g.id))));
  };
  return el("section", { class: "panel", "data-testid": "goal-tree" },
    el("h3", { text: "Goals" }), list("") || el("div", { class: "meta", text: "no goals yet" }));
}

// What a plan step cost: its own model calls and cost, and with everything under it.
function goalCost(g) {
  const own = g.self_stats || {};
  const all = g.cumulative_stats || {};
  if (!all.model_calls && !all.cost && !all.tokens) return null;
  const text = all.model_calls + " calls · " + all.tokens + " tokens · " + fmtCost(all.cost) + " · " + fmtMs(all.duration_ms)
    + (all.cost !== own.cost || all.model_calls !== own.model_calls ? " (own: " + (own.model_calls || 0) + " calls, " + fmtCost(own.cost || 0) + ")" : "");
  return el("div", { class: "meta goal-cost", "data-testid": "goal-cost", text });
}

// Everyone the trace works with, as the model is told: name [type, status]: summary.
export function collaboratorPanel(trace) {
  const found = trace.collaborators || [];
  return el("section", { class: "panel", "data-testid": "collaborators" },
    el("h3", { text: "Collaborators" }),
    found.length ? el("ul", {}, found.map((c) => el("li", { dataset: { name: c.name, status: c.status } },
      c.trace_id && c.type === "agent" ? el("a", { href: "#/traces/" + c.trace_id, text: c.name }) : el("span", { text: c.name }),
      el("span", { class: "meta", text: " [" + c.type + ", " + c.status + "]" }),
      c.summary ? el("div", { class: "meta", text: c.summary }) : null)))
      : el("div", { class: "meta", text: "none" }));
}

export function subtracePanel(trace) {
  const subs = trace.sub_traces || [];
  const below = trace.waiting_below || [];
  return el("section", { class: "panel", "data-testid": "subtraces" },
    el("h3", { text: "Sub-traces" }),
    subs.length ? el("ul", {}, subs.map((s) => el("li", { dataset: { traceId: s.trace_id } },
      statusBadge(s.status, s.wait_reason), " ",
      // a remote child's id (agent://host:port/<id>) is one segment of the route
      el("a", { href: "#/traces/" + encodeURIComponent(s.trace_id), text: s.task || s.trace_id }),
      s.mode && s.mode !== "agent" ? el("span", { class: "meta", text: " " + s.mode }) : null,
      s.summary ? el("div", { class: "meta", text: s.summary.slice(0, 200) }) : null)))
      : el("div", { class: "meta", text: "none" }),
    below.length ? el("div", { class: "waiting-below" }, "help needed below: ",
      below.map((w) => el("a", { href: "#/traces/" + w.trace_id, text: (w.name || w.trace_id) + " (" + w.reason + ") " }))) : null);
}

const TIMELINE_MAX = 300;

export function timelinePanel(rows) {
  const all = timeline(rows);
  const longest = Math.max(1, ...all.map((s) => s.ms));
  // a long run shows its latest steps, plus the slowest one if it is older
  let steps = all.slice(-TIMELINE_MAX);
  const slowest = all.reduce((a, b) => (b.ms > a.ms ? b : a), all[0] || null);
  if (slowest && !steps.includes(slowest)) steps = [slowest, ...steps];
  return el("section", { class: "panel", "data-testid": "timeline" },
    el("h3", { text: "Timeline" }),
    all.length > steps.length ? el("div", { class: "meta", text: (all.length - steps.length) + " earlier calls not shown" }) : null,
    steps.length ? el("ol", { class: "timeline" }, steps.map((s) => el("li", { class: "step " + s.kind, dataset: { sequence: s.sequence, kind: s.kind, ms: s.ms } },
      el("a", { href: "#m" + s.sequence, class: "step-label", text: s.label }),
      el("span", { class: "bar" }, el("span", { class: "fill", style: "width:" + Math.max(1, Math.round(100 * s.ms / longest)) + "%" })),
      el("span", { class: "step-ms", text: fmtMs(s.ms) }))))
      : el("div", { class: "meta", text: "no calls yet" }));
}

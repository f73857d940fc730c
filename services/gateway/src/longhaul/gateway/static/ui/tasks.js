// Tasks: the phase DAG (columns by dependency depth) with statuses, merges and replans,
// links to each phase's step traces, and resume. A plan waiting for review (awaiting_review)
// is editable in place: each phase's name, description, dependencies, preset and criteria,
// phases removed or added, then approved as proposed, approved as edited (the gateway checks
// it like a model's plan and its refusal is shown) or refused. The task list (GET /api/tasks)
// with a form to start a task.
import { api, enc, post } from "./api.js";
import { act, fill, el, fmtTime, showError, statusBadge } from "./dom.js";

const POLL_MS = 2000;

export function depths(phases) {
  const byId = new Map(phases.map((p) => [p.id, p]));
  const memo = new Map();
  const depth = (id, seen) => {
    if (memo.has(id)) return memo.get(id);
    const p = byId.get(id);
    if (!p || seen.has(id)) return 0;
    seen.add(id);
    const d = 1 + Math.max(-1, ...p.depends_on.map((dep) => depth(dep, seen)));
    memo.set(id, d);
    return d;
  };
  for (const p of phases) depth(p.id, new Set());
  return memo;
}

export function taskPage(root, taskId) {
  const base = "/api/tasks/" + enc(taskId);
  const s = { timer: null, gone: false };
  const view = el("div", { class: "task-page" });
  root.replaceChildren(view);

  async function load() {
    clearTimeout(s.timer);
    try {
      const task = await api(base);
      if (s.gone) return;
      render(task);
      // A plan under review is not redrawn under the reviewer's edits: it waits for them.
      if (task.status === "awaiting_review") return;
      if (!["completed", "failed", "cancelled"].includes(task.status)) s.timer = setTimeout(load, POLL_MS);
      else s.timer = setTimeout(load, POLL_MS * 5);
    } catch (err) { showError(err); if (!s.gone) s.timer = setTimeout(load, POLL_MS * 2); }
  }

  function render(task) {
    const d = depths(task.phases);
    const columns = [];
    for (const p of task.phases) {
      const col = d.get(p.id) || 0;
      (columns[col] = columns[col] || []).push(p);
    }
    const names = new Map(task.phases.map((p) => [p.id, p.name || p.id]));
    const dag = el("div", { class: "dag", "data-testid": "dag" }, columns.map((list, i) => el("div", { class: "dag-col", dataset: { depth: i } },
      el("div", { class: "meta", text: "layer " + (i + 1) }),
      (list || []).map((p) => el("div", { class: "phase " + p.status, "data-testid": "phase", dataset: { phaseId: p.id, status: p.status } },
        el("div", { class: "phase-head" }, el("strong", { text: p.name || p.id }), " ", statusBadge(p.status)),
        p.depends_on.length ? el("div", { class: "meta deps", text: "after " + p.depends_on.map((x) => names.get(x) || x).join(", ") }) : null,
        p.description ? el("div", { class: "desc", text: p.description }) : null,
        p.attempts > 1 ? el("div", { class: "meta", text: p.attempts + " attempts" }) : null,
        p.competitors ? el("div", { class: "meta", "data-testid": "competitors", text: p.competitors + " competitors, merge: " + p.merge_strategy }) : null,
        p.trace_ids.length ? el("div", { class: "steps" }, "steps: ", p.trace_ids.map((t) => el("a", { href: "#/traces/" + t, "data-testid": "step-trace", text: t + " " }))) : null,
        p.merge ? el("div", { class: "merge" }, "merge " + p.merge.strategy + " by " + p.merge.method + (p.merge.winner ? ", winner " + p.merge.winner : ""),
          el("ul", {}, p.merge.candidates.map((c) => el("li", {}, c.label + " ", el("a", { href: "#/traces/" + c.trace_id, text: c.trace_id }), " " + c.status + (c.score !== null && c.score !== undefined ? " score " + c.score : "")))),
          p.merge.reason ? el("div", { class: "meta", text: p.merge.reason }) : null) : null,
        p.summary ? el("div", { class: "meta", text: p.summary.slice(0, 300) }) : null,
        p.output_ref ? el("div", { class: "meta", "data-testid": "output-ref", text: "output " + p.output_ref }) : null,
        p.error ? el("div", { class: "error-box", text: p.error }) : null)))));
    fill(view, 
      el("h2", { "data-testid": "task-title", text: task.goal }),
      el("div", { class: "meta" }, statusBadge(task.status), " " + task.task_id + " · mode " + task.mode +
        (task.resumes ? " · resumes " + task.resumes_handled + "/" + task.resumes + (task.resume_source ? " from " + task.resume_source : "") : "")),
      el("div", { class: "buttons" }, el("button", { type: "button", "data-testid": "resume-task",
        onclick: () => act(async () => { await post(base + "/resume"); load(); }), text: "Resume" })),
      task.error ? el("div", { class: "error-box", text: task.error }) : null,
      task.status === "awaiting_review" ? reviewPanel(base, task, load) : null,
      task.phases.length ? dag : el("div", { class: "meta", text: "planning…" }),
      task.replans.length ? el("section", { class: "panel" }, el("h3", { text: "Replans" }), el("ol", {}, task.replans.map((r) => el("li", { text: r })))) : null,
      task.summary ? el("section", { class: "panel" }, el("h3", { text: "Result" }), el("pre", { text: task.summary })) : null);
    if (task.phases.length) drawEdges(dag, task.phases);
  }

  load();
  return () => { s.gone = true; clearTimeout(s.timer); };
}

// The plan editor: one editable row per phase; "Approve edited" sends them as the new plan.
function reviewPanel(base, task, reload) {
  const rows = el("div", { class: "review-rows" });
  const lines = (text) => text.split(/[\n,]/).map((x) => x.trim()).filter(Boolean);
  const addRow = (p) => {
    const field = (name, value, tag) => el(tag || "input", { "data-field": name, value: value, placeholder: name, ...(tag ? { text: value } : {}) });
    const row = el("div", { class: "review-row", "data-testid": "review-phase", dataset: { phaseId: p.id || "" } },
      field("id", p.id || ""), field("name", p.name || ""), field("preset", p.preset || "default"),
      field("depends_on", (p.depends_on || []).join(", ")),
      field("description", p.description || "", "textarea"),
      field("criteria", (p.criteria || []).join("\n"), "textarea"),
      el("button", { type: "button", "data-testid": "remove-phase", text: "Remove", onclick: () => row.remove() }));
    rows.append(row);
  };
  task.phases.forEach(addRow);
  const edited = () => [...rows.querySelectorAll('[data-testid="review-phase"]')].map((row) => {
    const get = (name) => row.querySelector(`[data-field="${name}"]`).value.trim();
    const phase = { id: get("id"), name: get("name"), description: get("description"),
      depends_on: lines(get("depends_on")), preset: get("preset") || "default", criteria: lines(get("criteria")) };
    const original = task.phases.find((p) => p.id === phase.id);
    if (original && original.tools) phase.tools = original.tools;
    if (original && original.model) phase.model = original.model;
    return phase;
  });
  const reason = el("input", { "data-testid": "review-reason", placeholder: "reason (optional)" });
  const send = (body) => act(async () => { await post(base + "/plan", { ...body, reason: reason.value.trim() }); reload(); });
  return el("section", { class: "panel review", "data-testid": "review" },
    el("h3", { text: "Plan waiting for review" }), rows,
    el("div", { class: "buttons" },
      el("button", { type: "button", "data-testid": "add-phase", text: "Add phase", onclick: () => addRow({}) }),
      el("button", { type: "button", "data-testid": "approve-plan", text: "Approve", onclick: () => send({ approved: true }) }),
      el("button", { type: "button", "data-testid": "approve-edited", text: "Approve edited", onclick: () => send({ approved: true, phases: edited() }) }),
      el("button", { type: "button", "data-testid": "refuse-plan", text: "Refuse", onclick: () => send({ approved: false }) }),
      reason));
}

const SVG = "http://www.w3.org/2000/svg";

// Dependency edges as an SVG layer under the phase boxes: from the right edge of a phase to
// the left edge of each phase that depends on it.
function drawEdges(dag, phases) {
  const box = dag.getBoundingClientRect();
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "edges");
  svg.setAttribute("width", String(dag.scrollWidth));
  svg.setAttribute("height", String(dag.scrollHeight));
  const at = (id) => dag.querySelector(`[data-phase-id="${CSS.escape(id)}"]`);
  for (const p of phases) {
    const to = at(p.id);
    for (const dep of p.depends_on) {
      const from = at(dep);
      if (!from || !to) continue;
      const a = from.getBoundingClientRect(), b = to.getBoundingClientRect();
      const x1 = a.right - box.left + dag.scrollLeft, y1 = a.top + a.height / 2 - box.top;
      const x2 = b.left - box.left + dag.scrollLeft, y2 = b.top + b.height / 2 - box.top;
      const path = document.createElementNS(SVG, "path");
      const mid = (x1 + x2) / 2;
      path.setAttribute("d", `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`);
      path.setAttribute("class", "edge " + (p.status || ""));
      path.dataset.from = dep; path.dataset.to = p.id;
      svg.append(path);
    }
  }
  dag.prepend(svg);
}

export function taskListPage(root) {
  const s = { gone: false, timer: null, pages: [null], page: 0 };
  const goal = el("textarea", { "data-testid": "new-task-goal", placeholder: "A goal for a planned task…" });
  const mode = el("select", {}, el("option", { value: "plan", text: "plan" }), el("option", { value: "compete", text: "compete" }));
  const list = el("ul", { class: "task-list", "data-testid": "task-list" });
  const pager = el("div", { class: "pager" });
  root.replaceChildren(el("div", { class: "list-page" },
    el("form", { class: "new-run", onsubmit: (e) => { e.preventDefault(); act(async () => {
      const accepted = await post("/api/tasks", { goal: goal.value.trim(), mode: mode.value });
      location.hash = "#/tasks/" + accepted.task_id; }); } },
      goal, mode, el("button", { type: "submit", text: "Start task" })),
    list, pager));

  async function load() {
    clearTimeout(s.timer);
    try {
      const query = new URLSearchParams({ limit: "20" });
      if (s.pages[s.page]) query.set("cursor", s.pages[s.page]);
      const data = await api("/api/tasks?" + query);
      if (s.gone) return;
      s.pages[s.page + 1] = data.next_cursor;
      list.replaceChildren(...data.tasks.map((t) => el("li", { class: "task-row", "data-testid": "task-row", dataset: { taskId: t.task_id, status: t.status } },
        statusBadge(t.status), " ", el("a", { href: "#/tasks/" + t.task_id, text: t.goal || t.task_id }),
        el("span", { class: "meta", text: " " + t.mode + " · " + t.phases_completed + "/" + t.phases + " phases · " + fmtTime(t.created_at) }),
        t.error ? el("div", { class: "error-box", text: t.error }) : null)));
      if (!data.tasks.length) list.replaceChildren(el("li", { class: "meta", text: "no tasks" }));
      pager.replaceChildren(
        el("button", { type: "button", disabled: s.page === 0, onclick: () => { s.page -= 1; load(); }, text: "‹ newer" }),
        el("span", { class: "meta", text: " page " + (s.page + 1) + " " }),
        el("button", { type: "button", disabled: !data.next_cursor, onclick: () => { s.page += 1; load(); }, text: "older ›" }));
    } catch (err) { showError(err); }
    if (!s.gone) s.timer = setTimeout(load, 5000);
  }
  load();
  return () => { s.gone = true; clearTimeout(s.timer); };
}

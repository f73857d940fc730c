// Eval runs (`longhaul eval`, GET /api/evals): the list, one run's table (task × model with a
// link to every trace) and a side-by-side comparison of two runs with what regressed marked.
// Pass rates are bars with their 95 % Wilson interval drawn over them; so is cost. Every run
// shows its output, checks and why it failed; a replay says so; "before" is the older run.
import { api, enc } from "./api.js";
import { el, fill, fmtCost, fmtTime, foldable, showError } from "./dom.js";

const pct = (x) => Math.round((x || 0) * 100) + "%";
const GROWTH = 0.2;  // as longhaul.domain.evals.REGRESSION_GROWTH

export function evalListPage(root) {
  const list = el("ul", { class: "task-list", "data-testid": "eval-list" });
  const compare = el("button", { type: "button", "data-testid": "compare", disabled: true, text: "Compare the two checked" });
  const checked = [];
  const created = {};
  compare.addEventListener("click", () => {
    // before is the older of the two, whichever box was checked first
    const [before, after] = [...checked].sort((a, b) => created[a] - created[b]);
    location.hash = "#/evals/" + enc(before) + "/vs/" + enc(after);
  });
  root.replaceChildren(el("div", { class: "list-page" }, el("h2", { text: "Eval runs" }), list, compare));
  let gone = false;
  api("/api/evals").then((data) => {
    if (gone) return;
    list.replaceChildren(...data.evals.map((e) => {
      created[e.eval_id] = e.created_at;
      const box = el("input", { type: "checkbox", "data-testid": "eval-check", onchange: (ev) => {
        const at = checked.indexOf(e.eval_id);
        if (ev.target.checked && at < 0) checked.push(e.eval_id);
        if (!ev.target.checked && at >= 0) checked.splice(at, 1);
        compare.disabled = checked.length !== 2;
      } });
      return el("li", { class: "task-row", "data-testid": "eval-row", dataset: { evalId: e.eval_id } }, box, " ",
        el("a", { href: "#/evals/" + enc(e.eval_id), text: e.suite_name + " · " + e.eval_id }),
        e.replay_of ? replayBadge(e.replay_of) : null,
        el("span", { class: "meta", text: " " + e.tasks + " tasks × " + e.models.join(", ") + " × " + e.repeat + " · " + fmtTime(e.created_at) }));
    }));
    if (!data.evals.length) list.replaceChildren(el("li", { class: "meta", text: "no eval runs: longhaul eval SUITE" }));
  }).catch(showError);
  return () => { gone = true; };
}

function replayBadge(of) {
  return el("span", { class: "badge replay", "data-testid": "replay-badge", title: "every model call answered from " + of + "'s recorded runs",
    text: " replay of " + of + " " });
}

// One bar: the value, and the interval [low, high] as a whisker over it (all in 0..1 of `scale`).
function bar(value, scale, low, high, label, testid) {
  const width = (v) => (scale > 0 ? Math.min(100, (100 * v) / scale) : 0) + "%";
  return el("div", { class: "eval-bar", "data-testid": testid, title: label },
    el("div", { class: "fill", style: "width:" + width(value) }),
    low === undefined ? null : el("div", { class: "whisker", style: "left:" + width(low) + ";width:calc(" + width(high) + " - " + width(low) + ")" }),
    el("span", { class: "label", text: label }));
}

function summaryTable(summary, other) {
  const models = Object.keys(summary);
  const maxCost = Math.max(...models.map((m) => summary[m].cost_total || 0), ...(other ? Object.values(other).map((s) => s.cost_total || 0) : []));
  return el("table", { class: "eval-summary", "data-testid": "eval-summary" },
    el("tr", {}, ...["model", "passed", "pass rate (95% CI)", "tokens p50", "cost"].map((h) => el("th", { text: h }))),
    ...models.map((m) => {
      const s = summary[m];
      return el("tr", { dataset: { model: m } }, el("td", { text: m }), el("td", { text: s.passed + "/" + s.total }),
        el("td", {}, bar(s.pass_rate, 1, s.ci_low, s.ci_high, pct(s.pass_rate) + " [" + pct(s.ci_low) + ", " + pct(s.ci_high) + "]", "pass-bar")),
        el("td", { text: String(s.tokens_median) }),
        el("td", {}, bar(s.cost_total, maxCost, undefined, undefined, fmtCost(s.cost_total), "cost-bar")));
    }));
}

// task → model → runs (in repeat order)
function grid(runs) {
  const by = {};
  for (const r of runs) ((by[r.task] = by[r.task] || {})[r.model] = (by[r.task][r.model] || [])).push(r);
  for (const t of Object.values(by)) for (const list of Object.values(t)) list.sort((a, b) => a.repeat - b.repeat);
  return by;
}

function runsTable(data) {
  const by = grid(data.runs);
  return el("table", { class: "eval-runs", "data-testid": "eval-runs" },
    el("tr", {}, el("th", { text: "task" }), ...data.models.map((m) => el("th", { text: m }))),
    ...Object.keys(by).sort().map((task) => el("tr", { dataset: { task } }, el("td", { text: task }),
      ...data.models.map((m) => el("td", {}, ...(by[task][m] || []).map((r) =>
        el("a", { class: "status " + (r.passed ? "completed" : "failed"), "data-testid": "eval-run",
                  href: "#/traces/" + enc(r.trace_id), title: (r.reasons || []).join("; ") + " · " + r.tokens + " tokens · " + fmtCost(r.cost),
                  text: (r.passed ? "pass" : "fail") })))))));
}

// Every run: when it ended, pass or fail and why, each check's verdict, its output.
function runDetails(data) {
  const runs = [...data.runs].sort((a, b) => (a.task + a.model).localeCompare(b.task + b.model) || a.repeat - b.repeat);
  return el("section", { class: "eval-details" }, el("h3", { text: "Runs" }),
    ...runs.map((r) => el("details", { class: "eval-run-detail", "data-testid": "eval-run-detail", open: !r.passed, dataset: { task: r.task, passed: String(r.passed) } },
      el("summary", {},
        el("span", { class: "status " + (r.passed ? "completed" : "failed"), text: r.passed ? "pass" : "fail" }),
        " " + r.task + " #" + r.repeat + " · " + r.model + " · ",
        el("span", { class: "meta", "data-testid": "run-date", text: fmtTime(r.ended_at) || "" }), " ",
        el("a", { href: "#/traces/" + enc(r.trace_id), text: r.trace_id })),
      (r.reasons || []).length ? el("ul", { class: "reasons", "data-testid": "run-reasons" }, ...r.reasons.map((why) => el("li", { text: why }))) : null,
      r.diverged ? el("p", { class: "diverged", "data-testid": "run-diverged", text: "diverged: " + r.diverged }) : null,
      (r.checks || []).length ? el("ul", { class: "checks", "data-testid": "run-checks" }, ...r.checks.map((c) =>
        el("li", { class: c.skipped ? "skipped" : c.passed ? "passed" : "failed" },
          el("b", { text: (c.skipped ? "skipped" : c.passed ? "✓" : "✗") + " " + c.check }), c.detail ? foldable(c.detail, "check-detail") : null))) : null,
      r.output ? el("div", { class: "run-output", "data-testid": "run-output" }, foldable(r.output, "output")) : null)));
}

export function evalPage(root, evalId) {
  root.replaceChildren(el("p", { class: "meta", text: "loading…" }));
  let gone = false;
  api("/api/evals/" + enc(evalId)).then((data) => {
    if (gone) return;
    fill(root, el("div", { class: "eval-page" },
      el("h2", { "data-testid": "eval-title" }, data.suite_name + " · " + data.eval_id, data.replay_of ? replayBadge(data.replay_of) : null),
      el("p", { class: "meta", "data-testid": "eval-date", text: fmtTime(data.created_at) }),
      summaryTable(data.summary), runsTable(data), runDetails(data)));
  }).catch(showError);
  return () => { gone = true; };
}

// What regressed from `before` to `after`, by the rules of `longhaul eval --baseline`.
export function regressions(after, before) {
  const found = [];
  const always = {};
  for (const r of before.runs) { const k = r.task + "\u0000" + r.model; always[k] = (always[k] ?? true) && r.passed; }
  const failed = new Set(after.runs.filter((r) => !r.passed).map((r) => r.task + "\u0000" + r.model));
  for (const k of [...failed].sort()) if (always[k]) { const [task, model] = k.split("\u0000"); found.push({ model, task, text: model + ": task " + task + " passed in every run before and now fails" }); }
  for (const [model, now] of Object.entries(after.summary)) {
    const was = before.summary[model];
    if (!was) continue;
    if (now.pass_rate < was.ci_low) found.push({ model, text: model + ": pass rate " + pct(now.pass_rate) + " below the earlier interval [" + pct(was.ci_low) + ", " + pct(was.ci_high) + "]" });
    if (was.tokens_median > 0 && now.tokens_median > was.tokens_median * (1 + GROWTH)) found.push({ model, text: model + ": median tokens up " + pct(now.tokens_median / was.tokens_median - 1) });
    if (was.cost_total > 0 && now.cost_total > was.cost_total * (1 + GROWTH)) found.push({ model, text: model + ": cost up " + pct(now.cost_total / was.cost_total - 1) });
  }
  return found;
}

export function comparePage(root, beforeId, afterId) {
  root.replaceChildren(el("p", { class: "meta", text: "loading…" }));
  let gone = false;
  Promise.all([api("/api/evals/" + enc(beforeId)), api("/api/evals/" + enc(afterId))]).then((both) => {
    if (gone) return;
    const [before, after] = both.sort((a, b) => a.created_at - b.created_at);  // before is the older
    const found = regressions(after, before);
    const shared = after.models.filter((m) => before.models.includes(m));
    const differ = shared.length !== before.models.length || shared.length !== after.models.length;
    const column = (data, title) => el("section", { class: "eval-side" },
      el("h3", {}, title + " ", el("a", { href: "#/evals/" + enc(data.eval_id), text: data.suite_name + " · " + data.eval_id }),
        data.replay_of ? replayBadge(data.replay_of) : null, el("span", { class: "meta", text: " " + fmtTime(data.created_at) })),
      summaryTable(data.summary, (data === after ? before : after).summary), runsTable(data));
    const none = !shared.length ? "no model ran in both: nothing compared"
      : differ ? "nothing regressed on " + shared.join(", ") + " (the only model(s) both ran)" : "nothing regressed";
    fill(root, el("div", { class: "eval-page" },
      el("h2", { text: "Comparison" }),
      differ ? el("p", { class: "models-differ", "data-testid": "models-differ",
        text: "The models differ: before ran " + before.models.join(", ") + "; after ran " + after.models.join(", ") + ". Pass rates of different models are not a regression." }) : null,
      el("ul", { class: "regressions", "data-testid": "regressions" },
        found.length ? found.map((f) => el("li", { class: "regressed", "data-testid": "regression", text: f.text }))
                     : el("li", { class: "meta", "data-testid": "no-regression", text: none })),
      el("div", { class: "eval-compare" }, column(before, "before"), column(after, "after"))));
    for (const f of found) {
      if (!f.task) continue;
      for (const row of root.querySelectorAll(".eval-side:last-child tr[data-task]")) if (row.dataset.task === f.task) row.classList.add("regressed");
    }
  }).catch(showError);
  return () => { gone = true; };
}

// Schedules (GET/POST/PATCH/DELETE /api/schedules): the list with next run, pause/resume,
// run now and delete; a form that creates one from a prompt (every N s or a cron in a zone);
// each schedule's runs, linked to their traces.
import { api, enc, post } from "./api.js";
import { el, showError } from "./dom.js";

const when = (s) => (s.cron ? "cron " + s.cron + " (" + s.timezone + ")" : s.every_s ? "every " + s.every_s + " s" : "at " + s.at);

export function scheduleListPage(root) {
  const list = el("ul", { class: "task-list", "data-testid": "schedule-list" });
  const name = el("input", { name: "name", placeholder: "name", required: true, "data-testid": "schedule-name" });
  const prompt = el("input", { name: "prompt", placeholder: "what the run should do", required: true, "data-testid": "schedule-prompt" });
  const every = el("input", { name: "every", type: "number", min: "1", placeholder: "every N s", "data-testid": "schedule-every" });
  const cron = el("input", { name: "cron", placeholder: "or cron: 0 9 * * 1-5", "data-testid": "schedule-cron" });
  const zone = el("input", { name: "timezone", value: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC" });
  const overlap = el("select", { name: "overlap", "data-testid": "schedule-overlap" },
    ...["skip", "queue", "allow"].map((o) => el("option", { value: o, text: "overlap " + o })));
  let gone = false;

  async function load() {
    const data = await api("/api/schedules");
    if (gone) return;
    list.replaceChildren(...data.schedules.map(row));
    if (!data.schedules.length) list.replaceChildren(el("li", { class: "meta", text: "no schedules yet" }));
  }
  const act = (promise) => promise.then(load).catch(showError);

  function row(s) {
    const runs = el("ul", { class: "schedule-runs", "data-testid": "schedule-runs" });
    const showRuns = () => api("/api/schedules/" + enc(s.schedule_id) + "/runs").then((data) => {
      runs.replaceChildren(...data.runs.map((r) => el("li", {},
        el("a", { href: "#/traces/" + enc(r.run_id), "data-testid": "schedule-run", text: r.run_id }),
        el("span", { class: "meta", text: " " + r.tick + (r.manual ? " (run now)" : "") + " · " + (r.status || "?") }))));
      if (!data.runs.length) runs.replaceChildren(el("li", { class: "meta", text: "no runs yet" }));
    }).catch(showError);
    const path = "/api/schedules/" + enc(s.schedule_id);
    return el("li", { class: "task-row", "data-testid": "schedule-row", dataset: { scheduleId: s.schedule_id } },
      el("strong", { text: s.name }),
      el("span", { class: "meta", "data-testid": "schedule-state",
                   text: " " + when(s) + " · " + (s.paused ? "paused" : "next " + (s.next_run_at || "-")) + " · " + s.runs_started + " runs" }),
      " ",
      el("button", { type: "button", "data-testid": "schedule-toggle", text: s.paused ? "resume" : "pause",
                     onclick: () => act(api(path, { method: "PATCH", json: { paused: !s.paused } })) }),
      el("button", { type: "button", "data-testid": "schedule-run-now", text: "run now",
                     onclick: () => post(path + "/run").then(showRuns).catch(showError) }),
      el("button", { type: "button", "data-testid": "schedule-show-runs", text: "runs", onclick: showRuns }),
      el("button", { type: "button", "data-testid": "schedule-delete", text: "delete",
                     onclick: () => act(api(path, { method: "DELETE" })) }),
      runs);
  }

  const form = el("form", { class: "schedule-form", "data-testid": "schedule-form", onsubmit: (event) => {
    event.preventDefault();
    const body = { name: name.value, overlap: overlap.value,
                   template: { kind: "trace", body: { messages: [{ role: "user", content: prompt.value }] } } };
    if (cron.value.trim()) Object.assign(body, { cron: cron.value.trim(), timezone: zone.value.trim() || "UTC" });
    else body.every_s = Number(every.value);
    act(post("/api/schedules", body).then(() => form.reset()));
  } }, name, prompt, every, cron, zone, overlap, el("button", { type: "submit", "data-testid": "schedule-create", text: "Create schedule" }));

  root.replaceChildren(el("div", { class: "list-page" }, el("h2", { text: "Schedules" }), form, list));
  load().catch(showError);
  return () => { gone = true; };
}

// Usage (GET /api/usage): what was spent per UTC day over the last 30 days, as a bar chart of
// dollars (or tokens), then a table by day, model and preset with the total. A key sees its
// own; the operator's key every key's (a key column then).
import { api } from "./api.js";
import { el, showError } from "./dom.js";

const DAYS = 30;

function sinceDay() {
  const day = new Date(Date.now() - (DAYS - 1) * 86400000);
  return day.toISOString().slice(0, 10);
}

function chart(rows, measure) {
  const most = Math.max(0, ...rows.map((r) => r[measure]));
  const label = (r) => (measure === "usd" ? "$" + r.usd.toFixed(4) : r.tokens.toLocaleString() + " tokens");
  return el("ul", { class: "timeline usage-chart", "data-testid": "usage-chart" },
    ...rows.map((r) => el("li", { class: "step", "data-testid": "usage-day", dataset: { day: r.day } },
      el("span", { class: "step-label", text: r.day }),
      el("span", { class: "bar" }, el("span", { class: "fill", style: "width:" + (most ? (100 * r[measure]) / most : 0) + "%" })),
      el("span", { class: "step-ms", text: label(r) }))));
}

function table(data) {
  const keyed = data.rows.some((r) => r.key);
  const heads = ["day", ...(keyed ? ["key"] : []), "model", "preset", "calls", "tokens", "usd"];
  const cells = (r) => [r.day || "total", ...(keyed ? [r.key || ""] : []), r.model || "", r.preset || "",
    r.calls.toLocaleString(), r.tokens.toLocaleString(), r.usd.toFixed(4)];
  return el("table", { class: "eval-runs", "data-testid": "usage-table" },
    el("tr", {}, ...heads.map((h) => el("th", { text: h }))),
    ...[...data.rows, data.total].map((r) => el("tr", { "data-testid": r === data.total ? "usage-total" : "usage-row" },
      ...cells(r).map((c) => el("td", { text: c })))));
}

export function usagePage(root) {
  let measure = "usd";
  const body = el("div", {});
  const toggle = el("select", { "data-testid": "usage-measure", onchange: () => { measure = toggle.value; load(); } },
    el("option", { value: "usd", text: "dollars" }), el("option", { value: "tokens", text: "tokens" }));
  root.replaceChildren(el("div", { class: "list-page" },
    el("h2", { text: "Usage, last " + DAYS + " days (UTC)" }), toggle, body));
  let gone = false;
  async function load() {
    const since = sinceDay();
    try {
      const [days, detail] = await Promise.all([
        api("/api/usage?group_by=day&since=" + since),
        api("/api/usage?group_by=key,model,preset,day&since=" + since),
      ]);
      if (gone) return;
      if (!days.rows.length) { body.replaceChildren(el("p", { class: "meta", "data-testid": "usage-empty", text: "nothing spent" })); return; }
      days.rows.sort((a, b) => a.day.localeCompare(b.day));
      detail.rows.sort((a, b) => b.day.localeCompare(a.day) || b.usd - a.usd);
      body.replaceChildren(chart(days.rows, measure), table(detail));
    } catch (err) { showError(err); }
  }
  load();
  return () => { gone = true; };
}

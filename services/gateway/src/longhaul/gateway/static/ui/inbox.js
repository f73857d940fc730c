// The inbox (GET /api/inbox): every question, approval, budget wait and plan review waiting for a person
// across the key's runs, oldest first, each answered in place through the trace's own routes
// (reply, approve — as written or with edited arguments —, deny with a reason) or the task's
// plan route. The header's count is refreshed on every page change and every few seconds.
import { api, enc, post } from "./api.js";
import { act, el, fill, fmtTime, showError } from "./dom.js";

const COUNT_EVERY_MS = 5000;

export async function refreshCount() {
  const badge = document.getElementById("inbox-count");
  try {
    const inbox = await api("/api/inbox");
    badge.textContent = String(inbox.count);
    badge.classList.toggle("none", inbox.count === 0);
  } catch (err) { badge.textContent = ""; }
}

export function watchCount() {
  setInterval(refreshCount, COUNT_EVERY_MS);
}

function deadline(item) {
  if (!item.deadline) return null;
  return el("span", { class: "meta", "data-testid": "deadline",
    text: " · " + (item.on_deadline || "deny") + " at " + fmtTime(item.deadline) });
}

function head(item) {
  const link = item.trace_id
    ? el("a", { href: "#/traces/" + enc(item.trace_id), text: item.name || item.trace_id })
    : el("a", { href: "#/tasks/" + enc(item.task_id), text: item.goal || item.task_id });
  return el("div", { class: "inbox-head" }, el("span", { class: "tag", text: item.kind.replace("_", " ") }), " ", link,
    el("span", { class: "meta", text: " · waiting since " + fmtTime(item.since) }), deadline(item));
}

function question(item, done) {
  const text = el("textarea", { "data-testid": "inbox-answer", placeholder: "your answer" });
  return [el("pre", { "data-testid": "inbox-question", text: item.question }), text,
    el("div", { class: "buttons" }, el("button", { type: "button", class: "primary", "data-testid": "inbox-reply",
      onclick: () => act(async () => { await post("/api/traces/" + enc(item.trace_id) + "/reply", { content: text.value }); done(); }),
      text: "Reply" }))];
}

// A call cut off by a crash while it acted: not a plain approval. Running it again reuses its
// idempotency key; "it took effect" records that it happened (the reason is its result, told
// to the model), "it did not" tells the model it failed.
function outcomeUnknown(item, decide) {
  const reason = el("input", { "data-testid": "inbox-reason", placeholder: "what happened (told to the model)" });
  const said = () => (reason.value.trim() ? { reason: reason.value.trim() } : {});
  const shown = typeof item.arguments === "string" ? item.arguments : JSON.stringify(item.arguments);
  return [el("div", { "data-testid": "inbox-outcome-unknown" }, "Outcome unknown: ",
    el("code", { "data-testid": "inbox-tool", text: item.tool }), el("code", { text: "(" + shown + ")" }),
    " was cut off by a crash while it acted."),
  el("div", { class: "buttons" },
    el("button", { type: "button", "data-testid": "inbox-run-again", onclick: () => decide({ approved: true }), text: "Run again" }),
    reason,
    el("button", { type: "button", class: "primary", "data-testid": "inbox-took-effect",
      onclick: () => decide({ approved: false, took_effect: true, ...said() }), text: "It took effect" }),
    el("button", { type: "button", "data-testid": "inbox-did-not",
      onclick: () => decide({ approved: false, ...said() }), text: "It did not" }))];
}

function approval(item, done) {
  const decide = (body) => act(async () => {
    await post("/api/traces/" + enc(item.trace_id) + "/approve", { tool_call_id: item.tool_call_id, ...body });
    done();
  });
  if (item.outcome_unknown) return outcomeUnknown(item, decide);
  const shown = typeof item.arguments === "string" ? item.arguments : JSON.stringify(item.arguments, null, 2);
  const args = el("textarea", { class: "args", "data-testid": "inbox-arguments", spellcheck: "false", text: shown });
  args.value = shown;
  const reason = el("input", { "data-testid": "inbox-reason", placeholder: "reason (told to the model)" });
  const approve = () => {
    if (args.value === shown) return decide({ approved: true });
    let edited;
    try { edited = JSON.parse(args.value); } catch (err) { showError("the arguments are not JSON: " + err.message); return undefined; }
    return decide({ approved: true, arguments: edited });
  };
  return [el("div", {}, "Run ", el("code", { "data-testid": "inbox-tool", text: item.tool }), " with:"), args,
    el("div", { class: "buttons" },
      el("button", { type: "button", class: "primary", "data-testid": "inbox-approve", onclick: approve, text: "Approve" }),
      reason,
      el("button", { type: "button", "data-testid": "inbox-deny",
        onclick: () => decide({ approved: false, ...(reason.value.trim() ? { reason: reason.value.trim() } : {}) }), text: "Deny" }))];
}

function planReview(item, done) {
  const reason = el("input", { "data-testid": "inbox-reason", placeholder: "reason" });
  const review = (body) => act(async () => { await post("/api/tasks/" + enc(item.task_id) + "/plan", body); done(); });
  return [el("ol", { class: "inbox-plan" }, ...(item.phases || []).map((p) => el("li", { text: p.name + (p.description ? ": " + p.description : "") }))),
    el("div", { class: "buttons" },
      el("button", { type: "button", class: "primary", "data-testid": "inbox-approve-plan", onclick: () => review({ approved: true }), text: "Approve plan" }),
      el("a", { href: "#/tasks/" + enc(item.task_id), text: "edit…" }), reason,
      el("button", { type: "button", "data-testid": "inbox-refuse-plan",
        onclick: () => review({ approved: false, ...(reason.value.trim() ? { reason: reason.value.trim() } : {}) }), text: "Refuse" }))];
}

// A run at a spend limit: raise it for this run, or stop it (the operator's key; a key its own
// runs only with spend_limits.keys_answer, else the 403 is shown).
function budget(item, done) {
  const usd = el("input", { type: "number", min: "0", step: "any", "data-testid": "inbox-raise-usd", placeholder: "+ USD" });
  const tokens = el("input", { type: "number", min: "0", step: "1", "data-testid": "inbox-raise-tokens", placeholder: "+ tokens" });
  const answer = (body) => act(async () => { await post("/api/traces/" + enc(item.trace_id) + "/budget", body); done(); });
  return [el("pre", { "data-testid": "inbox-question", text: item.question }),
    el("div", { class: "buttons" }, usd, tokens,
      el("button", { type: "button", class: "primary", "data-testid": "inbox-raise",
        onclick: () => answer({ action: "raise", usd: Number(usd.value) || 0, tokens: Math.trunc(Number(tokens.value)) || 0 }), text: "Raise for this run" }),
      el("button", { type: "button", "data-testid": "inbox-stop", onclick: () => answer({ action: "stop" }), text: "Stop" }))];
}

const BODY = { question, approval, budget, plan_review: planReview };

export function inboxPage(root) {
  const list = el("ul", { class: "inbox", "data-testid": "inbox-list" });
  root.replaceChildren(el("div", { class: "list-page" }, el("h2", { text: "Waiting for you" }), list));
  let gone = false;
  async function load() {
    const inbox = await api("/api/inbox").catch((err) => { showError(err); return null; });
    if (gone || !inbox) return;
    refreshCount();
    if (!inbox.items.length) { fill(list, el("li", { class: "meta", "data-testid": "inbox-empty", text: "nothing waits for you" })); return; }
    fill(list, inbox.items.map((item) => el("li", { class: "inbox-item", "data-testid": "inbox-item",
      dataset: { kind: item.kind, traceId: item.trace_id || "", taskId: item.task_id || "", outcomeUnknown: String(!!item.outcome_unknown) } },
      head(item), ...(BODY[item.kind] || (() => []))(item, load))));
  }
  load();
  return () => { gone = true; };
}

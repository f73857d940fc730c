// The trace page: the message tree (main path, branch switches, tool calls paired with their
// results), live token deltas over SSE, the controls, and the side panels.
import { api, authHeaders, enc, post } from "./api.js";
import { act, fill, contentText, el, fmtCost, foldable, showError, statusBadge } from "./dom.js";
import { collaboratorPanel, goalPanel, subtracePanel, timelinePanel, totalsPanel } from "./panels.js";
import { follow } from "./sse.js";
import { branchFigures, buildTree, chainFrom, displayPath, resultsByCall } from "./tree.js";

const ACTIVE = new Set(["running", "waiting"]);
// A long trace opens at its end: its last PAGE messages, earlier ones a page at a time on
// request (GET …/messages?before=&limit=). END is past any sequence: the latest page.
const PAGE = 200;
const END = Number.MAX_SAFE_INTEGER;
const reachedStart = (page) => page.length < PAGE || page[0].sequence <= 1;

export function tracePage(root, traceId) {
  const base = "/api/traces/" + enc(traceId);
  const s = { trace: null, messages: [], complete: false, choice: {}, live: "", liveTool: "", rewindAfter: null, forkModel: "", compareAt: null, busy: false, again: false, gone: false, boxes: new Map() };
  const header = el("div", { class: "trace-head" });
  const messages = el("div", { class: "messages", "data-testid": "messages" });
  const earlier = el("button", { type: "button", class: "small load-earlier", "data-testid": "load-earlier", hidden: true,
    text: "load earlier messages", onclick: () => act(loadEarlier) });
  const live = el("div", { class: "msg assistant live", "data-testid": "live", hidden: true });
  const compare = el("div", { class: "branch-compare", "data-testid": "branch-compare", hidden: true });
  const controls = el("div", { class: "controls" });
  const side = el("aside", { class: "side" });
  const page = el("div", { class: "trace-page", "data-testid": "trace-page", dataset: { traceId } },
    el("div", { class: "trace-main" }, header, compare, earlier, messages, live, controls), side);
  root.replaceChildren(page);

  // One refresh at a time; events arriving meanwhile ask for one more after it (no timers:
  // a burst of events costs at most two fetches).
  async function refresh() {
    if (s.busy) { s.again = true; return; }
    s.busy = true;
    try {
      // messages never change once appended: fetch only the ones after the newest we hold
      // (the first time, the last page)
      const first = !s.messages.length;
      const query = first ? "before=" + END + "&limit=" + PAGE : "after=" + s.messages[s.messages.length - 1].sequence;
      const [trace, fresh] = await Promise.all([api(base), api(base + "/messages?mode=all&" + query)]);
      if (s.gone) return;
      s.trace = trace;
      if (first) s.complete = reachedStart(fresh.messages);
      merge(fresh.messages);
      if (trace.status !== "running") { s.live = ""; s.liveTool = ""; }
      render();
    } catch (err) { showError(err); } finally {
      s.busy = false;
      if (s.again && !s.gone) { s.again = false; refresh(); }
    }
  }
  const soon = () => { refresh(); };

  function merge(fetched) {
    const known = new Set(s.messages.map((m) => m.sequence));
    s.messages = s.messages.concat(fetched.filter((m) => !known.has(m.sequence)))
      .sort((a, b) => a.sequence - b.sequence);
  }

  // The page before the oldest message held (one request at a time).
  async function loadEarlier() {
    if (s.complete || earlier.disabled || !s.messages.length) return;
    earlier.disabled = true;
    try {
      const page = await api(base + "/messages?mode=all&before=" + s.messages[0].sequence + "&limit=" + PAGE);
      if (s.gone) return;
      s.complete = reachedStart(page.messages);
      merge(page.messages);
      render();
    } finally { earlier.disabled = false; }
  }

  function render() {
    const t = s.trace;
    const tree = buildTree(s.messages, t.head_sequence);
    const rows = displayPath(tree, s.choice);
    renderHeader(t);
    earlier.hidden = s.complete;
    renderMessages(rows);
    renderCompare(tree);
    renderLive();
    renderControls(t);
    side.replaceChildren(totalsPanel(t), goalPanel(t), collaboratorPanel(t), subtracePanel(t), timelinePanel(rows));
  }

  function renderHeader(t) {
    const tt = t.totals || {};
    fill(header, 
      el("h2", { "data-testid": "trace-title", text: t.name || t.trace_id }),
      el("div", { class: "meta" },
        statusBadge(t.status, t.status === "waiting" ? t.wait_reason : null), " ",
        el("span", { text: t.trace_id }), " · ", el("span", { text: (tt.prompt_tokens + tt.completion_tokens) + " tokens · " + fmtCost(tt.cost) }),
        t.model ? " · " + t.model : "",
        t.remote ? el("span", { "data-testid": "remote", text: " · on remote longhaul " + t.remote + " (read-only here)" }) : null,
        t.parent_trace_id ? el("span", {}, " · parent ", el("a", { href: "#/traces/" + t.parent_trace_id, text: t.parent_trace_id })) : null,
        t.task_id ? el("span", {}, " · task ", el("a", { href: "#/tasks/" + t.task_id, text: t.task_id })) : null),
      t.status === "waiting" ? el("div", { class: "wait", "data-testid": "wait" },
        "Waiting for " + (t.wait_reason || "something") + (t.wait_detail ? ": " + t.wait_detail : "")) : null,
      t.error ? el("div", { class: "error-box", text: "error: " + t.error + (t.stop_reason ? " (" + t.stop_reason + ")" : "") }) : null,
      !t.error && t.stop_reason ? el("div", { class: "meta", text: "stop reason: " + t.stop_reason }) : null,
      t.summary && t.status === "completed" ? el("div", { class: "summary" }, el("strong", { text: "Answer: " }), foldable(t.summary)) : null);
  }

  function renderMessages(rows) {
    const results = resultsByCall(rows);
    const paired = new Set();
    const out = [];
    const cache = new Map();
    for (const row of rows) {
      const m = row.message;
      if (m.role === "tool" && paired.has(m.sequence)) continue;
      // a message box is rebuilt only when what it shows changed (long traces stay fast)
      const key = signature(row, results);
      let box = s.boxes.get(key);
      if (box) for (const call of m.tool_calls || []) { const r = results.get(call.id); if (r) paired.add(r.sequence); }
      else box = messageBox(row, results, paired);
      cache.set(key, box);
      out.push(box);
    }
    s.boxes = cache;
    reconcile(messages, withSwitches(out));
  }

  // A provider outage that moved the trace to its next fallback model: a line in the
  // transcript before the first message written after it (switches come in log order).
  function withSwitches(boxes) {
    const switches = (s.trace && s.trace.model_switches) || [];
    if (!switches.length) return boxes;
    const lines = s.switchLines || (s.switchLines = new Map());
    const pending = switches.map((sw, i) => {
      if (!lines.has(i)) lines.set(i, el("div", { class: "meta model-switch", "data-testid": "model-switch", dataset: { reason: sw.reason },
        text: "model switched: " + sw.from + " → " + sw.to + " (" + sw.reason + ")" }));
      return [sw.after_sequence, lines.get(i)];
    });
    const out = [];
    for (const box of boxes) {
      while (pending.length && pending[0][0] < Number(box.dataset.sequence)) out.push(pending.shift()[1]);
      out.push(box);
    }
    return out.concat(pending.map((p) => p[1]));
  }

  // The effect ledger: a call a crash cut off while it acted, and how it was resumed.
  const RESOLVED = { rerun: "run again with the same key", reconciled_done: "the tool's reconcile said it happened",
    reconciled_not_done: "the tool's reconcile said it did not happen: run again with the same key",
    asked: "outcome unknown: waiting for a person", run_again: "a person said run it again (same key)",
    told_model: "its effects stay in the sandbox: the model was told what is known" };
  const DECIDED = { run_again: "run again", took_effect: "it took effect", failed: "it failed" };

  function cutOff(callId) {
    return ((s.trace && s.trace.cut_off_effects) || []).find((e) => e.tool_call_id === callId);
  }

  function cutOffKey(callId) {
    const e = cutOff(callId);
    return e ? ":" + e.resolutions.join("+") + ":" + (e.decision || "") : "";
  }

  function cutOffNote(callId) {
    const e = cutOff(callId);
    if (!e) return null;
    return el("div", { class: "effect-note", "data-testid": "cut-off-effect", dataset: { resolutions: e.resolutions.join(" "), decision: e.decision || "" } },
      el("strong", { text: "Cut off by a crash while it acted" }), " (" + e.effects + ", key " + e.idempotency_key + ")",
      el("ol", {}, e.resolutions.map((r) => el("li", { text: RESOLVED[r] || r }))),
      e.decision ? el("div", { text: "decided: " + DECIDED[e.decision] }) : null);
  }

  function signature(row, results) {
    const m = row.message;
    return [m.sequence, row.onMain, row.index, row.alternatives.map((a) => a.sequence).join(","),
      (m.tool_calls || []).map((c) => ((results.get(c.id) || {}).sequence || "-") + cutOffKey(c.id)).join(","),
      row.side.map((x) => x.sequence).join(","), (row.compacted || []).map((c) => c.length).join(",")].join("|");
  }

  function messageBox(row, results, paired) {
    const m = row.message;
    const box = el("div", {
      class: "msg " + m.role + (row.onMain ? "" : " off-main") + (m.synthetic ? " synthetic" : ""),
      id: "m" + m.sequence, "data-testid": "message",
      dataset: { sequence: m.sequence, role: m.role, parentSequence: m.parent_sequence ?? "", onMain: row.onMain ? "true" : "false" },
    });
    const head = el("div", { class: "msg-head" },
      el("span", { class: "role", text: m.role + " #" + m.sequence }),
      m.branch_type !== "main" ? el("span", { class: "tag", text: m.branch_type }) : null,
      m.duration_ms ? el("span", { class: "meta", text: " " + m.duration_ms + " ms" }) : null,
      m.usage ? el("span", { class: "meta", text: " " + m.usage.prompt_tokens + "→" + m.usage.completion_tokens + " tok" }) : null,
      m.finish_reason && m.finish_reason !== "stop" && m.finish_reason !== "tool_calls" ? el("span", { class: "tag warn", text: m.finish_reason }) : null);
    if (row.alternatives.length > 1) head.append(branchSwitch(row));
    head.append(messageActions(m));
    box.append(head);
    const text = contentText(m.content);
    if (text) box.append(foldable(text, "content"));
    for (const call of m.tool_calls || []) {
      const result = results.get(call.id);
      if (result) paired.add(result.sequence);
      box.append(el("div", { class: "tool-call", "data-testid": "tool-call", dataset: { callId: call.id } },
        el("div", { class: "call-sig" }, "→ ", el("strong", { text: call.function.name })),
        foldable(prettyArgs(call.function.arguments), "args"),
        cutOffNote(call.id),
        result ? toolResult(result) : el("div", { class: "meta pending", text: "… no result yet" })));
    }
    for (const range of row.compacted || []) {
      box.append(el("details", { class: "side-branch compacted", "data-testid": "compacted-range" },
        el("summary", { text: "compacted: #" + range[0].sequence + "–#" + range[range.length - 1].sequence + " (" + range.length + " messages)" }),
        range.map((r) => el("div", { class: "msg " + r.role, dataset: { sequence: r.sequence, role: r.role } },
          el("div", { class: "role", text: r.role + " #" + r.sequence }), foldable(contentText(r.content) ||
            (r.tool_calls || []).map((c) => "→ " + c.function.name + "(" + c.function.arguments + ")").join("\n"))))));
    }
    for (const sideMsg of row.side) {
      box.append(el("details", { class: "side-branch", "data-testid": "side-branch" },
        el("summary", { text: sideMsg.branch_type + " #" + sideMsg.sequence }), foldable(contentText(sideMsg.content))));
    }
    return box;
  }

  function toolResult(m) {
    const text = contentText(m.content);
    let body = foldable(text, "content");
    // An output the model saw cut (head and tail) is stored whole: offer to show it.
    const stored = m.tool_call_id && text.includes("workspace_read(key='outputs/");
    const whole = stored ? el("button", { class: "small", "data-testid": "whole-output", text: "whole output",
      onclick: (e) => act(async () => {
        const r = await fetch(base + "/outputs/" + enc(m.tool_call_id), { headers: authHeaders() });
        if (!r.ok) throw new Error("whole output: HTTP " + r.status);
        const full = foldable(await r.text(), "content");
        body.replaceWith(full); body = full; e.target.remove();
      }) }) : null;
    return el("div", { class: "msg tool", "data-testid": "message", id: "m" + m.sequence, dataset: { sequence: m.sequence, role: "tool" } },
      el("div", { class: "msg-head" }, el("span", { class: "role", text: "result #" + m.sequence }),
        m.error_code ? el("span", { class: "tag warn", text: m.error_code }) : null,
        m.duration_ms ? el("span", { class: "meta", text: " " + m.duration_ms + " ms" }) : null, whole),
      body);
  }

  function branchSwitch(row) {
    const parent = row.message.parent_sequence ?? 0;
    const go = (delta) => () => {
      const next = row.alternatives[(row.index + delta + row.alternatives.length) % row.alternatives.length];
      s.choice[parent] = next.sequence;
      render();
    };
    return el("span", { class: "branch-switch", "data-testid": "branch-switch", dataset: { index: row.index, count: row.alternatives.length } },
      el("button", { type: "button", class: "prev", title: "previous branch", onclick: go(-1), text: "‹" }),
      el("span", { text: " branch " + (row.index + 1) + "/" + row.alternatives.length + (row.onMain ? " (main)" : "") + " " }),
      el("button", { type: "button", class: "next", title: "next branch", onclick: go(1), text: "›" }),
      el("button", { type: "button", class: "small", "data-testid": "compare-branches", title: "the branches from here side by side",
        onclick: () => { s.compareAt = s.compareAt === parent ? null : parent; render(); }, text: "compare" }));
  }

  // The continuations of one fork side by side: per branch its models, calls, tokens, cost,
  // time and answer, then its messages (a rewind with another model compared with the first).
  function renderCompare(tree) {
    const forks = s.compareAt === null ? [] : (tree.children.get(s.compareAt) || []).filter((m) => m.branch_type === "main");
    compare.hidden = forks.length < 2;
    if (compare.hidden) { compare.replaceChildren(); return; }
    const columns = forks.map((start) => {
      const chain = chainFrom(tree, start);
      const f = branchFigures(chain);
      return el("div", { class: "branch-column", "data-testid": "branch-column",
        dataset: { start: start.sequence, models: f.models.join(" "), calls: f.calls, tokens: f.tokens, onMain: tree.main.has(start.sequence) ? "true" : "false" } },
        el("h4", { text: "from #" + start.sequence + (tree.main.has(start.sequence) ? " (main)" : "") }),
        el("div", { class: "meta", text: (f.models.join(", ") || "no model call") }),
        el("div", { class: "meta", text: f.calls + " model calls · " + f.tools + " tool results · " + f.tokens + " tokens · " + fmtCost(f.cost) + " · " + (f.ms / 1000).toFixed(1) + " s" }),
        el("div", { class: "summary", "data-testid": "branch-answer" }, foldable(contentText(f.answer) || "(no answer yet)")),
        el("ol", { class: "branch-messages" }, chain.map((m) => el("li", { dataset: { sequence: m.sequence },
          text: m.role + " #" + m.sequence + ": " + (contentText(m.content) || (m.tool_calls || []).map((c) => "→ " + c.function.name).join(" ")).slice(0, 200) }))));
    });
    compare.replaceChildren(
      el("div", { class: "compare-head" }, el("strong", { text: "Branches after #" + s.compareAt }), " ",
        el("button", { type: "button", class: "small", onclick: () => { s.compareAt = null; render(); }, text: "close" })),
      el("div", { class: "compare-columns" }, ...columns));
  }

  function messageActions(m) {
    const box = el("span", { class: "actions" });
    box.append(el("button", { type: "button", "data-testid": "rewind", title: "continue from this message (new messages hang under it)",
      onclick: () => { s.rewindAfter = m.sequence; renderControls(s.trace); controls.querySelector("textarea").focus(); }, text: "rewind here" }));
    if (m.role === "assistant" && m.parent_sequence) {
      box.append(el("button", { type: "button", "data-testid": "regenerate", title: "ask the model again for this message",
        onclick: () => act(async () => { await post(base + "/run", { after_sequence: m.parent_sequence }); soon(); }), text: "regenerate" }));
    }
    return box;
  }

  function renderLive() {
    live.hidden = !(s.live || s.liveTool);
    fill(live, el("div", { class: "role", text: "assistant (writing…)" }),
      el("pre", { class: "content", text: s.live }), s.liveTool ? el("div", { class: "meta", text: s.liveTool }) : null);
  }

  function renderControls(t) {
    if (t.remote) { controls.replaceChildren(); return; }  // its longhaul takes the commands
    const waitingHuman = t.status === "waiting" && t.wait_reason === "human";
    const text = el("textarea", { "data-testid": "composer", placeholder: waitingHuman ? "Your answer…" : "Message to the agent (optional when rewinding)" });
    const send = async () => {
      const content = text.value.trim();
      const messagesIn = content ? [{ role: "user", content }] : [];
      await act(async () => {
        if (s.rewindAfter !== null) {
          const model = s.forkModel.trim();
          await post(base + "/run", { messages: messagesIn, after_sequence: s.rewindAfter, ...(model ? { model } : {}) });
          s.compareAt = model ? s.rewindAfter : s.compareAt;
          s.rewindAfter = null; s.forkModel = ""; s.choice = {};
        } else {
          await post(base + "/run", { messages: messagesIn });
        }
        text.value = "";
        soon();
      });
    };
    const rows = [];
    if (s.rewindAfter !== null) {
      rows.push(el("div", { class: "rewind-note", "data-testid": "rewind-note" }, "Rewinding: new messages will follow #" + s.rewindAfter + " ",
        el("input", { "data-testid": "fork-model", placeholder: "with another model (optional)", value: s.forkModel,
          oninput: (e) => { s.forkModel = e.target.value; } }), " ",
        el("button", { type: "button", onclick: () => { s.rewindAfter = null; s.forkModel = ""; renderControls(s.trace); }, text: "cancel" })));
    }
    for (const call of t.pending_approvals || []) {
      // for a call whose outcome is unknown the composer's text is the reason the model is told
      const decide = (approved, extra) => () => act(async () => {
        const reason = call.outcome_unknown ? text.value.trim() : "";
        await post(base + "/approve", { tool_call_id: call.tool_call_id, approved, ...(reason ? { reason } : {}), ...(extra || {}) });
        if (reason) text.value = "";
        soon(); });
      if (call.outcome_unknown) {
        rows.push(el("div", { class: "approval outcome-unknown", "data-testid": "outcome-unknown" }, "Outcome unknown: ",
          el("code", { text: call.name + "(" + call.arguments + ")" }), " was cut off by a crash while it acted. ",
          el("button", { type: "button", "data-testid": "run-again", onclick: decide(true), text: "run again" }),
          el("button", { type: "button", "data-testid": "took-effect", onclick: decide(false, { took_effect: true }), text: "mark done" }),
          el("button", { type: "button", "data-testid": "effect-failed", onclick: decide(false), text: "it failed" }),
          el("span", { class: "meta", text: " (the text box is told to the model)" })));
        continue;
      }
      rows.push(el("div", { class: "approval", "data-testid": "approval" }, "Approve ", el("code", { text: call.name + "(" + call.arguments + ")" }), "? ",
        el("button", { type: "button", "data-testid": "approve", onclick: decide(true), text: "approve" }),
        el("button", { type: "button", "data-testid": "deny", onclick: decide(false), text: "deny" })));
    }
    const buttons = el("div", { class: "buttons" });
    if (waitingHuman && s.rewindAfter === null) {
      buttons.append(el("button", { type: "button", class: "primary", "data-testid": "reply", onclick: () => act(async () => {
        await post(base + "/reply", { content: text.value }); text.value = ""; soon(); }), text: "Reply" }));
    } else {
      buttons.append(el("button", { type: "button", class: "primary", "data-testid": "send", onclick: send, text: s.rewindAfter !== null ? "Rewind" : "Send / continue" }));
    }
    buttons.append(
      el("button", { type: "button", "data-testid": "stop", class: ACTIVE.has(t.status) ? "danger" : "", onclick: () => act(async () => { await post(base + "/stop"); soon(); }), text: "Stop" }),
      el("button", { type: "button", "data-testid": "resume", onclick: () => act(async () => { await post(base + "/resume"); soon(); }), text: "Resume" }),
      el("button", { type: "button", "data-testid": "reflect", onclick: () => act(async () => { await post(base + "/reflect", text.value.trim() ? { focus: text.value.trim() } : {}); soon(); }), text: "Reflect" }),
      el("button", { type: "button", "data-testid": "compact", onclick: () => act(async () => { await post(base + "/compact"); soon(); }), text: "Compact" }),
      el("button", { type: "button", "data-testid": "delete", class: "danger", onclick: () => {
        if (!confirm("Erase this trace and its sub-traces for good?")) return;
        act(async () => { await api(base, { method: "DELETE" }); location.hash = "#/"; });
      }, text: "Delete" }));
    const keep = controls.querySelector("textarea");
    if (keep) text.value = keep.value;
    const focused = keep && document.activeElement === keep;
    controls.replaceChildren(...rows, text, buttons);
    if (focused) text.focus();
  }

  function onEvent(name, data) {
    if (name === "heartbeat") return;
    if (name === "live") {
      const update = JSON.parse(data);
      if (update.kind === "delta") { s.live += update.text || ""; renderLive(); }
      else if (update.kind === "tool_start") { s.liveTool = "running " + update.tool + "…"; renderLive(); }
      return;
    }
    if (name === "message_appended") { s.live = ""; s.liveTool = ""; renderLive(); }
    soon();
  }

  // Load the page, then follow the events after the loaded view (no replay of old ones).
  let stop = null;
  refresh().then(() => {
    if (s.gone) return;
    stop = follow(base + "/events", onEvent, showError, () => { page.dataset.stream = "open"; },
                  s.trace ? s.trace.event_id : 0);
  });
  return () => { s.gone = true; if (stop) stop(); };
}

// Put ``nodes`` into ``parent`` in order, touching only what differs: an unchanged prefix (a
// long trace's history) is neither detached nor restyled when a message arrives.
function reconcile(parent, nodes) {
  for (let i = 0; i < nodes.length; i++) {
    if (parent.children[i] !== nodes[i]) parent.insertBefore(nodes[i], parent.children[i] || null);
  }
  while (parent.children.length > nodes.length) parent.lastElementChild.remove();
}

function prettyArgs(raw) {
  try { return JSON.stringify(JSON.parse(raw), null, 2); } catch { return raw; }
}

// The message tree of a trace (pure functions, no DOM). Messages carry parent_sequence;
// the main path runs from head_sequence back to the root. Where a rewind or a regenerate
// hung a second child under a message, that message's children are alternatives; the view
// follows the main path unless the reader switched to another alternative. A long trace's
// page holds only its latest messages: the view then starts where the main path's loaded part
// does (under the first message not loaded).

export function buildTree(messages, headSequence) {
  const bySeq = new Map(messages.map((m) => [m.sequence, m]));
  const children = new Map();
  for (const m of messages) {
    const key = m.parent_sequence ?? 0;
    if (!children.has(key)) children.set(key, []);
    children.get(key).push(m);
  }
  for (const list of children.values()) list.sort((a, b) => a.sequence - b.sequence);
  const main = new Set();
  let seq = headSequence;
  for (; seq && bySeq.has(seq); seq = bySeq.get(seq).parent_sequence) main.add(seq);
  let start = seq || 0;
  if (!main.size && messages.length) start = messages.reduce((a, b) => (a.sequence < b.sequence ? a : b)).parent_sequence || 0;
  return { bySeq, children, main, head: headSequence, start };
}

// Side branches (reflections, a compaction's rounds) hang aside; every other child is an
// alternative continuation.
export const isSide = (m) => m.branch_type === "reflection" || m.side_branch === true;

// The displayed path: [{message, alternatives, index, side}] where alternatives are the
// continuations of the same parent (length > 1 → a branch switch) and side the reflections
// hanging under it. `choice` maps a parent sequence to the chosen child sequence.
export function displayPath(tree, choice) {
  const rows = [];
  let parent = tree.start;
  for (let guard = 0; guard < 100000; guard++) {
    const all = tree.children.get(parent) || [];
    const options = all.filter((m) => !isSide(m));
    if (!options.length) break;
    let picked = options.find((m) => m.sequence === choice[parent]);
    if (!picked) picked = options.find((m) => tree.main.has(m.sequence));
    if (!picked) picked = newestLeafward(tree, options);
    const side = (tree.children.get(picked.sequence) || []).filter(isSide).flatMap((m) => sideChain(tree, m));
    // A compaction summary replaces a range that stays in the tree as its sibling: that
    // range is shown folded where it hangs, not offered as a branch.
    const compacted = picked.branch_type === "compression" ? options.filter((m) => m !== picked) : [];
    const alternatives = compacted.length ? [picked] : options;
    rows.push({ message: picked, alternatives, index: alternatives.indexOf(picked), side,
                compacted: compacted.map((m) => chainFrom(tree, m)), onMain: tree.main.has(picked.sequence) });
    parent = picked.sequence;
  }
  return rows;
}

// The messages of a branch from ``start`` on (newest continuation at each fork).
export function chainFrom(tree, start) {
  const chain = [start];
  for (let at = start; chain.length < 10000;) {
    const next = (tree.children.get(at.sequence) || []).filter((m) => !isSide(m));
    if (!next.length) break;
    at = next[next.length - 1];
    chain.push(at);
  }
  return chain;
}

// A side branch is a chain of side messages (prompt, model turns, tool results, the note).
function sideChain(tree, start) {
  const chain = [start];
  for (let at = start; chain.length < 1000;) {
    const next = (tree.children.get(at.sequence) || []).filter(isSide);
    if (!next.length) break;
    at = next[next.length - 1];
    chain.push(at);
  }
  return chain;
}

// Off the main path, follow the newest continuation.
function newestLeafward(tree, options) { return options[options.length - 1]; }

// Tool results by the call they answer, on the displayed path.
export function resultsByCall(rows) {
  const found = new Map();
  for (const { message } of rows) if (message.role === "tool" && message.tool_call_id) found.set(message.tool_call_id, message);
  return found;
}

// Model and tool calls on the displayed path with their durations, in order.
// A tool that recorded no duration (a sub-agent or a person answered it later) counts the
// time from the call to its result, so a long wait stands out like a slow call.
export function timeline(rows) {
  const calls = new Map();
  const steps = [];
  for (const { message: m } of rows) {
    for (const call of m.tool_calls || []) calls.set(call.id, { name: call.function.name, at: m.created_at });
    if (m.role === "assistant" && !m.synthetic) {
      steps.push({ kind: "model", label: "model" + (m.model ? " " + m.model : ""), sequence: m.sequence, ms: m.duration_ms || 0 });
    } else if (m.role === "tool") {
      const call = calls.get(m.tool_call_id) || {};
      const waited = call.at && m.created_at ? Math.max(0, Math.round((m.created_at - call.at) * 1000)) : 0;
      steps.push({ kind: "tool", label: call.name || m.name || "tool", sequence: m.sequence, ms: m.duration_ms || waited });
    }
  }
  return steps;
}

// What one branch did from its fork on: the models it used, its model calls, tokens, cost,
// time and its last answer (what a fork with another model is compared by).
export function branchFigures(chain) {
  const f = { models: [], calls: 0, tokens: 0, cost: 0, ms: 0, tools: 0, answer: "" };
  for (const m of chain) {
    f.ms += m.duration_ms || 0;
    if (m.role === "tool") f.tools += 1;
    if (m.role !== "assistant" || m.synthetic) continue;
    f.calls += 1;
    if (m.model && !f.models.includes(m.model)) f.models.push(m.model);
    if (m.usage) f.tokens += (m.usage.prompt_tokens || 0) + (m.usage.completion_tokens || 0);
    f.cost += m.cost || 0;
    if (!(m.tool_calls || []).length && m.content) f.answer = m.content;
  }
  return f;
}

// Drives /ag-ui with the official @ag-ui/client (HttpAgent), as a front end would: a first run
// that ends with a question (an interrupt), a second run that answers it through `resume`,
// then a new user message on the same thread. Prints what the client saw as JSON.
const { HttpAgent } = require("@ag-ui/client");

const config = JSON.parse(process.argv[2]);

async function main() {
  const agent = new HttpAgent({
    url: config.url,
    headers: { Authorization: `Bearer ${config.key}` },
    threadId: config.thread,
    initialMessages: [{ id: "u1", role: "user", content: "paint it" }],
  });
  const runs = [];
  async function run(parameters) {
    const seen = { events: [], outcome: null, interrupts: [], error: null };
    const { result, newMessages } = await agent.runAgent(parameters, {
      onEvent: ({ event }) => {
        seen.events.push(event.type);
      },
      onRunFinishedEvent: (finished) => {
        seen.outcome = finished.outcome;
        seen.interrupts = finished.interrupts || [];
      },
      onRunFailed: ({ error }) => {
        seen.error = String(error);
      },
    });
    runs.push({ ...seen, result, newMessages, state: agent.state });
  }
  await run({ forwardedProps: { model: config.model } });
  const [question] = agent.pendingInterrupts;
  await run({
    resume: [{ interruptId: question.id, status: "resolved", payload: { answer: "blue" } }],
  });
  agent.addMessage({ id: "u2", role: "user", content: "more" });
  await run({});
  process.stdout.write(JSON.stringify({ runs, messages: agent.messages }));
}

main().catch((error) => {
  process.stderr.write(`${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});

// Runs one prompt through geppetto serve's /ag-ui with the @ag-ui/client HttpAgent, which parses the stream and
// verifies the order of its events; prints the event types it saw and any error as JSON.
// usage: node agui_client.mjs URL TEXT
import { HttpAgent } from "@ag-ui/client";

const [url, text] = process.argv.slice(2);
const types = [];
const errors = [];
const agent = new HttpAgent({
  url,
  threadId: `node-${Date.now()}`,
  initialMessages: [{ id: "u1", role: "user", content: text }],
});
try {
  await agent.runAgent({ runId: "run-1" }, { onEvent: ({ event }) => types.push(event.type) });
} catch (error) {
  errors.push(String(error && error.message ? error.message : error));
}
process.stdout.write(JSON.stringify({ types, errors, messages: agent.messages.length }));

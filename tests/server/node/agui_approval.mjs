// Runs a tool approval and a client-side tool through geppetto serve's /ag-ui with the @ag-ui/client
// HttpAgent: the first run ends with an interrupt (or a pending client-side tool call), the second resumes it
// (a resume entry, or a tool message with the client's result). Prints what the client saw as JSON.
// usage: node agui_approval.mjs URL THREAD approve|deny|client
import { HttpAgent } from "@ag-ui/client";

const [url, threadId, mode] = process.argv.slice(2);
const errors = [];
const runs = [];
const colorTool = {
  name: "pick_color",
  description: "Ask the user to pick a color.",
  parameters: { type: "object", properties: { subject: { type: "string" } }, required: ["subject"] },
};
const tools = mode === "client" ? [colorTool] : [];
const text = mode === "client" ? "pick_color for 'the sky'" : "delete_file for 'a.txt'";
const agent = new HttpAgent({ url, threadId, initialMessages: [{ id: "u1", role: "user", content: text }] });

async function run(runId, extra) {
  const seen = { types: [], outcome: null };
  try {
    await agent.runAgent(
      { runId, tools, ...extra },
      {
        onEvent: ({ event }) => {
          seen.types.push(event.type);
          if (event.type === "RUN_FINISHED") seen.outcome = event.outcome ?? null;
          if (event.type === "RUN_ERROR") errors.push(`RUN_ERROR ${event.code}: ${event.message}`);
        },
      },
    );
  } catch (error) {
    errors.push(String(error && error.message ? error.message : error));
  }
  seen.pendingInterrupts = agent.pendingInterrupts.map((i) => ({ id: i.id, toolCallId: i.toolCallId, reason: i.reason }));
  runs.push(seen);
}

await run("run-1");
if (mode === "client") {
  const call = agent.messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.function.name === "pick_color");
  agent.setMessages([...agent.messages, { id: "t1", role: "tool", toolCallId: call.id, content: "blue" }]);
} 
if (mode === "client") {
  await run("run-2");
} else {
  const [interrupt] = agent.pendingInterrupts;
  const payload = mode === "approve" ? { approved: true } : { approved: false, reason: "keep it" };
  await run("run-2", { resume: [{ interruptId: interrupt.id, status: "resolved", payload }] });
}
const last = agent.messages.filter((m) => m.role === "assistant" && typeof m.content === "string" && m.content).pop();
const toolMessages = agent.messages.filter((m) => m.role === "tool").map((m) => m.content);
process.stdout.write(JSON.stringify({ runs, errors, answer: last ? last.content : null, toolMessages }));

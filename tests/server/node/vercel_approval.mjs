// A tool approval and a client-side tool the way useChat does them, with the ai package (v6) reading geppetto
// serve's /api/chat stream: the first reply ends with a tool part waiting (approval-requested, or
// input-available for a client-side tool); the client answers in that part (addToolApprovalResponse /
// addToolOutput do exactly this) and sends the messages again; the reply continues the same message.
// usage: node vercel_approval.mjs URL CHAT_ID approve|deny|client
import { DefaultChatTransport, readUIMessageStream } from "ai6";

const [url, chatId, mode] = process.argv.slice(2);
const errors = [];
const transport = new DefaultChatTransport({ api: url });
const user = {
  id: "u1",
  role: "user",
  parts: [{ type: "text", text: mode === "client" ? "pick_color for 'the sky'" : "delete_file for 'a.txt'" }],
};

async function send(messages, continued) {
  const stream = await transport.sendMessages({
    chatId,
    trigger: "submit-message",
    messageId: continued ? continued.id : undefined,
    abortSignal: undefined,
    messages,
  });
  let message = null;
  for await (const snapshot of readUIMessageStream({
    message: continued,
    stream,
    onError: (error) => errors.push(String(error)),
    terminateOnError: true,
  })) {
    message = snapshot;
  }
  return message;
}

const first = await send([user]);
const waiting = first.parts.find((p) => p.state === "approval-requested" || p.state === "input-available");
let answered;
if (mode === "client") {
  answered = { ...waiting, state: "output-available", output: { color: "blue" } };
} else {
  const approved = mode === "approve";
  answered = {
    ...waiting,
    state: "approval-responded",
    approval: { id: waiting.approval.id, approved, ...(approved ? {} : { reason: "keep it" }) },
  };
}
const responded = { ...first, parts: first.parts.map((p) => (p === waiting ? answered : p)) };
const second = await send([user, responded], responded);
process.stdout.write(JSON.stringify({ errors, first, second }));

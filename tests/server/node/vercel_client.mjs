// Sends one prompt to geppetto serve's /api/chat the way useChat does (the ai package's DefaultChatTransport),
// reads the reply with the ai package's own stream reader, and prints what it understood as JSON.
// usage: node vercel_client.mjs URL CHAT_ID TEXT
import { DefaultChatTransport, readUIMessageStream } from "ai";

const [url, chatId, text] = process.argv.slice(2);
let header = null;
const errors = [];
const transport = new DefaultChatTransport({
  api: url,
  fetch: async (input, init) => {
    const response = await fetch(input, init);
    header = response.headers.get("x-vercel-ai-ui-message-stream");
    return response;
  },
});
const stream = await transport.sendMessages({
  chatId,
  trigger: "submit-message",
  messageId: undefined,
  abortSignal: undefined,
  messages: [{ id: "u1", role: "user", parts: [{ type: "text", text }] }],
});
let message = null;
for await (const snapshot of readUIMessageStream({
  stream,
  onError: (error) => errors.push(String(error)),
  terminateOnError: true,
})) {
  message = snapshot;
}
process.stdout.write(JSON.stringify({ header, errors, message }));

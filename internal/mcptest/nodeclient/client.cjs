// An MCP client on the official TypeScript SDK, for the gateway's tests:
// node client.cjs URL TOKEN connects over streamable HTTP, prints one
// JSON line per event on stdout and takes one JSON command per line on
// stdin (see internal/mcptest/node.go). NODE_PATH finds the SDK.
"use strict";
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const readline = require("node:readline");

const [url, token] = process.argv.slice(2);
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");

async function main() {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: "Bearer " + token } },
  });
  const client = new Client({ name: "ts-sdk-test-client", version: "1.0" });
  client.onerror = (e) => out({ event: "client_error", message: String(e && e.message || e) });
  await client.connect(transport);
  out({ event: "connected", session: transport.sessionId });
  const rl = readline.createInterface({ input: process.stdin });
  rl.on("line", async (line) => {
    let cmd;
    try {
      cmd = JSON.parse(line);
    } catch (e) {
      out({ event: "bad_command", message: String(e) });
      return;
    }
    switch (cmd.op) {
      case "call": {
        const opts = {};
        if (cmd.timeout) opts.timeout = cmd.timeout;
        if (cmd.progress) opts.onprogress = (p) => out({ event: "progress", id: cmd.id, progress: p });
        client.callTool({ name: cmd.name, arguments: cmd.args || {} }, undefined, opts)
          .then((r) => out({ event: "result", id: cmd.id, result: r }))
          .catch((e) => out({ event: "error", id: cmd.id, code: e.code, message: String(e.message) }));
        out({ event: "sent", id: cmd.id });
        break;
      }
      case "delete":
        try {
          await transport.terminateSession();
          out({ event: "deleted" });
        } catch (e) {
          out({ event: "error", id: "delete", message: String(e.message) });
        }
        break;
      default:
        out({ event: "bad_command", message: "no op " + cmd.op });
    }
  });
  rl.on("close", () => process.exit(0));
}

main().catch((e) => {
  out({ event: "fatal", message: String(e && e.stack || e) });
  process.exit(1);
});

// A scripted ACP editor for tests/acp_proxy.rs, built on the official ACP client library
// (@agentclientprotocol/sdk, installed by tests/acp/setup.sh). It speaks ACP v1 on its
// stdin/stdout, does what an editor does for real (writes and reads files, runs terminal
// commands), answers permission requests as its scripted person would, and logs everything
// it saw as JSON lines.
//
// Usage: node acp_editor.mjs CONFIG.json
//   {"sdk": "<dir holding node_modules>", "cwd": "<session cwd>", "log": "<jsonl path>",
//    "prompts": ["..."], "person": "allow" | "reject",
//    "cancel_when": {"file": "<path>", "contains": "<text>"}}   (optional)
// With cancel_when, the person cancels the turn (`session/cancel`) as soon as that file
// holds that text (e.g. a harness's log shows it is deciding a given call).
import { spawn } from "node:child_process";
import { appendFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const pkg = join(config.sdk, "node_modules/@agentclientprotocol/sdk");
const entry = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")).exports["."].import;
const acp = await import(pathToFileURL(join(pkg, entry)).href);

const log = (entry) => appendFileSync(config.log, JSON.stringify(entry) + "\n");

/** The option the scripted person picks: the first of the wanted kind. */
function choose(options, person) {
  const kinds = person === "allow" ? ["allow_once", "allow_always"] : ["reject_once", "reject_always"];
  for (const k of kinds) {
    const o = options.find((o) => o.kind === k);
    if (o) return { outcome: "selected", optionId: o.optionId };
  }
  return { outcome: "cancelled" };
}

const terminals = new Map();
let nextTerminal = 1;

const app = acp
  .client({ name: "ahp-wrap-test-editor" })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    const outcome = choose(params.options, config.person);
    log({ kind: "permission", toolCall: params.toolCall, outcome });
    return { outcome };
  })
  .onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
    log({ kind: "write", path: params.path });
    writeFileSync(params.path, params.content);
    return {};
  })
  .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => {
    // A missing file reads as empty: Gemini CLI 0.61 reads a file before it writes it, and
    // fails the write on any error the editor answers (it looks for "not found" in a
    // message it never gets, since it rejects with the error object).
    const missing = !existsSync(params.path);
    log({ kind: "read", path: params.path, missing });
    return { content: missing ? "" : readFileSync(params.path, "utf8") };
  })
  .onRequest(acp.methods.client.terminal.create, ({ params }) => {
    log({ kind: "terminal", command: params.command, args: params.args ?? [] });
    const id = `t${nextTerminal++}`;
    const child = spawn(params.command, params.args ?? [], { cwd: params.cwd ?? config.cwd });
    const t = { output: "", exit: null };
    t.done = new Promise((resolve) => {
      child.on("error", (e) => { t.output += String(e); t.exit = { exitCode: 127 }; resolve(); });
      child.on("exit", (code, signal) => { t.exit = { exitCode: code, signal }; resolve(); });
    });
    child.stdout.on("data", (d) => (t.output += d));
    child.stderr.on("data", (d) => (t.output += d));
    t.child = child;
    terminals.set(id, t);
    return { terminalId: id };
  })
  .onRequest(acp.methods.client.terminal.output, ({ params }) => {
    const t = terminals.get(params.terminalId);
    return { output: t.output, truncated: false, exitStatus: t.exit ?? undefined };
  })
  .onRequest(acp.methods.client.terminal.waitForExit, async ({ params }) => {
    const t = terminals.get(params.terminalId);
    await t.done;
    return t.exit;
  })
  .onRequest(acp.methods.client.terminal.kill, ({ params }) => {
    terminals.get(params.terminalId)?.child.kill();
    return {};
  })
  .onRequest(acp.methods.client.terminal.release, ({ params }) => {
    terminals.delete(params.terminalId);
    return {};
  })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    log({ kind: "update", update: params.update });
  });

/** Sends `session/cancel` once `when.file` holds `when.contains` (polled). */
function cancelWhen(agent, sessionId, when) {
  const timer = setInterval(async () => {
    const text = existsSync(when.file) ? readFileSync(when.file, "utf8") : "";
    if (!text.includes(when.contains)) return;
    clearInterval(timer);
    log({ kind: "cancel" });
    await agent.notify(acp.methods.agent.session.cancel, { sessionId });
  }, 50);
}

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
await app.connectWith(stream, async (agent) => {
  const init = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true },
  });
  log({ kind: "initialized", protocolVersion: init.protocolVersion });
  const session = await agent.request(acp.methods.agent.session.new, { cwd: config.cwd, mcpServers: [] });
  if (config.cancel_when) cancelWhen(agent, session.sessionId, config.cancel_when);
  for (const text of config.prompts) {
    try {
      const r = await agent.request(acp.methods.agent.session.prompt, {
        sessionId: session.sessionId,
        prompt: [{ type: "text", text }],
      });
      log({ kind: "stop", stopReason: r.stopReason });
    } catch (e) {
      log({ kind: "prompt_error", error: String(e?.message ?? e) });
    }
  }
  // Notification handlers run asynchronously: let those already received finish before
  // the connection closes (an update sent just before a prompt's answer is logged).
  await new Promise((resolve) => setTimeout(resolve, 200));
});
process.exit(0);

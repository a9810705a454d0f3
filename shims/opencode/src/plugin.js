// ahp-wrap's OpenCode plugin, written into one run's private directory and loaded through
// OPENCODE_CONFIG_CONTENT (see shims/opencode/README.md). Every hook below relays to the
// wrapper through the hook executable (`<ahp-wrap-hook> hook opencode <hook>`, payload on
// stdin) and applies what it prints: a block throws (the model reads the reason as the
// tool's error), a modify rewrites the tool's arguments or the prompt in place. Whatever
// goes wrong on the way (no answer in time, a crash, an answer we cannot read) blocks.
//
// The constants are filled in by the shim (src/config.rs) for this run.
import { spawn, spawnSync } from "node:child_process";

const HOOK_EXE = "__AHP_WRAP_HOOK_EXE__";
/// The framework the hook speaks for (`opencode`, or a fork's name) and the agent's name.
const FRAMEWORK = "__AHP_WRAP_FRAMEWORK__";
const AGENT = "__AHP_WRAP_AGENT__";
const TIMEOUT_MS = __AHP_WRAP_TIMEOUT_MS__;
/// The most of the hook's stdout or stderr we keep.
const MAX_OUTPUT = 4 * 1024 * 1024;
/// Bus events relayed to the wrapper: notifications, sent at once and in full (OpenCode
/// may exit right after `session.idle`, before an asynchronous relay would have started).
const RELAYED_EVENTS = new Set(["session.created", "session.idle", "session.error", "session.deleted"]);

/// Runs the hook executable once: resolves to {code, stdout, stderr} or {failed: why}.
function relay(hook, payload, cwd) {
  return new Promise((resolve) => {
    let done = false;
    const finish = (result) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(result);
    };
    let child;
    try {
      child = spawn(HOOK_EXE, ["hook", FRAMEWORK, hook], { cwd, stdio: ["pipe", "pipe", "pipe"] });
    } catch (e) {
      resolve({ failed: `the ahp-wrap hook could not start (${e && e.message})` });
      return;
    }
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      finish({ failed: `the ahp-wrap hook did not answer within ${TIMEOUT_MS} ms` });
    }, TIMEOUT_MS);
    const out = { stdout: "", stderr: "" };
    for (const name of ["stdout", "stderr"]) {
      child[name].setEncoding("utf8");
      child[name].on("data", (chunk) => {
        if (out[name].length < MAX_OUTPUT) out[name] += chunk;
      });
    }
    child.on("error", (e) => finish({ failed: `the ahp-wrap hook could not run (${e && e.message})` }));
    child.on("close", (code, signal) =>
      finish(signal ? { failed: `the ahp-wrap hook was killed by ${signal}` } : { code, ...out }),
    );
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

/// Runs the hook executable for a notification, waiting for it; the answer is not used.
function relaySync(hook, payload, cwd) {
  spawnSync(HOOK_EXE, ["hook", FRAMEWORK, hook], {
    cwd,
    input: JSON.stringify(payload),
    stdio: ["pipe", "ignore", "ignore"],
    timeout: TIMEOUT_MS,
    killSignal: "SIGKILL",
  });
}

/// The wrapper's answer to a blocking hook: {decision: "none" | "block" | "modify", …}.
function answer(result) {
  const closed = (why) => ({
    decision: "block",
    reason: `ahp-wrap blocked this because ${why} (the ${AGENT} plugin fails closed)`,
  });
  if (result.failed) return closed(result.failed);
  if (result.code !== 0) {
    const said = result.stderr.trim();
    return said ? { decision: "block", reason: said } : closed(`the ahp-wrap hook exited with ${result.code}`);
  }
  const text = result.stdout.trim();
  if (!text) return { decision: "none" };
  try {
    const v = JSON.parse(text);
    if (v && typeof v === "object" && typeof v.decision === "string") return v;
  } catch {}
  return closed("the ahp-wrap hook's answer could not be read");
}

/// Tells the person too when a prompt is refused: OpenCode shows only "Unexpected server
/// error" for it. Never on a terminal, which OpenCode's screen owns.
function say(reason) {
  if (!process.stderr.isTTY) process.stderr.write(`ahp-wrap: ${reason}\n`);
}

/// Replaces every key of `target` by those of `source` (OpenCode runs the object it gave us).
function replaceInPlace(target, source) {
  for (const key of Object.keys(target)) delete target[key];
  Object.assign(target, source);
}

/// Sets the prompt's text: the first text part gets it, the other typed text parts go.
function replacePrompt(parts, prompt) {
  let first = true;
  for (let i = 0; i < parts.length; ) {
    const part = parts[i];
    if (part.type !== "text" || part.synthetic) {
      i++;
    } else if (first) {
      part.text = prompt;
      first = false;
      i++;
    } else {
      parts.splice(i, 1);
    }
  }
  if (first) parts.push({ type: "text", text: prompt });
}

export const AhpWrap = async ({ directory, worktree }) => {
  const where = { directory, worktree };
  // Notifications go in order, and a blocking hook waits for those sent before it.
  let queue = Promise.resolve();
  const notify = (hook, payload) => {
    queue = queue.then(() => relay(hook, { ...payload, ...where }, directory)).catch(() => {});
  };
  const decide = async (hook, payload) => {
    await queue;
    return answer(await relay(hook, { ...payload, ...where }, directory));
  };
  // The text of each session's last assistant message, for `session.idle`.
  const roles = new Map();
  const lastText = new Map();
  const track = (event) => {
    const p = event.properties || {};
    if (event.type === "message.updated" && p.info) roles.set(p.info.id, p.info.role);
    if (event.type === "message.part.updated" && p.part && p.part.type === "text") {
      if (roles.get(p.part.messageID) === "assistant") lastText.set(p.part.sessionID, p.part.text);
    }
  };

  return {
    event: async ({ event }) => {
      track(event);
      if (!RELAYED_EVENTS.has(event.type)) return;
      const sid = event.properties && event.properties.sessionID;
      const response = event.type === "session.idle" ? (lastText.get(sid) ?? null) : undefined;
      relaySync(event.type, { event, response, ...where }, directory);
    },
    "chat.message": async (input, output) => {
      const v = await decide("chat.message", { input, output });
      if (v.decision === "none") return;
      if (v.decision === "modify" && typeof v.prompt === "string") {
        replacePrompt(output.parts, v.prompt);
        return;
      }
      const reason = v.decision === "block" ? String(v.reason) : `ahp-wrap blocked this prompt: unknown answer ${v.decision}`;
      say(reason);
      throw new Error(reason);
    },
    "tool.execute.before": async (input, output) => {
      const v = await decide("tool.execute.before", { input, output });
      if (v.decision === "none") return;
      if (v.decision === "modify" && v.args && typeof v.args === "object" && !Array.isArray(v.args)) {
        replaceInPlace(output.args, v.args);
        return;
      }
      throw new Error(v.decision === "block" ? String(v.reason) : `ahp-wrap blocked this tool call: unknown answer ${v.decision}`);
    },
    "tool.execute.after": async (input, output) => {
      notify("tool.execute.after", { input, output });
    },
  };
};

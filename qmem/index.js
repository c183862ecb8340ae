// qmem for pi and Prime: a dependency-free relay to qmem.bridge (Python).
//
// All memory logic lives in Python. This file registers the tools and commands listed in
// tools.json (generated from qmem/hosts/tools.py), then relays tool calls, hooks, commands, ctx.ui
// and cancellation as JSON lines on the child's stdio (protocol: qmem/bridge.py).
//
// Promises kept here:
// - loading never throws: without Python the host works as before, with one warning; a Python
//   older than 3.10 makes the bridge print "qmem needs Python ≥ 3.10, found 3.9 (set QMEM_PYTHON)"
//   and exit, and that line is the one warning;
// - memory_search (needsRecall in tools.json) is registered only once the bridge's session_start
//   answer says recall is on for this host, and deactivated if a later session says it is off;
//   a session whose bridge is down before it answers session_start (an old Python, a crash, a
//   hang) offers no qmem tool at all until a later session's bridge answers;
// - the child never keeps the host alive: it is unref'd whenever no request is in flight,
//   and ended on session_shutdown; a bridge that crashes or hangs is dropped (pending calls
//   fail, hooks leave the context unchanged) and a new one starts only at the next
//   session_start, so a hung interpreter costs one timeout per session, not one per hook;
// - a warning raised while the session starts is held until its first prompt or command:
//   a host may have no client attached yet (Prime's daemon) and would drop it;
// - QMEM_PYTHON picks the interpreter; PYTHONPATH gets this folder's parent, so no install;
// - nothing in the session's directory is ever imported: the bridge runs in this folder's parent,
//   the session cwd reaches it as data, sys.path loses its unsafe first entry before any import
//   (PYTHONSAFEPATH on 3.11+, the -c bootstrap on every version), and its environment holds only
//   what qmem reads (BRIDGE_ENV): not the host's provider keys, not Prime's daemon token;
// - identity is the bridge's decision, from facts only the host knows: the path it loaded this
//   file from (a link install is resolved by Node, so import.meta.url cannot say), its process
//   title and whether the session header carries rlmDepth (qmem/hosts/identity.py).

import { spawn } from "node:child_process";
import { readFileSync, realpathSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const TOOL_TIMEOUT_MS = 180_000; // a gateway call is bounded by its own timeouts well below this
// Recall has its own per-turn budget (recall.timeoutMs); QMEM_HOOK_TIMEOUT_MS can lengthen this on slow machines.
const HOOK_TIMEOUT_MS = Number(process.env.QMEM_HOOK_TIMEOUT_MS) > 0 ? Number(process.env.QMEM_HOOK_TIMEOUT_MS) : 10_000;
const COMMAND_TIMEOUT_MS = 600_000; // commands may wait for the user in a dialog
const SHUTDOWN_TIMEOUT_MS = 2_000;
const BRIDGE_STOPPED = "qmem: the memory bridge stopped; the agent continues without memory until the next session.";
const PYTHON_TOO_OLD = /^qmem needs Python [^\n]*/m; // the bridge's one line on an old interpreter
const STDERR_KEPT = 4096; // what is kept of the bridge's stderr, to find that line

// What the bridge's environment keeps: qmem's own settings and credentials (and the seed's aliases),
// where the hosts keep their files, locale, temp, proxies and certificates, and the interpreter choice.
const BRIDGE_ENV = new RegExp("^(" + [
  "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_[A-Z_]+", "TZ", "TMPDIR", "TEMP", "TMP",
  "XDG_[A-Z0-9_]+", "QMEM_[A-Z0-9_]+", "PI_QDRANT_MEMORY_[A-Z0-9_]+",
  "PI_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR",
  "PRIME_AGENT_CODING_AGENT_DIR", "PRIME_AGENT_SESSION_DIR", "PRIME_AGENT_CODING_AGENT_SESSION_DIR", "HERMES_HOME",
  "HTTPS?_PROXY", "ALL_PROXY", "NO_PROXY", "https?_proxy", "all_proxy", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR",
  // What an interpreter of the user's own may need to start at all (QMEM_PYTHON): never project data.
  "PYENV_VERSION", "PYENV_ROOT", "PYTHONDONTWRITEBYTECODE", "PYTHONHOME", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH",
].join("|") + ")$");

function bridgeEnv(parent) {
  const env = {};
  for (const [name, value] of Object.entries(process.env)) if (BRIDGE_ENV.test(name)) env[name] = value;
  env.PYTHONPATH = parent; // this qmem, and nothing the host's PYTHONPATH names
  env.PYTHONSAFEPATH = "1"; // 3.11+: nothing is put in front of sys.path
  return env;
}

// `python3 -c`, not `-m`: runpy's own imports (types, importlib…) would come from sys.path[0]
// before qmem could drop it.  The first statement uses only sys (always loaded) to drop '' (the
// cwd, on 3.10); the module name is checked by start() to be a plain identifier.
function bootstrap(pkg) {
  return "import sys; sys.path[:] = [p for p in sys.path if p]; import runpy; "
    + `runpy.run_module("${pkg}.bridge", run_name="__main__", alter_sys=True)`;
}

function realDir() {
  try {
    return realpathSync(HERE);
  } catch {
    return HERE;
  }
}

function loadDefinitions() {
  try {
    return JSON.parse(readFileSync(join(HERE, "tools.json"), "utf8"));
  } catch {
    return { tools: [], commands: [] };
  }
}

class Bridge {
  constructor(report) {
    this.report = report; // (message, level) => void
    this.child = null;
    this.buffer = "";
    this.nextId = 1;
    this.pending = new Map();
    this.ui = null;
    this.stopping = false;
    this.warnedDead = false;
    this.down = false; // died unexpectedly in this session: not restarted before the next one
  }

  get alive() {
    return this.child !== null;
  }

  start() {
    if (this.child) return;
    const dir = realDir();
    const pkg = basename(dir);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(pkg)) {
      this.report(`qmem: the extension folder must be named like a Python package (e.g. "qmem"), not "${pkg}".`, "warning");
      return;
    }
    const parent = dirname(dir);
    let child;
    try {
      child = spawn(process.env.QMEM_PYTHON || "python3", ["-c", bootstrap(pkg)],
        { stdio: ["pipe", "pipe", "pipe"], cwd: parent, env: bridgeEnv(parent) });
    } catch {
      this.died();
      return;
    }
    this.child = child;
    this.stopping = false;
    child.stderrHead = "";
    child.on("error", () => this.died(child));
    // "close", not "exit": by then stderr has been read, so the interpreter's one line is known.
    child.on("close", () => this.died(child));
    child.stdin.on("error", () => this.died(child));
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk) => this.receive(chunk));
    child.stderr.setEncoding("utf8");
    // Drained so the pipe never fills (warnings arrive as protocol events); the start is kept.
    child.stderr.on("data", (chunk) => {
      if (child.stderrHead.length < STDERR_KEPT) child.stderrHead += chunk.slice(0, STDERR_KEPT);
    });
    this.setRef(false);
  }

  setRef(on) {
    const child = this.child;
    if (!child) return;
    for (const stream of [child.stdin, child.stdout, child.stderr]) {
      if (stream && typeof stream.ref === "function") on ? stream.ref() : stream.unref();
    }
    on ? child.ref() : child.unref();
  }

  died(which) {
    if (which && which !== this.child) return;
    const expected = this.stopping;
    this.child = null;
    for (const { reject, timer } of this.pending.values()) {
      clearTimeout(timer);
      reject(new Error(BRIDGE_STOPPED));
    }
    this.pending.clear();
    if (!expected) this.down = true;
    if (!expected && !this.warnedDead) {
      this.warnedDead = true;
      const tooOld = which && PYTHON_TOO_OLD.exec(which.stderrHead || "");
      this.report(tooOld ? tooOld[0] : BRIDGE_STOPPED, "warning");
    }
  }

  kill() {
    const child = this.child;
    if (!child) return;
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
    this.died(child);
  }

  send(message) {
    if (!this.child) return false;
    try {
      this.child.stdin.write(JSON.stringify(message) + "\n");
      return true;
    } catch {
      this.died(this.child);
      return false;
    }
  }

  request(method, params, { timeoutMs, signal } = {}) {
    if (!this.child) return Promise.reject(new Error(BRIDGE_STOPPED));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        // A bridge that does not answer in time is hung: drop it rather than wait forever.
        this.pending.delete(id);
        reject(new Error(BRIDGE_STOPPED));
        this.kill();
      }, timeoutMs || TOOL_TIMEOUT_MS);
      timer.unref();
      this.pending.set(id, { resolve, reject, timer });
      this.setRef(true);
      if (signal) {
        if (signal.aborted) this.send({ method: "cancel", params: { id } });
        else signal.addEventListener("abort", () => this.send({ method: "cancel", params: { id } }), { once: true });
      }
      if (!this.send({ id, method, params })) reject(new Error(BRIDGE_STOPPED));
    });
  }

  receive(chunk) {
    this.buffer += chunk;
    let newline;
    while ((newline = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + 1);
      let message;
      try {
        message = JSON.parse(line);
      } catch {
        continue;
      }
      this.dispatch(message);
    }
  }

  dispatch(message) {
    if (message.event === "warning") {
      this.report(message.message, "warning");
    } else if (message.ui !== undefined) {
      this.answerUi(message);
    } else if (message.id !== undefined && this.pending.has(message.id)) {
      const { resolve, reject, timer } = this.pending.get(message.id);
      this.pending.delete(message.id);
      clearTimeout(timer);
      if (message.error) reject(new Error(message.error.message));
      else resolve(message.result);
    }
    if (this.pending.size === 0) this.setRef(false);
  }

  async answerUi(message) {
    const ui = this.ui;
    const params = message.params || {};
    if (message.method === "notify") {
      if (ui) ui.notify(params.message, params.level || "info");
      return;
    }
    let value = null;
    try {
      if (ui && message.method === "select") value = await ui.select(params.title, params.options);
      else if (ui && message.method === "input") value = await ui.input(params.title, params.placeholder);
      else if (ui && message.method === "confirm") value = await ui.confirm(params.title, params.message);
    } catch {
      value = null;
    }
    this.send({ method: "ui_result", params: { id: message.ui, value: value ?? null } });
  }

  async stop() {
    if (!this.child) return;
    this.stopping = true;
    const child = this.child;
    try {
      await this.request("shutdown", {}, { timeoutMs: SHUTDOWN_TIMEOUT_MS });
    } catch {
      // a bridge that cannot say goodbye is ended below
    }
    try {
      child.stdin.end();
    } catch {
      // already closed
    }
    this.setRef(false);
    if (this.child === child) this.child = null;
  }
}

// Where the host says it loaded this file from: sourceInfo of one of our commands or tools (bound
// by session_start), picked by its resolved path so another extension's cannot be mistaken for ours.
function loadedFrom(pi, definitions) {
  let self;
  try {
    self = realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return null;
  }
  const ours = (info) => {
    try {
      return !!info && typeof info.path === "string" && realpathSync(info.path) === self;
    } catch {
      return false;
    }
  };
  const pick = (info) => {
    const fact = {};
    for (const key of ["path", "baseDir", "source", "scope", "origin"]) if (typeof info[key] === "string") fact[key] = info[key];
    return fact;
  };
  const mine = new Set((definitions.commands || []).map((c) => c.name));
  try {
    for (const c of pi.getCommands()) if (mine.has(c.name) && ours(c.sourceInfo)) return pick(c.sourceInfo);
  } catch {
    // an older host: no commands list
  }
  try {
    for (const t of pi.getAllTools()) if (t.name === "qmem_store" && ours(t.sourceInfo)) return pick(t.sourceInfo);
  } catch {
    // nor a tools list
  }
  return null;
}

function header(ctx) {
  try {
    return ctx.sessionManager.getHeader() || null;
  } catch {
    return null;
  }
}

export default function qmem(pi) {
  const definitions = loadDefinitions();
  const tools = definitions.tools || [];
  let lastCtx = null;
  // Between session_start and the session's first prompt or command, warnings wait here.
  let starting = false;
  const held = [];
  const report = (message, level) => {
    if (starting && lastCtx && lastCtx.hasUI) held.push([message, level]);
    else if (lastCtx && lastCtx.hasUI) lastCtx.ui.notify(message, level);
    else process.stderr.write(message + "\n");
  };
  const bridge = new Bridge(report);
  const ensure = (ctx) => {
    if (ctx) lastCtx = ctx;
    if (starting) {
      starting = false;
      for (const [message, level] of held.splice(0)) report(message, level);
    }
    if (!bridge.alive && !bridge.down) bridge.start();
  };

  // Tools that need recall (memory_search) are offered only where the bridge says recall is on.
  const registered = new Set();
  const registerTool = (tool) => {
    pi.registerTool({
      name: tool.name,
      label: tool.label,
      description: tool.description,
      promptSnippet: tool.promptSnippet,
      promptGuidelines: tool.promptGuidelines,
      parameters: tool.parameters,
      async execute(_toolCallId, params, signal, _onUpdate, ctx) {
        ensure(ctx);
        return await bridge.request("tool", { name: tool.name, args: params || {} }, { timeoutMs: TOOL_TIMEOUT_MS, signal });
      },
    });
    registered.add(tool.name);
  };
  // A bridge that died or hung is down for the session (it is not restarted before the next one), so
  // no qmem tool is offered: each call would only say that memory is off. A bridge that is alive but
  // answered session_start with an error keeps the tools: their answers say what is wrong.
  const offerTools = (answer) => {
    for (const tool of tools) {
      const on = !bridge.down && (!tool.needsRecall || !!(answer && answer.recall === true));
      try {
        if (on && !registered.has(tool.name)) {
          registerTool(tool); // active at once: pi activates a newly registered tool
        } else if (registered.has(tool.name)) {
          const active = pi.getActiveTools();
          if (on && !active.includes(tool.name)) pi.setActiveTools([...active, tool.name]);
          if (!on && active.includes(tool.name)) pi.setActiveTools(active.filter((name) => name !== tool.name));
        }
      } catch {
        // a host without late registration keeps the tools it has
      }
    }
  };
  // The session_start answer, awaited by the first prompt's hook (never rejects).
  let sessionReady = Promise.resolve(null);

  pi.on("session_start", async (_event, ctx) => {
    lastCtx = ctx;
    starting = true;
    bridge.warnedDead = false;
    bridge.down = false;
    bridge.start();
    const h = header(ctx);
    // Not awaited: the background flush must never delay the session's start.
    sessionReady = bridge
      .request("session_start", {
        cwd: ctx.cwd,
        extensionDir: HERE,
        loaded: loadedFrom(pi, definitions),
        hostProcess: typeof process.title === "string" ? process.title : null,
        header: h ? { rlmDepth: h.rlmDepth ?? null, hasRlmDepth: Object.prototype.hasOwnProperty.call(h, "rlmDepth") } : null,
      }, { timeoutMs: HOOK_TIMEOUT_MS })
      .catch(() => null)
      .then((answer) => {
        offerTools(answer); // by now died() has said whether the bridge is down
        return answer;
      });
  });

  pi.on("resources_discover", async () => ({ skillPaths: [join(HERE, "skills")] }));

  pi.on("before_agent_start", async (event, ctx) => {
    ensure(ctx);
    await sessionReady; // so that memory_search is offered from the first prompt when recall is on
    let activeTools = null;
    try {
      activeTools = pi.getActiveTools();
    } catch {
      activeTools = null;
    }
    // The prompt goes along: the bridge starts its recall now, before the first LLM request asks for it.
    const h = header(ctx);
    const depthGiven = !!h && Object.prototype.hasOwnProperty.call(h, "rlmDepth");
    const prompt = typeof event.prompt === "string" ? event.prompt : null;
    try {
      const result = await bridge.request("before_agent_start",
        { activeTools, prompt, rlmDepth: depthGiven ? h.rlmDepth : null, depthGiven }, { timeoutMs: HOOK_TIMEOUT_MS });
      if (result && result.append) return { systemPrompt: event.systemPrompt + "\n\n" + result.append };
    } catch {
      // no rules block this time; the agent goes on
    }
    return undefined;
  });

  pi.on("context", async (event, ctx) => {
    ensure(ctx);
    const h = header(ctx);
    const depthGiven = !!h && Object.prototype.hasOwnProperty.call(h, "rlmDepth");
    try {
      const patch = await bridge.request(
        "context",
        { messages: event.messages, rlmDepth: depthGiven ? h.rlmDepth : null, depthGiven },
        { timeoutMs: HOOK_TIMEOUT_MS, signal: ctx.signal },
      );
      if (!patch || ((!patch.drop || patch.drop.length === 0) && !patch.append)) return undefined;
      const drop = new Set(patch.drop || []);
      const messages = event.messages.filter((_, index) => !drop.has(index));
      if (patch.append) messages.push(patch.append);
      return { messages };
    } catch {
      return undefined; // fail open: this LLM call goes without recalled memory
    }
  });

  pi.on("session_shutdown", async () => {
    await bridge.stop();
  });

  for (const tool of tools) {
    if (!tool.needsRecall) registerTool(tool);
  }

  for (const command of definitions.commands || []) {
    pi.registerCommand(command.name, {
      description: command.description,
      handler: async (args, ctx) => {
        ensure(ctx);
        bridge.ui = ctx.hasUI ? ctx.ui : null;
        let text;
        let level = "info";
        try {
          const result = await bridge.request("command", { name: command.name, args: args || "", hasUI: !!ctx.hasUI },
            { timeoutMs: COMMAND_TIMEOUT_MS });
          text = result && result.text;
        } catch (error) {
          text = error.message;
          level = "error";
        } finally {
          bridge.ui = null;
        }
        if (!text) return;
        // Without a UI (print mode) pi routes an extension's stdout to stderr, keeping its own output clean.
        if (ctx.hasUI) ctx.ui.notify(text, level);
        else process.stdout.write(text + "\n");
      },
    });
  }
}

/**
 * The MCP contract of TOOLS.md, black-box, through the official SDK `Client` (which validates
 * every `structuredContent` — error results included — against the tool's declared
 * `outputSchema`; a mismatch makes `callTool` throw). A case table keyed by tool name drives
 * EVERY tool that tools/list names: a tool without cases fails the test. Also: strict input
 * (unknown keys, non-object arguments), the stdio shim's answers to malformed JSON-RPC lines, and
 * `POST /mcp` with an empty batch.
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { CallToolResultSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import {
  homeWithConfig,
  operatorFetch,
  type RunningDaemon,
  startDaemon,
  stdioClient,
  tempHome,
  termada,
  termadaEnv,
} from "./_daemon.ts";
import { clientHome, TestSshd } from "../src/remote/_test_sshd.ts";
import {
  callTool,
  denoDir,
  fails,
  initializeRequest,
  ok,
  pollUntil,
  RawLines,
  SHIM_ARGS,
  type Structured,
  type ToolError,
} from "./_clients.ts";

const WEB_TOKEN = `conformance-web-${crypto.randomUUID()}`;

/**
 * The shared daemon: a policy with a deny and a confirm rule, forwards and file rules, one
 * token agent for HTTP, and one server (a real sshd on 127.0.0.1) named "box".
 */
/** An adapter run id no run has. */
const FAKE_RUN = "run_aaaaaaaaaaaa";

const config = (sshPort: number) =>
  `agents:
  web:
    token: "\${CONFORMANCE_WEB_TOKEN}"
policies:
  default:
    deny: ["rm -rf *"]
    confirm: ["touch *"]
    forwards:
      allow: ["box:127.0.0.1:*"]
    files:
      read:
        allow: ["/**"]
      write:
        allow: ["/tmp/**"]
    vault:
      allow: ["local:conf-*"]
    adapters:
      allow: ["file.patch:/tmp/**"]
adapters:
  file_patch:
    roots: ["/tmp"]
approvals:
  confirm_timeout_ms: 60000
servers:
  - name: box
    host: 127.0.0.1
    port: ${sshPort}
    user: ${Deno.env.get("USER") ?? "root"}
    tags: [conformance]
`;

/** Well-formed ids that name nothing. */
const FAKE = {
  job: "job_000000000000",
  session: "ses_000000000000",
  mission: "msn_000000000000",
  forward: "fwd_000000000000",
} as const;

const UNKNOWN_KEY = "zz_unknown_key";

type Cleanup = () => unknown | Promise<unknown>;

/** What a case gets: the main agent's client and fixtures it may ask for (cleaned up after it). */
interface Fx {
  /** The main agent ("conformance") on the shared daemon. */
  c: Client;
  /** The sshd behind server "box". */
  sshd: TestSshd;
  d: RunningDaemon;
  /** A temp directory for files the commands touch. */
  work: string;
  defer(fn: Cleanup): void;
  /** A fresh session of `c`, closed after the case. */
  session(): Promise<string>;
  /** `sleep 30` running in a fresh session of `c`. */
  sleeper(): Promise<{ session_id: string; job_id: string }>;
  /** A fresh mission of `c` (cancelled after the case). */
  mission(plan?: string[]): Promise<Structured & { mission_id: string; session_id: string }>;
  /** A fresh agent on a daemon with `sessions.max_per_agent: 1`, already holding its session. */
  quota(): Promise<Client>;
  /** A fresh agent on a daemon whose operator has just stopped everything (POST /api/stop). */
  stopped(): Promise<{ c: Client; resume(): Promise<void> }>;
}

interface Case {
  name: string;
  /** "ok" for a success, else the error code the case asserts. */
  expect: "ok" | string;
  run(fx: Fx): Promise<void>;
}

interface ToolSpec {
  /** Smallest valid input (ids may name nothing); the unknown-key case adds a key to it. */
  minimal: Structured;
  cases: Case[];
}

const okCase = (name: string, run: Case["run"]): Case => ({ name, expect: "ok", run });
const errCase = (code: string, name: string, run: Case["run"]): Case => ({
  name,
  expect: code,
  run,
});
/** An error case that needs no setup: `tool(args)` fails with `code`. */
const errArgs = (tool: string, code: string, name: string, args: Structured): Case =>
  errCase(code, name, async ({ c }) => {
    await fails(c, tool, args, code);
  });

const str = (v: unknown, what: string): string => {
  assert.equal(typeof v, "string", `${what} is a string: ${JSON.stringify(v)}`);
  return v as string;
};

async function waitExit(c: Client, jobId: string): Promise<Structured> {
  const w = await ok(c, "exec_wait", { job_id: jobId, until: { exit: true }, timeout_ms: 10_000 });
  assert.equal(w.matched, "exit", `job ${jobId} ended: ${JSON.stringify(w)}`);
  return w;
}

async function waitPrompt(c: Client, jobId: string): Promise<Structured> {
  const w = await ok(c, "exec_wait", {
    job_id: jobId,
    until: { prompt: true },
    timeout_ms: 10_000,
  });
  assert.equal(w.matched, "prompt", `job ${jobId} waits at a prompt: ${JSON.stringify(w)}`);
  assert.equal(w.awaiting_input, true);
  return w;
}

// ── the case table ──────────────────────────────────────────────────────────

const execLaunchCases = (tool: "exec_run" | "exec_start"): Case[] => [
  errArgs(tool, "INVALID_ARGUMENT", "empty command", { command: [] }),
  errCase("INVALID_ARGUMENT", 'misspelled key "sesion" is named in the message', async ({ c }) => {
    const e = await fails(c, tool, { command: ["true"], sesion: "x" }, "INVALID_ARGUMENT");
    assert.ok(e.message.includes('"sesion"'), `message names "sesion": ${e.message}`);
  }),
  errArgs(tool, "NOT_FOUND", "unknown session", { command: ["true"], session: FAKE.session }),
  errArgs(tool, "NOT_FOUND", "unknown session_id", {
    command: ["true"],
    session_id: FAKE.session,
  }),
  okCase("session_id (and its alias session) names the session the command runs in", async (fx) => {
    const s = await fx.session();
    const a = await ok(fx.c, tool, { command: ["echo", "via-session-id"], session_id: s });
    assert.equal(a.session_id, s, "result session_id equals the session_id given");
    if (tool === "exec_start") await waitExit(fx.c, str(a.job_id, "job_id"));
    const b = await ok(fx.c, tool, { command: ["echo", "via-session"], session: s });
    assert.equal(b.session_id, s, "result session_id equals the session given");
  }),
  errCase("SESSION_BUSY", "a session whose job still runs; details.job_id names it", async (fx) => {
    const { session_id, job_id } = await fx.sleeper();
    const e = await fails(
      fx.c,
      tool,
      { command: ["echo", "x"], session: session_id },
      "SESSION_BUSY",
    );
    assert.equal(e.details?.job_id, job_id, `details.job_id: ${JSON.stringify(e)}`);
  }),
  errCase("DENIED_BY_POLICY", 'a command matching deny rule "rm -rf *"', async (fx) => {
    const s = await fx.session();
    const target = `${fx.work}/keep-${tool}`;
    await Deno.mkdir(target);
    await fails(fx.c, tool, { command: [`rm -rf ${target}`], session: s }, "DENIED_BY_POLICY");
    assert.ok(Deno.statSync(target).isDirectory, "the denied command did not run");
  }),
  okCase(
    "a confirm rule parks the command: status pending_approval with approval_id",
    async (fx) => {
      const s = await fx.session();
      const file = `${fx.work}/parked-${tool}`;
      const r = await ok(fx.c, tool, { command: [`touch ${file}`], session: s });
      assert.equal(r.status, "pending_approval", JSON.stringify(r));
      const approval = str(r.approval_id, "approval_id");
      assert.match(approval, /^apr_/);
      fx.defer(async () => {
        const res = await operatorFetch(fx.d)(`/approvals/${approval}/deny`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ reason: "conformance test cleanup" }),
        });
        await res.body?.cancel();
      });
      assert.throws(() => Deno.statSync(file), Deno.errors.NotFound, "nothing ran yet");
    },
  ),
  errCase(
    "STOPPED",
    "after the operator's POST /api/stop; POST /api/resume lifts it",
    async (fx) => {
      const { c, resume } = await fx.stopped();
      await fails(c, tool, { command: ["echo", "x"] }, "STOPPED");
      await resume();
      const r = await ok(c, tool, { command: ["echo", "back"] });
      assert.ok(["running", "exited"].includes(String(r.status)), JSON.stringify(r));
    },
  ),
  errCase("QUOTA_EXCEEDED", "a default session beyond sessions.max_per_agent", async (fx) => {
    const q = await fx.quota();
    await fails(q, tool, { command: ["true"] }, "QUOTA_EXCEEDED");
  }),
];

const TOOL_CASES: Record<string, ToolSpec> = {
  exec_run: {
    minimal: { command: ["true"] },
    cases: [
      okCase('["echo","hi"] exits 0 with output "hi\\n"', async ({ c }) => {
        const r = await ok(c, "exec_run", { command: ["echo", "hi"] });
        assert.equal(r.status, "exited");
        assert.equal(r.exit_code, 0);
        assert.equal(r.output, "hi\n");
        assert.match(str(r.job_id, "job_id"), /^job_/);
        assert.match(str(r.session_id, "session_id"), /^ses_/);
        str(r.next_cursor, "next_cursor");
        assert.equal(r.has_more, false);
        assert.equal(typeof r.duration_ms, "number");
      }),
      ...execLaunchCases("exec_run"),
    ],
  },

  exec_start: {
    minimal: { command: ["true"] },
    cases: [
      okCase("starts without waiting; exec_wait sees it exit 0 with its output", async (fx) => {
        const s = await fx.session();
        const r = await ok(fx.c, "exec_start", { command: ["echo", "hi"], session: s });
        assert.match(str(r.job_id, "job_id"), /^job_/);
        assert.equal(r.session_id, s);
        assert.ok(["running", "exited"].includes(String(r.status)), JSON.stringify(r));
        const w = await waitExit(fx.c, r.job_id as string);
        assert.equal(w.status, "exited");
        assert.equal(w.exit_code, 0);
        assert.equal(w.output, "hi\n");
      }),
      ...execLaunchCases("exec_start"),
    ],
  },

  exec_poll: {
    minimal: { job_id: FAKE.job },
    cases: [
      okCase("pages output with max_bytes and next_cursor", async ({ c }) => {
        const r = await ok(c, "exec_run", { command: ["echo", "paged"] });
        const all = await ok(c, "exec_poll", { job_id: r.job_id });
        assert.equal(all.output, "paged\n");
        assert.equal(all.status, "exited");
        assert.equal(all.has_more, false);
        const head = await ok(c, "exec_poll", { job_id: r.job_id, max_bytes: 2 });
        assert.equal(head.output, "pa");
        assert.equal(head.has_more, true);
        const rest = await ok(c, "exec_poll", { job_id: r.job_id, cursor: head.next_cursor });
        assert.equal(rest.output, "ged\n");
        assert.equal(rest.has_more, false);
        const none = await ok(c, "exec_poll", { job_id: r.job_id, cursor: rest.next_cursor });
        assert.equal(none.output, "");
        assert.equal(none.has_more, false);
      }),
      errCase("INVALID_ARGUMENT", "a malformed cursor", async ({ c }) => {
        const r = await ok(c, "exec_run", { command: ["echo", "x"] });
        await fails(
          c,
          "exec_poll",
          { job_id: r.job_id, cursor: "not-a-cursor!" },
          "INVALID_ARGUMENT",
        );
      }),
      errArgs("exec_poll", "INVALID_ARGUMENT", "wait_ms over 30000", {
        job_id: FAKE.job,
        wait_ms: 30_001,
      }),
      errArgs("exec_poll", "NOT_FOUND", "unknown job", { job_id: FAKE.job }),
    ],
  },

  exec_wait: {
    minimal: { job_id: FAKE.job },
    cases: [
      okCase("until exit", async (fx) => {
        const s = await fx.session();
        const r = await ok(fx.c, "exec_start", { command: ["echo", "waited"], session: s });
        const w = await waitExit(fx.c, r.job_id as string);
        assert.equal(w.status, "exited");
        assert.equal(w.output, "waited\n");
        str(w.next_cursor, "next_cursor");
      }),
      okCase("until pattern, then continue from next_cursor", async (fx) => {
        const s = await fx.session();
        const r = await ok(fx.c, "exec_start", {
          command: ["echo ready-42; sleep 30"],
          session: s,
        });
        const w = await ok(fx.c, "exec_wait", {
          job_id: r.job_id,
          until: { pattern: "ready-\\d+" },
          timeout_ms: 10_000,
        });
        assert.equal(w.matched, "pattern", JSON.stringify(w));
        assert.equal(w.match, "ready-42");
        assert.equal(w.status, "running");
        const p = await ok(fx.c, "exec_poll", { job_id: r.job_id, cursor: w.next_cursor });
        assert.equal(p.output, "", "nothing new after the cursor");
      }),
      okCase("a deadline returns matched timeout and never kills", async (fx) => {
        const { job_id } = await fx.sleeper();
        const w = await ok(fx.c, "exec_wait", {
          job_id,
          until: { exit: true },
          timeout_ms: 200,
        });
        assert.equal(w.matched, "timeout");
        assert.equal(w.status, "running");
      }),
      errCase("INVALID_ARGUMENT", "a malformed cursor", async (fx) => {
        const { job_id } = await fx.sleeper();
        await fails(
          fx.c,
          "exec_wait",
          { job_id, cursor: "not-a-cursor!", timeout_ms: 500 },
          "INVALID_ARGUMENT",
        );
      }),
      errCase("INVALID_ARGUMENT", 'an invalid regex "("', async (fx) => {
        const { job_id } = await fx.sleeper();
        await fails(
          fx.c,
          "exec_wait",
          { job_id, until: { pattern: "(" }, timeout_ms: 500 },
          "INVALID_ARGUMENT",
        );
      }),
      errCase(
        "INVALID_ARGUMENT",
        'a backreference "(a)\\1" (patterns run in linear time)',
        async (fx) => {
          const { job_id } = await fx.sleeper();
          await fails(
            fx.c,
            "exec_wait",
            { job_id, until: { pattern: "(a)\\1" }, timeout_ms: 500 },
            "INVALID_ARGUMENT",
          );
        },
      ),
      errArgs("exec_wait", "NOT_FOUND", "unknown job", { job_id: FAKE.job, timeout_ms: 100 }),
    ],
  },

  exec_write: {
    minimal: { job_id: FAKE.job, input: "x" },
    cases: [
      okCase('answers a read -p "Name: " prompt', async (fx) => {
        const s = await fx.session();
        const r = await ok(fx.c, "exec_start", {
          command: ['read -p "Name: " n; echo "hello $n"'],
          session: s,
        });
        const w = await waitPrompt(fx.c, r.job_id as string);
        assert.match(String(w.prompt), /Name: ?$/, `prompt: ${JSON.stringify(w.prompt)}`);
        const wr = await ok(fx.c, "exec_write", { job_id: r.job_id, input: "ada" });
        assert.equal(wr.ok, true);
        str(wr.status, "status");
        const done = await waitExit(fx.c, r.job_id as string);
        assert.equal(done.exit_code, 0);
        assert.match(String(done.output), /hello ada\n$/);
      }),
      errCase("NOT_AWAITING_INPUT", "a job that has ended", async (fx) => {
        const { job_id } = await fx.sleeper();
        await ok(fx.c, "exec_kill", { job_id, grace_ms: 200 });
        await fails(fx.c, "exec_write", { job_id, input: "x" }, "NOT_AWAITING_INPUT");
      }),
      errCase("NOT_AWAITING_INPUT", "a vault value to a running job", async (fx) => {
        const { job_id } = await fx.sleeper();
        await fails(fx.c, "exec_write", { job_id, vault: "conf-any" }, "NOT_AWAITING_INPUT");
      }),
      errArgs("exec_write", "NOT_FOUND", "unknown job", { job_id: FAKE.job, input: "x" }),
      errArgs("exec_write", "INVALID_ARGUMENT", "missing input", { job_id: FAKE.job }),
      errCase(
        "DENIED_BY_POLICY",
        "a denied command typed into an interactive bash the agent started",
        async (fx) => {
          const s = await fx.session();
          const target = `${fx.work}/keep-typed`;
          await Deno.mkdir(target);
          const r = await ok(fx.c, "exec_start", { command: ["bash"], session: s });
          await waitPrompt(fx.c, r.job_id as string);
          await fails(
            fx.c,
            "exec_write",
            { job_id: r.job_id, input: `rm -rf ${target}` },
            "DENIED_BY_POLICY",
          );
          assert.ok(Deno.statSync(target).isDirectory, "the denied line did not run");
        },
      ),
    ],
  },

  exec_signal: {
    minimal: { job_id: FAKE.job, signal: "INT" },
    cases: [
      okCase("INT stops a running sleep", async (fx) => {
        const { job_id } = await fx.sleeper();
        const r = await ok(fx.c, "exec_signal", { job_id, signal: "INT" });
        assert.equal(r.ok, true);
        const w = await waitExit(fx.c, job_id);
        assert.notEqual(w.status, "running");
      }),
      errArgs("exec_signal", "INVALID_ARGUMENT", 'unknown signal "FOO"', {
        job_id: FAKE.job,
        signal: "FOO",
      }),
      errArgs("exec_signal", "NOT_FOUND", "unknown job", { job_id: FAKE.job, signal: "INT" }),
    ],
  },

  exec_kill: {
    minimal: { job_id: FAKE.job },
    cases: [
      okCase("kills a running job: final status killed", async (fx) => {
        const { job_id } = await fx.sleeper();
        const r = await ok(fx.c, "exec_kill", { job_id, grace_ms: 200 });
        assert.equal(r.status, "killed", JSON.stringify(r));
        assert.equal(r.job_id, job_id);
      }),
      errArgs("exec_kill", "INVALID_ARGUMENT", "negative grace_ms", {
        job_id: FAKE.job,
        grace_ms: -1,
      }),
      errArgs("exec_kill", "NOT_FOUND", "unknown job", { job_id: FAKE.job }),
    ],
  },

  exec_list: {
    minimal: {},
    cases: [
      okCase("lists the caller's jobs newest first", async ({ c }) => {
        const r = await ok(c, "exec_run", { command: ["echo", "listed"] });
        const l = await ok(c, "exec_list", { filter: "all" });
        const jobs = l.jobs as { job_id: string; status: string }[];
        assert.ok(Array.isArray(jobs));
        assert.equal(jobs[0]?.job_id, r.job_id, "the newest job first");
        assert.equal(jobs[0]?.status, "exited");
      }),
      okCase("filter active shows a running job", async (fx) => {
        const { job_id } = await fx.sleeper();
        const l = await ok(fx.c, "exec_list", { filter: "active" });
        const jobs = l.jobs as { job_id: string; status: string }[];
        assert.equal(jobs.find((j) => j.job_id === job_id)?.status, "running");
      }),
      errArgs("exec_list", "INVALID_ARGUMENT", 'filter "bogus"', { filter: "bogus" }),
      errArgs("exec_list", "INVALID_ARGUMENT", "limit over 200", { limit: 201 }),
    ],
  },

  session_create: {
    minimal: {},
    cases: [
      okCase("creates a local bash session in cwd", async (fx) => {
        const r = await ok(fx.c, "session_create", { cwd: fx.work });
        const id = str(r.session_id, "session_id");
        fx.defer(() => fx.c.callTool({ name: "session_close", arguments: { session_id: id } }));
        assert.match(id, /^ses_/);
        assert.equal(r.target, "local");
        assert.equal(r.shell, "bash");
        assert.equal(r.cwd, fx.work);
        const pwd = await ok(fx.c, "exec_run", { command: ["pwd"], session: id });
        assert.equal(pwd.output, `${fx.work}\n`);
      }),
      errCase("INVALID_ARGUMENT", "a cwd that is a regular file", async (fx) => {
        const file = `${fx.work}/not-a-dir`;
        await Deno.writeTextFile(file, "x");
        await fails(fx.c, "session_create", { cwd: file }, "INVALID_ARGUMENT");
      }),
      errArgs("session_create", "INVALID_ARGUMENT", 'shell "fish"', { shell: "fish" }),
      errArgs("session_create", "NOT_FOUND", 'target "prod" (no such server)', { target: "prod" }),
      okCase('opens a session on server "box"', async (fx) => {
        const r = await ok(fx.c, "session_create", { target: "box" });
        const id = str(r.session_id, "session_id");
        fx.defer(() => fx.c.callTool({ name: "session_close", arguments: { session_id: id } }));
        assert.equal(r.target, "box");
        const e = await ok(fx.c, "exec_run", { command: ["sh", "-c", "exit 4"], session: id });
        assert.equal(e.exit_code, 4);
      }),
      errCase("QUOTA_EXCEEDED", "beyond sessions.max_per_agent", async (fx) => {
        const q = await fx.quota();
        await fails(q, "session_create", {}, "QUOTA_EXCEEDED");
      }),
    ],
  },

  session_list: {
    minimal: {},
    cases: [
      okCase("lists a ready session and a busy one with its current job", async (fx) => {
        const ready = await fx.session();
        const busy = await fx.sleeper();
        const l = await ok(fx.c, "session_list", {});
        const sessions = l.sessions as {
          session_id: string;
          state: string;
          cwd: string;
          current_job_id?: string;
        }[];
        const r = sessions.find((s) => s.session_id === ready);
        assert.equal(r?.state, "ready", JSON.stringify(r));
        str(r?.cwd, "cwd");
        const b = sessions.find((s) => s.session_id === busy.session_id);
        assert.equal(b?.state, "busy", JSON.stringify(b));
        assert.equal(b?.current_job_id, busy.job_id);
      }),
    ],
  },

  session_close: {
    minimal: { session_id: FAKE.session },
    cases: [
      okCase("closes a session: gone from the list, its running job ends killed", async (fx) => {
        const { session_id, job_id } = await fx.sleeper();
        const r = await ok(fx.c, "session_close", { session_id });
        assert.equal(r.ok, true);
        const l = await ok(fx.c, "session_list", {});
        assert.ok(
          !(l.sessions as { session_id: string }[]).some((s) => s.session_id === session_id),
        );
        const p = await pollUntil(async () => {
          const p = await ok(fx.c, "exec_poll", { job_id });
          return p.status === "running" ? undefined : p;
        }, "the job of the closed session to end");
        assert.equal(p.status, "killed");
        await fails(fx.c, "session_close", { session_id }, "NOT_FOUND");
      }),
      errArgs("session_close", "NOT_FOUND", "unknown session", { session_id: FAKE.session }),
      errArgs("session_close", "INVALID_ARGUMENT", "a malformed id", { session_id: "no spaces" }),
    ],
  },

  session_screen: {
    minimal: { session_id: FAKE.session },
    cases: [
      okCase("renders the screen of a session", async (fx) => {
        const s = await fx.session();
        await ok(fx.c, "exec_run", { command: ["echo screen-marker-7"], session: s });
        const r = await ok(fx.c, "session_screen", { session_id: s });
        const lines = r.lines as string[];
        assert.ok(lines.some((l) => l.includes("screen-marker-7")), lines.join("\n"));
        assert.equal(typeof r.cols, "number");
        assert.equal(typeof r.rows, "number");
        const cursor = r.cursor as { x: number; y: number };
        assert.equal(typeof cursor.x, "number");
        assert.equal(typeof cursor.y, "number");
      }),
      errArgs("session_screen", "NOT_FOUND", "unknown session", { session_id: FAKE.session }),
      errArgs("session_screen", "INVALID_ARGUMENT", "missing session_id", {}),
    ],
  },

  capabilities: {
    minimal: {},
    cases: [
      okCase("names the agent and every listed tool", async ({ c }) => {
        const r = await ok(c, "capabilities", {});
        assert.equal(r.agent, "conformance");
        str(r.version, "version");
        const listed = (await c.listTools()).tools.map((t: { name: string }) => t.name).sort();
        assert.deepEqual([...(r.tools as string[])].sort(), listed);
      }),
    ],
  },

  mission_create: {
    minimal: { goal: "g", plan: ["p"] },
    cases: [
      okCase("creates a planned mission with its own session", async (fx) => {
        const m = await fx.mission(["Probe", "Fix"]);
        assert.equal(m.status, "planned");
        assert.deepEqual((m.steps as { step_id: string }[]).map((s) => s.step_id), ["s1", "s2"]);
      }),
      errArgs("mission_create", "INVALID_ARGUMENT", "an empty plan", { goal: "g", plan: [] }),
      errArgs("mission_create", "INVALID_ARGUMENT", "missing goal", { plan: ["p"] }),
      errArgs("mission_create", "NOT_SUPPORTED", 'target "prod"', {
        goal: "g",
        plan: ["p"],
        target: "prod",
      }),
      errCase("QUOTA_EXCEEDED", "its session would exceed sessions.max_per_agent", async (fx) => {
        const q = await fx.quota();
        await fails(q, "mission_create", { goal: "g", plan: ["p"] }, "QUOTA_EXCEEDED");
      }),
    ],
  },

  mission_get: {
    minimal: { mission_id: FAKE.mission },
    cases: [
      okCase("reads a mission", async (fx) => {
        const m = await fx.mission();
        const g = await ok(fx.c, "mission_get", { mission_id: m.mission_id });
        assert.equal(g.mission_id, m.mission_id);
        assert.equal(g.goal, m.goal);
        assert.equal(g.session_id, m.session_id);
      }),
      errArgs("mission_get", "NOT_FOUND", "unknown mission", { mission_id: FAKE.mission }),
      errArgs("mission_get", "INVALID_ARGUMENT", "a malformed mission id", { mission_id: "bogus" }),
    ],
  },

  mission_list: {
    minimal: {},
    cases: [
      okCase("lists the caller's missions, filtered by status", async (fx) => {
        const m = await fx.mission();
        const all = await ok(fx.c, "mission_list", {});
        const ids = (all.missions as { mission_id: string }[]).map((x) => x.mission_id);
        assert.ok(ids.includes(m.mission_id), ids.join(", "));
        const planned = await ok(fx.c, "mission_list", { status: "planned" });
        const list = planned.missions as { mission_id: string; status: string }[];
        assert.ok(list.some((x) => x.mission_id === m.mission_id));
        assert.ok(list.every((x) => x.status === "planned"));
      }),
      errArgs("mission_list", "INVALID_ARGUMENT", 'status "bogus"', { status: "bogus" }),
      errArgs("mission_list", "INVALID_ARGUMENT", "limit 0", { limit: 0 }),
    ],
  },

  mission_update: {
    minimal: { mission_id: FAKE.mission },
    cases: [
      okCase("a step passes on a job of the mission's session that exited 0", async (fx) => {
        const m = await fx.mission(["Check", "Other"]);
        const r = await ok(fx.c, "exec_run", {
          command: ["true"],
          session: m.session_id,
          mode: "background",
        });
        assert.equal(r.exit_code, 0);
        const u = await ok(fx.c, "mission_update", {
          mission_id: m.mission_id,
          step_id: "s1",
          step_status: "passed",
          job_id: r.job_id,
          note: "checked",
        });
        const s1 = (u.steps as { step_id: string; status: string; verified: boolean }[])[0];
        assert.equal(s1?.status, "passed");
        assert.equal(s1?.verified, true);
      }),
      errArgs("mission_update", "NOT_FOUND", "unknown mission", {
        mission_id: FAKE.mission,
        note: "x",
      }),
      errCase("NOT_FOUND", "an unknown evidence job", async (fx) => {
        const m = await fx.mission();
        await fails(fx.c, "mission_update", {
          mission_id: m.mission_id,
          step_id: "s1",
          step_status: "passed",
          job_id: FAKE.job,
        }, "NOT_FOUND");
      }),
      errCase("INVALID_ARGUMENT", "evidence with a non-zero exit", async (fx) => {
        const m = await fx.mission();
        const r = await ok(fx.c, "exec_run", {
          command: ["sh", "-c", "exit 3"],
          session: m.session_id,
        });
        assert.equal(r.exit_code, 3);
        await fails(fx.c, "mission_update", {
          mission_id: m.mission_id,
          step_id: "s1",
          step_status: "passed",
          job_id: r.job_id,
        }, "INVALID_ARGUMENT");
      }),
      errArgs("mission_update", "INVALID_ARGUMENT", 'step_status "bogus"', {
        mission_id: FAKE.mission,
        step_id: "s1",
        step_status: "bogus",
      }),
    ],
  },

  mission_resume: {
    minimal: { mission_id: FAKE.mission },
    cases: [
      okCase("an interrupted mission continues in a fresh session", async (fx) => {
        const m = await fx.mission();
        await ok(fx.c, "session_close", { session_id: m.session_id });
        await pollUntil(async () => {
          const g = await ok(fx.c, "mission_get", { mission_id: m.mission_id });
          return g.status === "interrupted" ? g : undefined;
        }, "the mission to be interrupted");
        const r = await ok(fx.c, "mission_resume", { mission_id: m.mission_id });
        assert.equal(r.status, "running");
        const fresh = str(r.session_id, "session_id");
        assert.notEqual(fresh, m.session_id);
        assert.equal((r.sessions as unknown[]).length, 2);
        const e = await ok(fx.c, "exec_run", { command: ["echo", "again"], session: fresh });
        assert.equal(e.output, "again\n");
      }),
      errArgs("mission_resume", "NOT_FOUND", "unknown mission", { mission_id: FAKE.mission }),
      errCase("INVALID_ARGUMENT", "a mission that is not interrupted", async (fx) => {
        const m = await fx.mission();
        await fails(fx.c, "mission_resume", { mission_id: m.mission_id }, "INVALID_ARGUMENT");
      }),
    ],
  },

  mission_report: {
    minimal: { mission_id: FAKE.mission },
    cases: [
      okCase("markdown and json reports with their hashes", async (fx) => {
        const m = await fx.mission();
        const md = await ok(fx.c, "mission_report", { mission_id: m.mission_id });
        assert.equal(md.mission_id, m.mission_id);
        assert.equal(md.format, "markdown");
        assert.match(str(md.sha256, "sha256"), /^[0-9a-f]{64}$/);
        assert.ok(str(md.markdown, "markdown").includes(m.mission_id));
        const js = await ok(fx.c, "mission_report", { mission_id: m.mission_id, format: "json" });
        assert.equal(js.format, "json");
        assert.equal((js.evidence as { schema: string }).schema, "termada.mission.evidence/1");
      }),
      errArgs("mission_report", "NOT_FOUND", "unknown mission", { mission_id: FAKE.mission }),
      errArgs("mission_report", "INVALID_ARGUMENT", 'format "pdf"', {
        mission_id: FAKE.mission,
        format: "pdf",
      }),
    ],
  },

  vault_list: {
    minimal: {},
    cases: [
      errCase("VAULT_LOCKED", "no vault yet: the hint names the operator's command", async (fx) => {
        const e = await fails(fx.c, "vault_list", {}, "VAULT_LOCKED");
        assert.match(e.hint ?? "", /termada vault init/);
      }),
      okCase("names and kinds of the entries the policy allows, never values", async (fx) => {
        const env = { DENO_DIR: await denoDir(), CONFORMANCE_WEB_TOKEN: WEB_TOKEN };
        const id = `${fx.work}/vault-key.txt`;
        for (
          const args of [["vault", "init", "--identity", id], ["unlock", "--identity", id]]
        ) {
          const r = await termada(fx.d.home, args, env);
          assert.equal(r.code, 0, r.stderr);
        }
        for (const name of ["conf-token", "other"]) {
          const r = await operatorFetch(fx.d)(`/vault/entries/${name}`, {
            method: "PUT",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ value_b64: btoa(`value-of-${name}`) }),
          });
          assert.equal(r.status, 200, await r.text());
        }
        const r = await ok(fx.c, "vault_list", {});
        assert.deepEqual(r.entries, [{ name: "conf-token", kind: "secret" }]);
      }),
    ],
  },

  server_list: {
    minimal: {},
    cases: [
      okCase("lists the configured server with its tags", async (fx) => {
        const r = await ok(fx.c, "server_list", {});
        const box = (r.servers as { name: string; tags: string[] }[]).find((x) => x.name === "box");
        assert.deepEqual(box?.tags, ["conformance"]);
      }),
    ],
  },

  fleet_run: {
    minimal: { command: ["true"], servers: ["box"] },
    cases: [
      okCase("runs an argv on a server by tag, exact exit code", async (fx) => {
        const r = await ok(fx.c, "fleet_run", {
          command: ["sh", "-c", "echo hi; exit 3"],
          tags: ["conformance"],
        });
        const t = (r.targets as Structured[])[0]!;
        assert.equal(t.server, "box");
        assert.equal(t.status, "exited");
        assert.equal(t.exit_code, 3);
        assert.equal(t.output, "hi\n");
      }),
      errArgs("fleet_run", "INVALID_ARGUMENT", "no servers and no tags", { command: ["true"] }),
      errArgs("fleet_run", "INVALID_ARGUMENT", "an empty argv", { command: [], servers: ["box"] }),
      errArgs("fleet_run", "NOT_FOUND", "an unknown server", {
        command: ["true"],
        servers: ["nope"],
      }),
      errArgs("fleet_run", "DENIED_BY_POLICY", "a denied command", {
        command: ["rm -rf /nonexistent-termada"],
        servers: ["box"],
      }),
    ],
  },

  port_forward: {
    minimal: { server: "box", remote_host: "127.0.0.1", remote_port: 1 },
    cases: [
      okCase("opens a listener on 127.0.0.1 that reaches the server's sshd", async (fx) => {
        const f = await ok(fx.c, "port_forward", {
          server: "box",
          remote_host: "127.0.0.1",
          remote_port: fx.sshd.port,
        });
        const id = str(f.forward_id, "forward_id");
        fx.defer(() =>
          fx.c.callTool({ name: "port_forward_close", arguments: { forward_id: id } })
        );
        assert.equal(f.local_address, "127.0.0.1");
        const conn = await Deno.connect({ hostname: "127.0.0.1", port: f.local_port as number });
        const buf = new Uint8Array(64);
        const n = await conn.read(buf);
        conn.close();
        assert.match(new TextDecoder().decode(buf.subarray(0, n ?? 0)), /^SSH-2\.0-/);
      }),
      errArgs("port_forward", "NOT_FOUND", "an unknown server", {
        server: "nope",
        remote_host: "127.0.0.1",
        remote_port: 80,
      }),
      errArgs("port_forward", "DENIED_BY_POLICY", "a remote host no forwards rule allows", {
        server: "box",
        remote_host: "10.0.0.1",
        remote_port: 80,
      }),
      errCase("INVALID_ARGUMENT", "a local port already in use", async (fx) => {
        const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
        try {
          await fails(fx.c, "port_forward", {
            server: "box",
            remote_host: "127.0.0.1",
            remote_port: fx.sshd.port,
            local_port: (l.addr as Deno.NetAddr).port,
          }, "INVALID_ARGUMENT");
        } finally {
          l.close();
        }
      }),
      errArgs("port_forward", "INVALID_ARGUMENT", "remote_port 0", {
        server: "box",
        remote_host: "127.0.0.1",
        remote_port: 0,
      }),
    ],
  },

  port_forward_list: {
    minimal: {},
    cases: [
      okCase("lists the caller's forwards", async (fx) => {
        const f = await ok(fx.c, "port_forward", {
          server: "box",
          remote_host: "127.0.0.1",
          remote_port: fx.sshd.port,
        });
        fx.defer(() =>
          fx.c.callTool({ name: "port_forward_close", arguments: { forward_id: f.forward_id } })
        );
        const l = await ok(fx.c, "port_forward_list", {});
        assert.ok((l.forwards as Structured[]).some((x) => x.forward_id === f.forward_id));
      }),
    ],
  },

  port_forward_close: {
    minimal: { forward_id: FAKE.forward },
    cases: [
      okCase("closes a forward: its port is free again", async (fx) => {
        const f = await ok(fx.c, "port_forward", {
          server: "box",
          remote_host: "127.0.0.1",
          remote_port: fx.sshd.port,
        });
        const r = await ok(fx.c, "port_forward_close", { forward_id: f.forward_id });
        assert.equal(r.state, "closed");
        const l = Deno.listen({ hostname: "127.0.0.1", port: f.local_port as number });
        l.close();
      }),
      errArgs("port_forward_close", "NOT_FOUND", "an unknown forward", {
        forward_id: FAKE.forward,
      }),
    ],
  },

  file_read: {
    minimal: { path: "/etc/hostname" },
    cases: [
      okCase("reads a whole file with its sha256, relative to the session's cwd", async (fx) => {
        await Deno.writeTextFile(`${fx.work}/r.txt`, "hello\n");
        const s = await ok(fx.c, "session_create", { cwd: fx.work });
        fx.defer(() =>
          fx.c.callTool({ name: "session_close", arguments: { session_id: s.session_id } })
        );
        const r = await ok(fx.c, "file_read", { path: "r.txt", session_id: s.session_id });
        assert.equal(r.content, "hello\n");
        assert.equal(r.encoding, "utf8");
        assert.equal(r.eof, true);
        assert.match(str(r.sha256, "sha256"), /^[0-9a-f]{64}$/);
      }),
      okCase("past its end: no bytes, eof, and the file's own size", async (fx) => {
        await Deno.writeTextFile(`${fx.work}/short.txt`, "hello world");
        const r = await ok(fx.c, "file_read", { path: `${fx.work}/short.txt`, offset: 100 });
        assert.equal(r.bytes, 0);
        assert.equal(r.eof, true);
        assert.equal(r.size, 11);
      }),
      errArgs("file_read", "INVALID_ARGUMENT", "session and session_id that disagree", {
        path: "x",
        session: FAKE.session,
        session_id: "ses_111111111111",
      }),
      errArgs("file_read", "NOT_FOUND", "a missing file", { path: "/nonexistent-termada/x" }),
      errArgs("file_read", "INVALID_ARGUMENT", "a directory", { path: "/tmp" }),
      errArgs("file_read", "NOT_FOUND", "an unknown session", { path: "x", session: FAKE.session }),
      errArgs("file_read", "INVALID_ARGUMENT", "max_bytes over 1 MiB", {
        path: "/etc/hostname",
        max_bytes: 2 << 20,
      }),
    ],
  },

  file_write: {
    minimal: { path: "/tmp/termada-conformance-minimal", content: "x" },
    cases: [
      okCase("writes a file atomically and reports size and sha256", async (fx) => {
        const r = await ok(fx.c, "file_write", { path: `${fx.work}/w.txt`, content: "abc" });
        assert.equal(r.size, 3);
        assert.equal(
          r.sha256,
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        );
        assert.equal(await Deno.readTextFile(`${fx.work}/w.txt`), "abc");
      }),
      errArgs("file_write", "DENIED_BY_POLICY", "a path no write rule allows", {
        path: "/etc/termada-conformance",
        content: "x",
      }),
      errArgs("file_write", "INVALID_ARGUMENT", "both content and base64", {
        path: "/tmp/termada-conformance-x",
        content: "x",
        base64: "eA==",
      }),
      errArgs("file_write", "NOT_FOUND", "a missing parent directory", {
        path: "/tmp/termada-nonexistent-dir/x",
        content: "x",
      }),
    ],
  },

  snapshot_create: {
    minimal: { path: "/nonexistent-termada" },
    cases: [
      okCase("snapshots a directory relative to the session's cwd, and lists it", async (fx) => {
        await Deno.mkdir(`${fx.work}/snap/sub`, { recursive: true });
        await Deno.writeTextFile(`${fx.work}/snap/sub/a.txt`, "hello\n");
        const s = await ok(fx.c, "session_create", { cwd: fx.work });
        fx.defer(() =>
          fx.c.callTool({ name: "session_close", arguments: { session_id: s.session_id } })
        );
        const r = await ok(fx.c, "snapshot_create", {
          path: "snap",
          session_id: s.session_id,
          label: "conformance",
        });
        assert.match(str(r.snapshot_id, "snapshot_id"), /^snap_/);
        assert.equal(r.dir, `${fx.work}/snap`);
        assert.equal(r.files, 1);
        const l = await ok(fx.c, "snapshot_list", { path: `${fx.work}/snap` });
        const ids = (l.snapshots as Structured[]).map((x) => x.snapshot_id);
        assert.ok(ids.includes(r.snapshot_id), JSON.stringify(l));
      }),
      errArgs("snapshot_create", "NOT_FOUND", "a missing directory", {
        path: "/nonexistent-termada/x",
      }),
      errArgs("snapshot_create", "INVALID_ARGUMENT", "a file, not a directory", {
        path: "/etc/hostname",
      }),
      errArgs("snapshot_create", "NOT_FOUND", "an unknown session", { session: FAKE.session }),
      errArgs("snapshot_create", "INVALID_ARGUMENT", "too many excludes", {
        path: "/nonexistent-termada",
        excludes: Array.from({ length: 65 }, (_, i) => `x${i}`),
      }),
    ],
  },

  snapshot_list: {
    minimal: {},
    cases: [
      okCase("lists the caller's snapshots only", async (fx) => {
        const l = await ok(fx.c, "snapshot_list", {});
        for (const s of l.snapshots as Structured[]) {
          assert.equal(s.created_by, "agent:conformance");
        }
      }),
      errArgs("snapshot_list", "INVALID_ARGUMENT", "a path with NUL", { path: "a\u0000b" }),
    ],
  },

  adapter_run: {
    minimal: { adapter: "file.patch", input: { patch: "x" } },
    cases: [
      okCase("file.patch applies a diff under a root and verifies it", async (fx) => {
        const r = await patchRun(fx, "run");
        assert.equal(r.phase, "verified", JSON.stringify(r));
        assert.equal(await Deno.readTextFile(`${fx.work}/adapter-run.txt`), "after\n");
      }),
      errArgs("adapter_run", "NOT_FOUND", "an adapter this daemon does not offer", {
        adapter: "ticket.open",
        input: {},
      }),
      errArgs("adapter_run", "INVALID_ARGUMENT", "input the adapter's schema refuses", {
        adapter: "file.patch",
        input: { patch: 42 },
      }),
      errArgs("adapter_run", "DENIED_BY_POLICY", "a path outside the roots", {
        adapter: "file.patch",
        input: {
          patch: "--- a/etc/hostname\n+++ b/etc/hostname\n@@ -1 +1 @@\n-a\n+b\n",
          root: "/",
        },
      }),
    ],
  },

  adapter_status: {
    minimal: { run_id: FAKE_RUN },
    cases: [
      okCase("one of the caller's runs", async (fx) => {
        const r = await patchRun(fx, "status");
        const s = await ok(fx.c, "adapter_status", { run_id: r.run_id });
        assert.equal(s.run_id, r.run_id);
        assert.equal(s.verified, true);
      }),
      errArgs("adapter_status", "NOT_FOUND", "an unknown run", { run_id: FAKE_RUN }),
      errArgs("adapter_status", "INVALID_ARGUMENT", "not a run id", { run_id: "job_x" }),
    ],
  },

  adapter_list: {
    minimal: {},
    cases: [
      okCase("the caller's runs and the adapters offered", async (fx) => {
        const l = await ok(fx.c, "adapter_list", { limit: 5 });
        assert.deepEqual(l.adapters, ["file.patch"]);
      }),
      errArgs("adapter_list", "INVALID_ARGUMENT", "a limit over the bound", { limit: 100000 }),
    ],
  },

  adapter_undo: {
    minimal: { run_id: FAKE_RUN },
    cases: [
      okCase("a verified patch is undone", async (fx) => {
        const r = await patchRun(fx, "undo");
        const u = await ok(fx.c, "adapter_undo", { run_id: r.run_id });
        assert.equal(u.phase, "compensated", JSON.stringify(u));
        assert.equal(await Deno.readTextFile(`${fx.work}/adapter-undo.txt`), "before\n");
      }),
      errArgs("adapter_undo", "NOT_FOUND", "an unknown run", { run_id: FAKE_RUN }),
    ],
  },
};

/** A file `adapter-<name>.txt` in the work dir, patched from "before" to "after" by file.patch. */
async function patchRun(fx: Fx, name: string): Promise<Structured> {
  const file = `adapter-${name}.txt`;
  await Deno.writeTextFile(`${fx.work}/${file}`, "before\n");
  return await ok(fx.c, "adapter_run", {
    adapter: "file.patch",
    input: {
      patch: `--- a/${file}\n+++ b/${file}\n@@ -1 +1 @@\n-before\n+after\n`,
      root: fx.work,
    },
  });
}

/** Added to every tool: an unknown key next to valid input is INVALID_ARGUMENT naming it. */
const unknownKeyCase = (tool: string, minimal: Structured): Case =>
  errCase(
    "INVALID_ARGUMENT",
    `unknown key "${UNKNOWN_KEY}" is named in the message`,
    async (fx) => {
      const args = { ...minimal, [UNKNOWN_KEY]: 1 };
      const r = await callTool(fx.c, tool, args);
      const sc = r.structuredContent as Structured | undefined;
      // Today's lenient parsing may run it: undo what it made before failing.
      if (r.isError !== true && typeof sc?.session_id === "string" && tool === "session_create") {
        fx.defer(() =>
          fx.c.callTool({ name: "session_close", arguments: { session_id: sc.session_id } })
        );
      }
      if (r.isError !== true && typeof sc?.mission_id === "string") {
        fx.defer(() =>
          fx.c.callTool({
            name: "mission_update",
            arguments: { mission_id: sc.mission_id, status: "cancelled" },
          })
        );
      }
      const e = await fails(fx.c, tool, args, "INVALID_ARGUMENT");
      assert.ok(e.message.includes(`"${UNKNOWN_KEY}"`), `message names the key: ${e.message}`);
    },
  );

// ── fixtures ────────────────────────────────────────────────────────────────

async function agentClient(
  home: string,
  agent: string,
  env: Record<string, string> = {},
): Promise<Client & AsyncDisposable> {
  // The shim reads the config too: it needs the variables the config names.
  const c = await stdioClient(home, ["--agent", agent], env);
  try {
    await c.listTools(); // the SDK validates results only for tools it has listed
  } catch (err) {
    await c.close();
    throw err;
  }
  return c;
}

/** A daemon started on first use and stopped by `close()`. */
function lazyDaemon(config: string) {
  let started: Promise<{ home: string; d: RunningDaemon }> | undefined;
  return {
    get: () =>
      started ??= (async () => {
        const home = await homeWithConfig(config);
        return { home, d: await startDaemon(home) };
      })(),
    async close() {
      if (!started) return;
      const { home, d } = await started;
      await d.stop();
      await Deno.remove(home, { recursive: true });
    },
  };
}

Deno.test("every tool from tools/list: successes and each error code, valid against its outputSchema", async (t) => {
  await using sshd = await TestSshd.start();
  const sshHome = clientHome(sshd, "termada-conf-sshhome-");
  const home = await homeWithConfig(config(sshd.port));
  const work = await Deno.realPath(await Deno.makeTempDir({ prefix: "termada-conf-work-" }));
  const quotaDaemon = lazyDaemon("sessions:\n  max_per_agent: 1\n");
  const stopDaemon = lazyDaemon("");
  let agents = 0;
  try {
    const env = {
      CONFORMANCE_WEB_TOKEN: WEB_TOKEN,
      HOME: sshHome,
      SSH_AUTH_SOCK: "",
      DENO_DIR: await denoDir(),
    };
    await using d = await startDaemon(home, { env });
    await using c = await agentClient(home, "conformance", env);
    const listed = (await c.listTools()).tools.map((tool: { name: string }) =>
      tool.name
    ) as string[];

    await t.step("the case table covers every tool tools/list names, and only those", () => {
      const missing = listed.filter((n) => !(n in TOOL_CASES));
      assert.deepEqual(missing, [], `tools without cases in TOOL_CASES: ${missing.join(", ")}`);
      const stale = Object.keys(TOOL_CASES).filter((n) => !listed.includes(n));
      assert.deepEqual(stale, [], `TOOL_CASES names tools tools/list does not: ${stale}`);
      for (const n of listed) {
        const cases = TOOL_CASES[n]?.cases ?? [];
        assert.ok(cases.some((k) => k.expect === "ok"), `${n} has a success case`);
      }
    });

    for (const tool of listed) {
      const spec = TOOL_CASES[tool];
      if (!spec) continue; // reported by the coverage step
      for (const k of [...spec.cases, unknownKeyCase(tool, spec.minimal)]) {
        await t.step({
          name: `${tool}: ${k.expect === "ok" ? "ok" : k.expect} — ${k.name}`,
          // The test as a whole keeps the sanitizers; a step shares the daemon and clients.
          sanitizeOps: false,
          sanitizeResources: false,
          fn: async () => {
            const cleanups: Cleanup[] = [];
            const defer = (fn: Cleanup) => void cleanups.push(fn);
            const closeSession = (id: string) =>
              c.callTool({ name: "session_close", arguments: { session_id: id } });
            const fx: Fx = {
              c,
              sshd,
              d,
              work,
              defer,
              async session() {
                const r = await ok(c, "session_create", {});
                const id = str(r.session_id, "session_id");
                defer(() => closeSession(id));
                return id;
              },
              async sleeper() {
                const s = await fx.session();
                const r = await ok(c, "exec_start", { command: ["sleep 30"], session: s });
                assert.equal(r.status, "running", JSON.stringify(r));
                return { session_id: s, job_id: str(r.job_id, "job_id") };
              },
              async mission(plan = ["Probe the service", "Fix it"]) {
                const m = await ok(c, "mission_create", {
                  goal: "Conformance mission.\nIt checks the mission tools.",
                  plan,
                });
                const id = str(m.mission_id, "mission_id");
                defer(() =>
                  c.callTool({
                    name: "mission_update",
                    arguments: { mission_id: id, status: "cancelled" },
                  })
                );
                assert.match(id, /^msn_/);
                assert.match(str(m.session_id, "session_id"), /^ses_/);
                return m as Structured & { mission_id: string; session_id: string };
              },
              async quota() {
                const { home: qh } = await quotaDaemon.get();
                const q = await agentClient(qh, `quota-${++agents}`);
                defer(() => q.close());
                await ok(q, "session_create", {});
                return q;
              },
              async stopped() {
                const { home: sh, d: sd } = await stopDaemon.get();
                const s = await agentClient(sh, `stopped-${++agents}`);
                defer(() => s.close());
                const op = operatorFetch(sd);
                const post = async (path: string, body: Structured) => {
                  const res = await op(path, {
                    method: "POST",
                    headers: { "content-type": "application/json" },
                    body: JSON.stringify(body),
                  });
                  const text = await res.text();
                  assert.equal(res.status, 200, `POST /api${path}: ${text}`);
                };
                let resumed = false;
                const resume = async () => {
                  if (resumed) return;
                  resumed = true;
                  await post("/resume", {});
                };
                defer(resume);
                await post("/stop", { barrier_ms: 60_000, grace_ms: 200 });
                return { c: s, resume };
              },
            };
            try {
              await k.run(fx);
            } finally {
              for (const fn of cleanups.reverse()) {
                try {
                  await fn();
                } catch {
                  // cleanup of a case that already failed; the failure is what matters
                }
              }
            }
          },
        });
      }
    }
  } finally {
    await quotaDaemon.close();
    await stopDaemon.close();
    await Deno.remove(home, { recursive: true });
    await Deno.remove(work, { recursive: true });
    await Deno.remove(sshHome, { recursive: true });
  }
});

Deno.test("tools/call with non-object arguments is a JSON-RPC error -32602 for every tool", async () => {
  const home = await tempHome();
  try {
    await using _d = await startDaemon(home);
    await using c = await agentClient(home, "strict");
    const names = (await c.listTools()).tools.map((tool: { name: string }) =>
      tool.name
    ) as string[];
    const problems: string[] = [];
    for (const name of names) {
      for (const bad of [[1], "x"]) {
        const what = `tools/call ${name} arguments ${JSON.stringify(bad)}`;
        try {
          const r = await c.request(
            { method: "tools/call", params: { name, arguments: bad as never } },
            CallToolResultSchema,
          );
          problems.push(`${what}: answered with a result: ${JSON.stringify(r).slice(0, 200)}`);
        } catch (err) {
          if (!(err instanceof McpError)) problems.push(`${what}: ${err}`);
          else if ((err as McpError).code !== -32602) {
            const first = (err as McpError).message.split("\n")[0];
            problems.push(`${what}: code ${(err as McpError).code} (${first}…)`);
          }
        }
      }
    }
    assert.equal(
      problems.length,
      0,
      `${problems.length} of ${names.length * 2} calls were not -32602:\n${
        problems.slice(0, 6).join("\n")
      }`,
    );
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("the stdio shim answers malformed JSON-RPC lines and keeps serving", async (t) => {
  const home = await tempHome();
  try {
    await using _d = await startDaemon(home);

    /** A shim after initialize + notifications/initialized. */
    const shim = async (): Promise<RawLines> => {
      const raw = new RawLines({
        args: [...SHIM_ARGS, "--agent", "raw"],
        env: termadaEnv(home),
      });
      try {
        await raw.send(initializeRequest("raw-lines"));
        const init = await raw.response(1, "initialize", 20_000);
        assert.ok(init.result, `initialize: ${JSON.stringify(init)}`);
        await raw.send({ jsonrpc: "2.0", method: "notifications/initialized" });
      } catch (err) {
        await raw.close();
        throw err;
      }
      return raw;
    };

    /** After a bad line the shim still answers tools/list. */
    const stillServes = async (raw: RawLines, id: number) => {
      await raw.send({ jsonrpc: "2.0", id, method: "tools/list", params: {} });
      const r = await raw.response(id, "tools/list after the bad line");
      const tools = (r.result as { tools?: unknown[] } | undefined)?.tools;
      assert.ok(Array.isArray(tools) && tools.length > 0, `tools/list: ${JSON.stringify(r)}`);
    };

    const errorOf = (m: Record<string, unknown>, what: string) => {
      assert.equal(m.jsonrpc, "2.0", `${what}: ${JSON.stringify(m).slice(0, 300)}`);
      const e = m.error as { code?: number; message?: string } | undefined;
      assert.ok(
        e && typeof e.code === "number",
        `${what} is an error response: ${JSON.stringify(m).slice(0, 300)}`,
      );
      return e as { code: number; message: string };
    };

    for (
      const [name, line, code] of [
        ["a line that is not JSON → -32700 (id null)", "this is { not json", -32700],
        ['JSON that is not JSON-RPC ({"foo":1}) → -32600 (id null)', '{"foo":1}', -32600],
      ] as const
    ) {
      await t.step({
        name,
        sanitizeOps: false,
        sanitizeResources: false,
        fn: async () => {
          await using raw = await shim();
          await raw.writeLine(line);
          const m = await raw.next(`the answer to ${JSON.stringify(line)}`, 5000);
          const e = errorOf(m, name);
          assert.equal(e.code, code, `${name}: ${JSON.stringify(m)}`);
          assert.equal(m.id, null, `${name}: id null`);
          await stillServes(raw, 2);
        },
      });
    }

    await t.step({
      name: "a line over 4 MiB → an error saying the request is too large (-32600)",
      sanitizeOps: false,
      sanitizeResources: false,
      fn: async () => {
        await using raw = await shim();
        const pad = "x".repeat(4 * 1024 * 1024 + 16);
        await raw.writeLine(
          JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list", params: { pad } }),
          20_000,
        );
        const m = await raw.next("the answer to a 4 MiB line", 20_000);
        const e = errorOf(m, "4 MiB line");
        assert.equal(e.code, -32600, JSON.stringify(m));
        assert.match(e.message, /too large/i);
        assert.doesNotMatch(e.message, /unreachable/i);
        await stillServes(raw, 8);
        // The SDK puts the id last: the answer then carries it, and the call fails at once.
        await raw.writeLine(
          JSON.stringify({ jsonrpc: "2.0", method: "tools/list", params: { pad }, id: 9 }),
          20_000,
        );
        const last = await raw.next("the answer to a 4 MiB line with its id last", 20_000);
        assert.equal(errorOf(last, "id last").code, -32600);
        assert.equal(last.id, 9, JSON.stringify(last));
      },
    });

    await t.step({
      name: "params as an array, and tools/call without params, are answered with their ids",
      sanitizeOps: false,
      sanitizeResources: false,
      fn: async () => {
        await using raw = await shim();
        await raw.writeLine('{"jsonrpc":"2.0","id":3,"method":"ping","params":[1]}');
        const arr = await raw.response(3, "ping with params [1]", 5000);
        assert.equal(errorOf(arr, "params array").code, -32600, JSON.stringify(arr));
        await raw.writeLine('{"jsonrpc":"2.0","id":4,"method":"tools/call"}');
        const none = await raw.response(4, "tools/call without params", 5000);
        assert.equal(errorOf(none, "no params").code, -32602, JSON.stringify(none));
        assert.doesNotMatch(errorOf(none, "no params").message, /invalid_type|nonoptional/);
        await stillServes(raw, 5);
      },
    });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("POST /mcp with an empty batch [] is HTTP 400 with a JSON-RPC Invalid Request", async () => {
  const token = `http-agent-${crypto.randomUUID()}`;
  const home = await homeWithConfig(`agents:\n  web:\n    token: "\${CONF_HTTP_TOKEN}"\n`);
  try {
    await using d = await startDaemon(home, { env: { CONF_HTTP_TOKEN: token } });
    const res = await fetch(`http://127.0.0.1:${d.port}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: "[]",
    });
    const text = await res.text();
    assert.equal(res.status, 400, `status 400: ${res.status} ${text}`);
    let body: { jsonrpc?: string; id?: unknown; error?: ToolError & { code: unknown } };
    try {
      body = JSON.parse(text);
    } catch {
      assert.fail(`the body is JSON: ${text}`);
    }
    assert.equal(body.jsonrpc, "2.0", text);
    assert.equal(body.error?.code, -32600, text);
    assert.equal(body.id, null, text);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

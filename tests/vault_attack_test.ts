/**
 * Attack probes against the vault and `security.run_as`, from the outside, as a hostile agent
 * would: a real daemon (root, as on this CI), the official MCP SDK client over the stdio shim,
 * the operator's CLI and API for what only an operator does (unlock, lock, approve), and
 * commands inside the agents' own sessions. Nothing here reaches into the daemon's code (but
 * `runAsSessionsDir`, to know where run_as scratch directories are).
 *
 * Each step is one attempt, named by what it shows:
 * - `HELD: …` the defence holds; the step asserts the safe outcome.
 * - `LIMIT: …` a limit the docs state (docs/VAULT.md "Redaction", "What the vault does not
 *   protect against", docs/SECURITY.md "What remains unprotected"); the step asserts the
 *   documented behaviour, so that a change (for better or worse) is noticed.
 * Five holes this review found (agent tokens in a shim's argv and, from the config's `${NAME}`,
 * in every session's environment; the operator token on the argv of `dashboard --open`'s
 * browser) are fixed; their steps are HELD now.
 *
 * The number in brackets is the class of attack: [1] the control plane from inside a session,
 * [2] one agent against another, [3] references into code-running variables, [4] output
 * transformations, [5] approvals and lock races, [6] exec_write {vault} misuse, [7] limits and
 * wire validation, [8] run_as specifics.
 *
 * Two agents share one daemon: `a` (configured, with a token, policy `pa`: entries `a-*`) and
 * `b` (development mode, `--agent b`, the default policy `pb`: entries `b-*`, no command rules).
 * A probe that looks for a value pipes its output through `rev` inside the session and reverses
 * it back here, so the daemon-wide redaction cannot hide a leak from the test.
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  DENO_ARGS,
  homeWithConfig,
  operatorFetch,
  type RunningDaemon,
  startDaemon,
  stdioClient,
  termada,
  termadaEnv,
} from "./_daemon.ts";
import { denoDir, pollUntil } from "./_clients.ts";
import { runAsSessionsDir } from "../src/paths/mod.ts";

const DENO_DIR = await denoDir();
const USERADD = "/usr/sbin/useradd";
const CAN_RUN_AS = Deno.uid() === 0 && exists(USERADD);

// Values: letters, digits and '-' only, so that no built-in pattern masks them by accident.
const A_VAL = "alpha-Zq8vault-0123456-omega"; // 28 bytes: one line of `xxd -p`
const A_LONG = "Lq7-" + "abcdefghijklmnopqrstuvwxyz0123456789".repeat(3) + "-end"; // 116 bytes
const A_PW = "pw-Vault-Typed-4242";
const A_ML = "first-line-of-the-entry-x1\nsecond-line-of-the-entry-y2";
const A_TINY = "t1n5z"; // 5 bytes: masked with stars
const A_TINY3 = "k9q"; // 3 bytes, only a hand-made file can hold it: never handed out
const A_TEMP = "temp-Entry-Value-5150";
const B_VAL = "bravo-Kx7vault-9876543-delta";
const TOKEN_A = `agent-a-token-${crypto.randomUUID()}`;

type Obj = Record<string, unknown>;
interface ToolErr {
  code: string;
  message: string;
  hint?: string;
  details?: Obj;
}
const errorOf = (r: Obj) => r.error as ToolErr | undefined;
const shown = (r: unknown) => JSON.stringify(r).slice(0, 1500);
const rev = (s: string) => [...s].reverse().join("");
/** A word for bash, single-quoted. */
const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

async function run(
  cmd: string,
  args: string[],
  stdin?: string,
): Promise<{ code: number; out: string }> {
  const p = new Deno.Command(cmd, {
    args,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = p.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
  }
  const o = await p.output();
  const dec = new TextDecoder();
  return { code: o.code, out: dec.decode(o.stdout) + dec.decode(o.stderr) };
}

/** The printed forms the daemon registers for a value (docs/VAULT.md "Redaction"). */
function registeredForms(value: string): string[] {
  const forms = [value];
  if (value.length <= 3072) {
    for (let skip = 0; skip < 3; skip++) {
      const groups = Math.floor((value.length - skip) / 3);
      if (groups * 4 < 8) continue;
      const b64 = btoa(value.slice(skip, skip + groups * 3));
      forms.push(b64, b64.replaceAll("+", "-").replaceAll("/", "_"));
    }
  }
  if (value.length * 2 >= 8 && value.length <= 2048) {
    const hex = Array.from(new TextEncoder().encode(value), (b) => b.toString(16).padStart(2, "0"))
      .join("");
    forms.push(hex, hex.toUpperCase());
  }
  for (const line of value.split("\n")) if (line.length >= 16) forms.push(line);
  return [...new Set(forms)];
}

/** Text with its escape sequences left out (as a terminal's text would be). */
function withoutEscapes(text: string): string {
  return text.replace(
    // deno-lint-ignore no-control-regex
    /\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]/g,
    "",
  );
}

/**
 * Which of `forms` appear in `text`, also with escape sequences left out. A form shorter than
 * SHORT_FORM counts only where it stands alone (no letter or digit on either side): "k9q" turns
 * up by chance inside random ids (job_…, act_…) in one run of a few, which is no leak.
 */
function leaks(text: string, forms: string[]): string[] {
  const plain = withoutEscapes(text);
  const found = (t: string, f: string) =>
    f.length >= SHORT_FORM
      ? t.includes(f)
      : new RegExp(`(?<![0-9A-Za-z])${f.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?![0-9A-Za-z])`)
        .test(t);
  return forms.filter((f) => found(text, f) || found(plain, f));
}
const SHORT_FORM = 4; // below the shortest value a redactor masks (a 3-byte one is never handed out)

/** Everything a session's recording (asciicast, rotated files too) shows, as one text. */
function recordingText(home: string, sessionId: string): string {
  let out = "";
  const dir = `${home}/recordings`;
  for (const e of Deno.readDirSync(dir)) {
    if (!e.name.startsWith(`${sessionId}.cast`)) continue;
    for (const line of Deno.readTextFileSync(`${dir}/${e.name}`).split("\n")) {
      if (!line.startsWith("[")) continue;
      try {
        const ev = JSON.parse(line) as [number, string, string];
        if (ev[1] === "o") out += ev[2];
      } catch {
        // a line being written
      }
    }
  }
  return out;
}

/** Every file under `dir` (bytes), for the leak search. */
function* files(dir: string): Generator<[string, Uint8Array]> {
  for (const e of Deno.readDirSync(dir)) {
    const p = `${dir}/${e.name}`;
    if (e.isDirectory) yield* files(p);
    else if (e.isFile) yield [p, Deno.readFileSync(p)];
  }
}

/** An agent's MCP client; every reply is kept for the final leak search. */
class Agent {
  constructor(readonly c: Client, readonly seen: string[]) {}

  async call(name: string, args: Obj): Promise<Obj> {
    const r = await this.c.callTool({ name, arguments: args });
    this.seen.push(JSON.stringify(r));
    return r.structuredContent as Obj;
  }

  async ok(name: string, args: Obj): Promise<Obj> {
    const r = await this.call(name, args);
    assert.equal(errorOf(r), undefined, `${name}: ${shown(r)}`);
    return r;
  }

  async session(args: Obj = {}): Promise<string> {
    return (await this.ok("session_create", args)).session_id as string;
  }

  /** One shell line in the session, to its end. */
  async sh(sid: string, line: string, extra: Obj = {}): Promise<{ code: number; out: string }> {
    const r = await this.call("exec_run", {
      session_id: sid,
      command: [line],
      timeout_ms: 30_000,
      ...extra,
    });
    assert.equal(r.status, "exited", `${line.slice(0, 300)}\n${shown(r)}`);
    return { code: r.exit_code as number, out: String(r.output) };
  }

  /**
   * `line`'s output (stderr too) reversed by `rev` in the session and reversed back here: a
   * value it finds is not a registered form on the way out, so redaction cannot hide it.
   */
  async probe(sid: string, line: string, extra: Obj = {}): Promise<string> {
    const { out } = await this.sh(sid, `{ ${line}\n} 2>&1 | LC_ALL=C rev`, extra);
    return out.split("\n").map(rev).join("\n");
  }

  async jobCount(): Promise<number> {
    return ((await this.ok("exec_list", { filter: "all", limit: 200 })).jobs as unknown[]).length;
  }

  async sessionCount(): Promise<number> {
    return ((await this.ok("session_list", {})).sessions as unknown[]).length;
  }

  /** Ends every job of this agent that is still active (so a failed step leaves no busy session). */
  async settle(): Promise<void> {
    try {
      const r = await this.call("exec_list", { filter: "active" });
      for (const j of (r.jobs as { job_id: string }[] | undefined) ?? []) {
        await this.call("exec_kill", { job_id: j.job_id, grace_ms: 200 });
      }
    } catch {
      // the daemon is gone (the last steps): nothing runs
    }
  }

  /** Polls a job until it waits for input. */
  async awaitingInput(jobId: string): Promise<Obj> {
    return await pollUntil(
      async () => {
        const p = await this.call("exec_poll", { job_id: jobId, wait_ms: 300 });
        return p.status === "awaiting_input" ? p : undefined;
      },
      `job ${jobId} waiting for input`,
      15_000,
    );
  }
}

/** `t.step`, then every active job of `agents` ended, whatever the step did. */
function stepper(t: Deno.TestContext, agents: Agent[]) {
  return (name: string, fn: () => void | Promise<void>, o: { ignore?: boolean } = {}) =>
    t.step({
      name,
      ignore: o.ignore ?? false,
      fn: async () => {
        try {
          await fn();
        } finally {
          for (const a of agents) await a.settle();
        }
      },
    });
}

interface AuditRecord {
  seq: number;
  event: string;
  actor: { kind: string; id: string };
  data: Record<string, unknown>;
}

/** The audit log as the operator's API hands it out. */
async function audit(
  op: (p: string, i?: RequestInit) => Promise<Response>,
): Promise<AuditRecord[]> {
  const res = await op("/audit?n=10000");
  assert.equal(res.status, 200);
  return ((await res.json()) as { records: AuditRecord[] }).records;
}

/**
 * A vault made by hand with the age CLI, as docs/VAULT.md "With the age CLI" describes (so it
 * may hold a value shorter than 4 bytes), put in place while the daemon is locked and unlocked
 * through the operator API. Returns the identity file (inside the state dir: hidden).
 */
async function handMadeVault(
  d: RunningDaemon,
  entries: [name: string, value: string, kind?: string][],
): Promise<string> {
  const idFile = `${d.home}/operator-key.txt`;
  const gen = await run("age-keygen", ["-o", idFile]);
  assert.equal(gen.code, 0, gen.out);
  const recipient = (await run("age-keygen", ["-y", idFile])).out.trim();
  const now = new Date().toISOString();
  const plain = JSON.stringify({
    termada_vault: 1,
    entries: entries.map(([name, value, kind]) => ({
      name,
      kind: kind ?? "secret",
      created: now,
      updated: now,
      value_b64: btoa(value),
    })),
  });
  const enc = await run("age", ["-e", "-r", recipient, "-o", `${d.home}/vault.age`], plain);
  assert.equal(enc.code, 0, enc.out);
  Deno.chmodSync(`${d.home}/vault.age`, 0o600);
  const identity = Deno.readTextFileSync(idFile).split("\n").find((l) =>
    l.startsWith("AGE-SECRET-KEY-")
  )!;
  const res = await operatorFetch(d)("/vault/unlock", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ identity }),
  });
  assert.equal(res.status, 200, await res.text());
  return idFile;
}

/**
 * From inside a session: an MCP call on the daemon's loopback port as whoever token `$T` is
 * (the shell expression `tokenExpr`), asking for entry `entry` reversed. Returns the output.
 */
function impersonation(port: number, tokenExpr: string, entry: string): string {
  const init = JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: {
      protocolVersion: "2025-03-26",
      capabilities: {},
      clientInfo: { name: "x", version: "1" },
    },
  });
  const ready = JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" });
  const use = JSON.stringify({
    jsonrpc: "2.0",
    id: 2,
    method: "tools/call",
    params: {
      name: "exec_run",
      arguments: { command: ['printf %s "$X" | rev'], env: { X: { vault: entry } } },
    },
  });
  return [
    `T=${tokenExpr}`,
    'echo "token: ${#T} characters"',
    `U=http://127.0.0.1:${port}/mcp`,
    "J='content-type: application/json'",
    "K='accept: application/json, text/event-stream'",
    `H=$(curl -s -m 5 -D - -o /dev/null -H "authorization: Bearer $T" -H "$J" -H "$K" -d ${
      q(init)
    } "$U" | tr -d '\\r' | sed -n 's/^mcp-session-id: //Ip')`,
    `curl -s -m 5 -o /dev/null -H "authorization: Bearer $T" -H "mcp-session-id: $H" -H "$J" -H "$K" -d ${
      q(ready)
    } "$U"`,
    `curl -s -m 20 -H "authorization: Bearer $T" -H "mcp-session-id: $H" -H "$J" -H "$K" -d ${
      q(use)
    } "$U" | grep -o '"output[^,]*'`,
    "true",
  ].join("\n");
}

/** B's session tries to call the MCP port as A with the token `tokenExpr` finds: it must fail. */
async function cannotImpersonateA(
  B: Agent,
  sb: string,
  port: number,
  tokenExpr: string,
): Promise<void> {
  const { out } = await B.sh(sb, impersonation(port, tokenExpr, "a-secret"));
  assert.ok(!out.includes(rev(A_VAL)), `B got A's value as A:\n${out}`);
}

/** A shell expression: the word after `--token` in any process's argv. */
const TOKEN_FROM_ARGV =
  `"$(ps -eww -o args | grep -o -e '--token [^ ]*' | head -n1 | cut -d' ' -f2)"`;
/** The root file system's block device, when it is one (for raw-disk probes). */
const ROOT_DEV = await (async () => {
  const r = await run("findmnt", ["-n", "-o", "SOURCE", "/"]).catch(() => ({ code: 1, out: "" }));
  const dev = r.out.trim();
  return r.code === 0 && dev.startsWith("/dev/") ? dev : "/dev/null-no-block-device";
})();

const CONFIG = `log:
  level: warn
agents:
  a:
    token: "\${VA_TOKEN_A}"
    policy: pa
default_policy: pb
policies:
  pa:
    confirm: ["touch *"]
    vault:
      allow: ["local:a-*"]
  pb:
    vault:
      allow: ["local:b-*"]
approvals:
  confirm_timeout_ms: 60000
`;

/** Variables that make programs load or run what they name (src/control/vault.ts CODE_ENV). */
const CODE_VARIABLES = [
  "LD_PRELOAD",
  "LD_AUDIT",
  "LD_LIBRARY_PATH",
  "BASH_ENV",
  "ENV",
  "PATH",
  "GIT_SSH_COMMAND",
  "GIT_CONFIG_PARAMETERS",
  "PROMPT_COMMAND",
  "PS4",
  "NODE_OPTIONS",
  "PYTHONSTARTUP",
  "PERL5OPT",
  "SHELLOPTS",
  "IFS",
  "HOME",
  "PAGER",
  "SSH_ASKPASS",
];

Deno.test({
  name: "vault attacks: two agents on one root daemon (no run_as)",
  async fn(t) {
    const env = { DENO_DIR, VA_TOKEN_A: TOKEN_A };
    const home = await homeWithConfig(CONFIG);
    const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "termada-vault-attack-" }));
    const seen: string[] = [];
    // Quotes, $(…), backticks, a backslash and glob characters: what a real password holds.
    const metaValue =
      `m'"$(touch ${dir}/meta1)\`touch ${dir}/meta2\`;touch ${dir}/meta3;$HOME\\x|&<>*?~!#{}[]%`;
    try {
      await using d = await startDaemon(home, { env });
      const op = operatorFetch(d);
      const idFile = await handMadeVault(d, [
        ["a-secret", A_VAL],
        ["a-long", A_LONG],
        ["a-pw", A_PW, "password"],
        ["a-multi", A_ML],
        ["a-tiny", A_TINY],
        ["a-tiny3", A_TINY3],
        ["a-temp", A_TEMP],
        ["a-meta", metaValue],
        ["b-secret", B_VAL],
      ]);
      const token = Deno.readTextFileSync(`${home}/token`).trim();
      // Agent a as the docs configure it: a token in the config (from the environment) and in
      // the shim's environment (TERMADA_AGENT_TOKEN; `--token T` on argv is visible in `ps`,
      // so the shim warns about it — the run_as scenario below uses it on purpose).
      await using ca = await stdioClient(home, [], { ...env, TERMADA_AGENT_TOKEN: TOKEN_A });
      await using cb = await stdioClient(home, ["--agent", "b"], env);
      const A = new Agent(ca, seen);
      const B = new Agent(cb, seen);
      const sa = await A.session();
      const sb = await B.session();
      const aTty = (await A.sh(sa, "tty")).out.trim();
      assert.match(aTty, /^\/dev\/pts\/\d+$/);
      const daemonPid = d.proc.pid;
      const step = stepper(t, [A, B]);
      const caps = await A.ok("capabilities", {});
      const boundary = caps.boundary as { hiding: { how: string }; landlock: { active: boolean } };
      assert.equal(boundary.hiding.how, "mounts", shown(caps));
      assert.equal(boundary.landlock.active, true, shown(caps));

      // ── [1] the control plane from inside a session ──────────────────────────────────

      await step(
        "HELD: [1] the state dir is an empty cover: token, vault.age, db, audit, recordings",
        async () => {
          assert.equal((await B.sh(sb, `ls -A ${home}`)).out, "run\n");
          const out = await B.probe(
            sb,
            `for f in token vault.age termada.db audit/audit-000001.jsonl operator-key.txt; ` +
              `do head -c 200 ${home}/$f; done; ls ${home}/recordings ${home}/spool`,
          );
          assert.ok(!out.includes(token), "the operator token was read");
          assert.doesNotMatch(out, /AGE-SECRET-KEY|SQLite format/, out);
          assert.equal((out.match(/No such file or directory/g) ?? []).length, 7, out);
        },
      );

      await step(
        "HELD: [1] the daemon's /proc files and ptrace: environ, fd, root, cwd, mem, gdb",
        async () => {
          const D = daemonPid;
          const out = await B.probe(
            sb,
            `tr '\\0' '\\n' < /proc/${D}/environ | head -3; for f in /proc/${D}/fd/*; do head -c 100 $f; done; ` +
              `cat /proc/${D}/root${home}/token; cat /proc/${D}/cwd/token; ls /proc/${D}/root/; ` +
              `dd if=/proc/${D}/mem bs=1 count=1 skip=4194304; gdb -p ${D} -batch -ex 'info proc' </dev/null | tail -2`,
          );
          assert.ok(!out.includes(token), "the operator token was read");
          // Out of the session's /proc altogether (hidepid), or refused where it is shown.
          assert.match(out, /environ: (Permission denied|No such file or directory)/, out);
          assert.match(
            out,
            /cannot access '\/proc\/\d+\/root\/': (Permission denied|No such file or directory)/,
            out,
          );
          assert.match(out, /ptrace: Operation not permitted/, out);
          assert.doesNotMatch(out, /TERMADA_HOME|VA_TOKEN_A/, out);
        },
      );

      await step(
        "HELD: [1] a root session cannot unmount the cover, mount, enter the daemon's namespace or read the raw disk",
        async () => {
          const out = await B.probe(
            sb,
            `umount -l ${home}; echo umount=$?; mount -t tmpfs none ${dir}; echo mount=$?; ` +
              `nsenter -t ${daemonPid} -m cat ${home}/token; echo nsenter=$?; ` +
              `unshare -m sh -c 'umount ${home}; cat ${home}/token'; echo unshare=$?; ` +
              `unshare -Urm sh -c 'umount ${home}; cat ${home}/token'; echo userns=$?; ` +
              `sync; debugfs -R 'cat ${home}/token' ${ROOT_DEV} | head -c 200; cat ${home}/token`,
          );
          assert.ok(!out.includes(token), `the operator token was read:\n${out}`);
          for (const k of ["umount", "mount", "nsenter", "unshare", "userns"]) {
            assert.doesNotMatch(out, new RegExp(`^${k}=0$`, "m"), out);
          }
        },
      );

      await step(
        "HELD: [1] another session's staged cmd.sh is out of reach while its job runs",
        async () => {
          const sa2 = await A.session();
          const pid = (await A.sh(sa2, "echo $$")).out.trim();
          const job = await A.ok("exec_start", {
            session_id: sa2,
            command: ["sleep 3; echo ran"],
            env: { X: { vault: "a-secret" } },
          });
          const staged = `${home}/run/sessions/${sa2}/cmd.sh`;
          // Seen from outside (the test is root): it is there, 0600, while the job runs.
          await pollUntil(() => exists(staged) || undefined, "the staged script");
          assert.equal(Deno.statSync(staged).mode! & 0o777, 0o600);
          const out = await B.probe(
            sb,
            `cat ${staged}; cat /proc/${pid}/root${staged}; ls ${home}/run/sessions/; ` +
              `cat /proc/*/root${staged}`,
          );
          assert.ok(!out.includes(A_VAL), `A's value was read:\n${out}`);
          assert.doesNotMatch(out, new RegExp(`${sa2}\\n`), out);
          const fr = await B.call("file_read", { path: staged });
          assert.equal(errorOf(fr)?.code, "DENIED_BY_POLICY", shown(fr));
          const done = await A.call("exec_wait", { job_id: job.job_id, timeout_ms: 10_000 });
          assert.equal(done.output, "ran\n", shown(done));
          // Removed when its job ended.
          await pollUntil(() => !exists(staged) || undefined, "the staged script removed");
          // Killed, and with its session closed: removed too.
          const k = await A.ok("exec_start", {
            session_id: sa2,
            command: ["sleep 30"],
            env: { X: { vault: "a-secret" } },
          });
          await pollUntil(() => exists(staged) || undefined, "the staged script (2)");
          await A.call("exec_kill", { job_id: k.job_id, grace_ms: 200 });
          await pollUntil(() => !exists(staged) || undefined, "the staged script removed at kill");
          await A.ok("exec_start", {
            session_id: sa2,
            command: ["sleep 30"],
            env: { X: { vault: "a-secret" } },
          });
          await pollUntil(() => exists(staged) || undefined, "the staged script (3)");
          await A.ok("session_close", { session_id: sa2 });
          await pollUntil(() => !exists(staged) || undefined, "the staged script removed at close");
        },
      );

      await step(
        "HELD: [1] a session cannot be started inside another session's scratch dir",
        async () => {
          const n = await B.sessionCount();
          for (const cwd of [`${home}/run/sessions/${sa}`, `${home}/recordings`]) {
            const r = await B.call("session_create", { cwd });
            assert.equal(errorOf(r)?.code, "INVALID_ARGUMENT", shown(r));
            assert.match(errorOf(r)!.message, /is hidden from sessions/);
          }
          assert.equal(await B.sessionCount(), n);
          // The cover above them is allowed: it holds the new session's own directory only.
          const r = await B.ok("session_create", { cwd: `${home}/run/sessions` });
          const out = await B.probe(r.session_id as string, "ls -A");
          assert.equal(out.trim(), r.session_id, out);
          await B.ok("session_close", { session_id: r.session_id });
          assert.equal(await B.sessionCount(), n);
        },
      );

      await step(
        "HELD: [1] file_read (the daemon's own reads) refuses the state dir, links into it, /proc and /dev/fd",
        async () => {
          // B's policy has no command rules, so its file rules allow everything else.
          const link = `${dir}/to-token`;
          await B.sh(
            sb,
            `ln -s ${home}/token ${link}; ln -s /proc/${daemonPid}/environ ${dir}/to-env`,
          );
          const paths = [
            `${home}/token`,
            `${home}/./vault.age`,
            `${dir}/../${home.split("/").pop()}/termada.db`,
            link,
            `${dir}/to-env`,
            `/proc/${daemonPid}/environ`,
            "/proc/self/environ",
            "/dev/fd/3",
            `${home}/recordings/${sa}.cast`,
          ];
          for (const path of paths) {
            const r = await B.call("file_read", { path });
            assert.ok(errorOf(r), `${path}: ${shown(r)}`);
            assert.ok(!JSON.stringify(r).includes(token), path);
          }
          const ok = await B.call("file_read", { path: "/etc/hostname" });
          assert.equal(errorOf(ok), undefined, "file_read works at all");
        },
      );

      // ── [2] one agent against another ────────────────────────────────────────────────

      await step("HELD: [2] vault_list shows each agent only its own entries", async () => {
        const la = await A.ok("vault_list", {});
        assert.deepEqual(
          (la.entries as { name: string }[]).map((e) => e.name),
          ["a-long", "a-meta", "a-multi", "a-pw", "a-secret", "a-temp", "a-tiny", "a-tiny3"],
        );
        const lb = await B.ok("vault_list", {});
        assert.deepEqual(lb.entries, [{ name: "b-secret", kind: "secret" }]);
      });

      await step(
        "HELD: [2] a forbidden entry and a missing one answer alike (no existence oracle)",
        async () => {
          const norm = (e: ToolErr | undefined, name: string) => ({
            code: e?.code,
            message: e?.message.replaceAll(name, "<entry>"),
            hint: e?.hint?.replaceAll(name, "<entry>"),
            keys: Object.keys(e?.details ?? {}).sort(),
            rule: e?.details?.rule,
          });
          const prompt = await B.ok("exec_start", {
            session_id: sb,
            command: ["read -r L; echo got-$L"],
          });
          await B.awaitingInput(prompt.job_id as string);
          const seenShapes: unknown[] = [];
          for (const name of ["a-secret", "a-nothing"]) {
            const r1 = await B.call("exec_run", {
              command: [`echo ${dir}/never-${name}`],
              env: { X: { vault: name } },
            });
            const r2 = await B.call("session_create", { env: { X: { vault: name } } });
            const r3 = await B.call("exec_run", {
              mode: "background",
              command: ["true"],
              env: { X: { vault: name } },
            });
            const r4 = await B.call("exec_write", { job_id: prompt.job_id, vault: name });
            for (const r of [r1, r2, r3, r4]) {
              assert.equal(errorOf(r)?.code, "DENIED_BY_POLICY", shown(r));
            }
            seenShapes.push([r1, r2, r3, r4].map((r) => norm(errorOf(r), name)));
          }
          assert.deepEqual(seenShapes[0], seenShapes[1]);
          // The prompt was not touched; an allowed entry that does not exist is NOT_FOUND.
          assert.equal(
            (await B.call("exec_poll", { job_id: prompt.job_id })).status,
            "awaiting_input",
          );
          await B.ok("exec_write", { job_id: prompt.job_id, input: "fine" });
          const w = await B.call("exec_wait", { job_id: prompt.job_id, timeout_ms: 10_000 });
          assert.match(String(w.output), /got-fine\n$/, shown(w));
          const nf = await B.call("exec_run", {
            command: ["true"],
            env: { X: { vault: "b-nothing" } },
          });
          assert.equal(errorOf(nf)?.code, "NOT_FOUND", shown(nf));
          const records = await audit(op);
          const denied = records.filter((r) => r.event === "vault.denied" && r.actor.id === "b");
          const reasons = new Set(
            denied.filter((r) => String(r.data.entry).startsWith("a-")).map((r) =>
              String(r.data.reason).replaceAll(String(r.data.entry), "<entry>")
            ),
          );
          assert.equal(reasons.size, 1, [...reasons].join("\n"));
          assert.ok(
            !records.some((r) =>
              r.event === "vault.used" && r.actor.id === "b" &&
              String(r.data.entry).startsWith("a-")
            ),
          );
        },
      );

      await step(
        "HELD: [2] B cannot read A's session environment (session_create env) through /proc — docs promise less",
        async () => {
          const se = await A.session({ env: { ASEC: { vault: "a-secret" } } });
          const pid = (await A.sh(se, "echo $$")).out.trim();
          const inside = await A.sh(se, 'echo "${#ASEC}"');
          assert.equal(inside.out.trim(), String(A_VAL.length));
          const out = await B.probe(
            sb,
            `cat /proc/${pid}/environ >/dev/null; grep -a -z -h '^ASEC=' /proc/[0-9]*/environ 2>/dev/null | ` +
              `tr '\\0' '\\n'; echo swept`,
          );
          assert.match(out, /environ: (Permission denied|No such file or directory)/, out);
          assert.match(out, /swept/);
          assert.ok(!out.includes(A_VAL), `A's value was read:\n${out}`);
          await A.ok("session_close", { session_id: se });
        },
      );

      await step(
        "HELD: [2] B cannot read the environment of A's running commands (staged and one-shot): they are not in its /proc",
        async () => {
          const fg = await A.ok("exec_start", {
            session_id: sa,
            command: ["sleep 20.0417"],
            env: { AJOB: { vault: "a-secret" } },
          });
          const bg = await A.ok("exec_start", {
            mode: "background",
            command: ["sleep", "20.0417"],
            env: { ABG: { vault: "a-long" } },
          });
          await pollUntil(async () => {
            const p = await new Deno.Command("pgrep", {
              args: ["-xf", "sleep 20.0417"],
              stdout: "piped",
            }).output();
            return new TextDecoder().decode(p.stdout).trim().split("\n").length === 2 || undefined;
          }, "both of A's commands running");
          const out = await B.probe(
            sb,
            `grep -a -z -h -E '^(AJOB|ABG)=' /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; ` +
              `ps -eww -o args | grep -c '^sleep 20[.]0417$'`,
          );
          assert.match(out, /^0$/m, `B saw A's commands:\n${out}`);
          assert.ok(!out.includes(A_VAL) && !out.includes(A_LONG), `A's value was read:\n${out}`);
          for (const j of [fg, bg]) {
            const k = await A.call("exec_kill", { job_id: j.job_id, grace_ms: 200 });
            assert.equal(k.status, "killed", shown(k));
          }
        },
      );

      await step(
        "HELD: [2] argv of A's commands: not in B's /proc, so no `ps` shows it (hidepid, ptrace scoping)",
        async () => {
          const job = await A.ok("exec_start", {
            session_id: sa,
            command: ['bash -c "sleep 20; true" "$X"'],
            env: { X: { vault: "a-secret" } },
          });
          await pollUntil(async () => {
            const p = await new Deno.Command("pgrep", {
              args: ["-f", "^bash -c sleep 20; true"],
              stdout: "piped",
            }).output();
            return p.success || undefined;
          }, "A's command running");
          const sweep = "ps -eww -o args | grep -a '^bash -c sleep 20'; " +
            "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; echo swept";
          const plain = await B.sh(sb, sweep);
          assert.doesNotMatch(plain.out, /sleep 20; true/, plain.out);
          const reversed = await B.probe(sb, sweep);
          assert.match(reversed, /swept/);
          assert.ok(!reversed.includes(A_VAL), reversed);
          await A.call("exec_kill", { job_id: job.job_id, grace_ms: 200 });
        },
      );

      await step(
        "HELD: [2] A's ids are NOT_FOUND for B (poll, wait, write, vault write, signal, kill, screen, close, run, background)",
        async () => {
          const prompt = await A.ok("exec_start", {
            session_id: sa,
            command: [
              'read -s -p "Password: " P; echo; [ "$P" = "$X" ] && echo accepted || echo wrong',
            ],
            env: { X: { vault: "a-pw" } },
          });
          await A.awaitingInput(prompt.job_id as string);
          const jobId = prompt.job_id as string;
          const calls: [string, (id: string, s: string) => Obj][] = [
            ["exec_poll", (id) => ({ job_id: id })],
            ["exec_wait", (id) => ({ job_id: id, timeout_ms: 100 })],
            ["exec_write", (id) => ({ job_id: id, input: "wrong-guess" })],
            ["exec_write", (id) => ({ job_id: id, vault: "b-secret" })],
            ["exec_signal", (id) => ({ job_id: id, signal: "INT" })],
            ["exec_kill", (id) => ({ job_id: id, grace_ms: 0 })],
            ["session_screen", (_, s) => ({ session_id: s })],
            ["session_close", (_, s) => ({ session_id: s })],
            ["exec_run", (_, s) => ({ session_id: s, command: ["id"] })],
            [
              "exec_run",
              (_, s) => ({
                session_id: s,
                mode: "background",
                command: ["id"],
                env: { X: { vault: "b-secret" } },
              }),
            ],
            ["file_read", (_, s) => ({ session_id: s, path: "/etc/hostname" })],
          ];
          for (const [name, args] of calls) {
            const real = await B.call(name, args(jobId, sa));
            const fake = await B.call(name, args("job_zzzzzzzzzzzz", "ses_zzzzzzzzzzzz"));
            assert.equal(errorOf(real)?.code, "NOT_FOUND", `${name}: ${shown(real)}`);
            assert.equal(errorOf(fake)?.code, "NOT_FOUND", `${name}: ${shown(fake)}`);
          }
          const jobs = (await B.ok("exec_list", { filter: "all", limit: 200 })).jobs as {
            job_id: string;
          }[];
          assert.ok(!jobs.some((j) => j.job_id === jobId));
          const sessions = (await B.ok("session_list", {})).sessions as { session_id: string }[];
          assert.ok(!sessions.some((s) => s.session_id === sa));
          // A's prompt is untouched and takes its own entry.
          assert.equal((await A.call("exec_poll", { job_id: jobId })).status, "awaiting_input");
          await A.ok("exec_write", { job_id: jobId, vault: "a-pw" });
          const w = await A.call("exec_wait", { job_id: jobId, timeout_ms: 10_000 });
          assert.match(String(w.output), /accepted/, shown(w));
          assert.ok(!String(w.output).includes(A_PW));
        },
      );

      await step(
        "HELD: [2] B cannot open A's terminal: no path to it (own devpts), not through /proc, not the host's",
        async () => {
          assert.equal(
            (caps.boundary as { terminals: { active: boolean } }).terminals.active,
            true,
          );
          const aShell = (await A.sh(sa, "echo $$")).out.trim();
          const prompt = await A.ok("exec_start", {
            session_id: sa,
            command: [
              'read -s -p "Password: " P; echo; [ "$P" = "$X" ] && echo accepted || echo wrong',
            ],
            env: { X: { vault: "a-pw" } },
          });
          await A.awaitingInput(prompt.job_id as string);
          // B's /dev/pts is its own instance: its terminal and ptmx, nothing of A or the host.
          const listed = (await B.sh(sb, "ls /dev/pts | sort | tr '\\n' ' '")).out.trim();
          assert.equal(listed, "0 ptmx", listed);
          // The name A's terminal has in A's view leads to B's own terminal in B's.
          const own = await B.sh(
            sb,
            `printf '\\nWRITTEN-BY-B\\n' > ${aTty}; stty -F ${aTty} echo; echo done`,
          );
          assert.match(own.out, /WRITTEN-BY-B/, own.out);
          // Through A's processes and the daemon's /proc entries: refused (ptrace scoping).
          for (const path of [`/proc/${aShell}/fd/0`, `/proc/${daemonPid}/root/dev/pts`]) {
            const r = await B.sh(
              sb,
              `stty -F ${path} -a 2>&1 | head -c 300; ` +
                `ls ${path} 2>&1 | head -c 300; printf 'INJECTED-BY-B' > ${path} 2>&1; echo "rc=$?"`,
            );
            assert.doesNotMatch(r.out, /speed \d+ baud|rc=0/, `${path}: ${r.out}`);
          }
          // A new terminal B allocates comes from its own instance too.
          const nested = await B.sh(
            sb,
            "python3 -c 'import os,pty; m,s=pty.openpty(); print(os.ttyname(s))'",
          );
          assert.match(nested.out, /^\/dev\/pts\/1$/m, nested.out);
          const screen = await A.call("session_screen", { session_id: sa });
          const text = (screen.lines as string[]).join("\n");
          assert.ok(!text.includes("WRITTEN-BY-B") && !text.includes("INJECTED-BY-B"), text);
          // A's prompt kept echo off (B could not touch A's termios): the value is typed unseen.
          await A.ok("exec_write", { job_id: prompt.job_id, vault: "a-pw" });
          const w = await A.call("exec_wait", { job_id: prompt.job_id, timeout_ms: 10_000 });
          assert.match(String(w.output), /accepted/, shown(w));
          assert.ok(!String(w.output).includes(A_PW), shown(w));
          await B.sh(sb, "stty sane; clear");
        },
      );

      await step(
        "HELD: [2] B's session finds no agent token in any argv (the shim takes it from its environment)",
        () => cannotImpersonateA(B, sb, d.port, TOKEN_FROM_ARGV),
      );

      await step(
        "HELD: [2] a token the config takes from `${VA_TOKEN_A}` is not in any session's environment",
        () => cannotImpersonateA(B, sb, d.port, '"$VA_TOKEN_A"'),
      );

      await step(
        "HELD: [2] without a token the MCP port and the operator API refuse B's session",
        async () => {
          const out = await B.sh(
            sb,
            impersonation(d.port, "''", "a-secret") +
              `\ncurl -s -m 5 -w ' http=%{http_code}\\n' http://127.0.0.1:${d.port}/api/vault` +
              `\ncurl -s -m 5 -w ' http=%{http_code}\\n' -H 'x-termada-operator: b' http://127.0.0.1:${d.port}/api/approvals`,
          );
          assert.ok(!out.out.includes(rev(A_VAL)), out.out);
          assert.equal((out.out.match(/http=401/g) ?? []).length, 2, out.out);
        },
      );

      // ── [3] references into code-running variables ──────────────────────────────────

      await step(
        "HELD: [3] references into code-running variables are refused before anything runs",
        async () => {
          const jobs0 = await A.jobCount();
          const sessions0 = await A.sessionCount();
          for (const v of CODE_VARIABLES) {
            const canary = `${dir}/ran-${v}`;
            const ref = { [v]: { vault: "a-secret" } };
            const attempts = [
              await A.call("exec_run", { session_id: sa, command: [`echo > ${canary}`], env: ref }),
              await A.call("exec_run", { command: [`echo > ${canary}`], env: { OK: "x", ...ref } }),
              await A.call("exec_start", {
                mode: "background",
                command: ["sh", "-c", `echo > ${canary}`],
                env: ref,
              }),
              await A.call("session_create", { env: ref }),
            ];
            for (const r of attempts) {
              assert.equal(errorOf(r)?.code, "INVALID_ARGUMENT", `${v}: ${shown(r)}`);
              assert.match(
                errorOf(r)!.message,
                new RegExp(`into ${v}: that variable makes programs`),
              );
            }
            assert.ok(!exists(canary), `${v}: it ran`);
          }
          assert.equal(await A.jobCount(), jobs0, "no job was reserved");
          assert.equal(await A.sessionCount(), sessions0, "no session was opened");
          const used = (await audit(op)).filter((r) =>
            r.event === "vault.used" && CODE_VARIABLES.includes(String(r.data.variable))
          );
          assert.deepEqual(used, []);
        },
      );

      // ── [4] output transformations of A's own value ─────────────────────────────────

      const s4 = await A.session();
      const V = { V: { vault: "a-secret" }, L: { vault: "a-long" } };
      let mark = 0;
      /** Runs `line` in s4 with both values, then checks its recording for `forms` (HELD). */
      const held4 = async (line: string, forms: string[]) => {
        const end = `END-OF-ATTEMPT-${++mark}`;
        const r = await A.sh(s4, `${line}; echo ${end}`, { env: V });
        assert.deepEqual(leaks(r.out, forms), [], r.out);
        await pollUntil(() => recordingText(home, s4).includes(end) || undefined, "the recording");
        assert.deepEqual(leaks(recordingText(home, s4), forms), [], "in the recording");
        return r.out;
      };
      const formsV = registeredForms(A_VAL);
      const formsL = registeredForms(A_LONG);

      await step("HELD: [4] echo, printf, and the value quoted in an error message", async () => {
        const out = await held4('echo "$V"; printf "v=%s.\\n" "$V"; ls "$V"', formsV);
        assert.match(out, /\[REDACTED\]\n/);
        assert.match(out, /cannot access '\[REDACTED\]': No such file/, out);
      });

      await step(
        "HELD: [4] base64, aligned and offset by 1 and 2 bytes (unwrapped), long value unwrapped",
        async () => {
          const out = await held4(
            'printf %s "$V" | base64 -w0; echo; printf x%s "$V" | base64 -w0; echo; ' +
              'printf xy%s "$V" | base64 -w0; echo; printf %s "$L" | base64 -w0; echo',
            [...formsV, ...formsL],
          );
          assert.equal((out.match(/\[REDACTED\]/g) ?? []).length, 4, out);
        },
      );

      await step("LIMIT: [4] base64 wrapped at 76 columns across a long value", async () => {
        const r = await A.sh(s4, 'printf %s "$L" | base64', { env: V });
        const wrapped = btoa(A_LONG).match(/.{1,76}/g)!;
        assert.ok(r.out.includes(wrapped[0]!), r.out);
        assert.ok(r.out.includes(wrapped[1]!), r.out);
      });

      await step("HELD: [4] hex: xxd -p of a short value, upper case, one long line", async () => {
        const out = await held4(
          'printf %s "$V" | xxd -p; printf %s "$V" | xxd -p -u; printf %s "$L" | xxd -p -c 256',
          [...formsV, ...formsL],
        );
        assert.equal((out.match(/\[REDACTED\]/g) ?? []).length, 3, out);
      });

      await step(
        "LIMIT: [4] hex wrapped (xxd -p of a long value) and spaced (od -An -tx1, xxd's grouped dump)",
        async () => {
          const r = await A.sh(
            s4,
            'printf %s "$L" | xxd -p; printf %s "$V" | od -An -tx1; printf %s "$V" | xxd',
            {
              env: V,
            },
          );
          const hexL = formsL.find((f) => /^[0-9a-f]+$/.test(f) && f.length === A_LONG.length * 2)!;
          assert.ok(r.out.includes(hexL.slice(0, 60)), r.out);
          assert.match(r.out, / 61 6c 70 68 61 2d/, r.out); // "alpha-"
          assert.match(r.out, /616c 7068 612d/, r.out);
          assert.match(r.out, /alpha-Zq8vault-0/, r.out); // xxd's text column, 16 bytes a row
        },
      );

      await step("LIMIT: [4] rev, one character per line, a part of the value", async () => {
        const r = await A.sh(
          s4,
          'printf "%s\\n" "$V" | rev; printf %s "$V" | fold -w1; echo; printf "%s\\n" "${V:0:12}"',
          {
            env: V,
          },
        );
        assert.ok(r.out.includes(rev(A_VAL)), r.out);
        assert.ok(r.out.includes([...A_VAL].join("\n")), r.out);
        assert.ok(r.out.includes(A_VAL.slice(0, 12)), r.out);
      });

      await step(
        "HELD: [4] printf with escape sequences between the characters (output, screen, recording)",
        async () => {
          const out = await held4(
            'v="$V"; for ((i=0;i<${#v};i++)); do printf "\\033[1;3%dm%s\\033[0m" $((i%7)) "${v:i:1}"; done; echo',
            formsV,
          );
          assert.match(out, /\[REDACTED\]/, out);
          const s = await A.call("session_screen", { session_id: s4 });
          assert.ok(!(s.lines as string[]).join("\n").includes(A_VAL), shown(s));
        },
      );

      await step(
        "LIMIT: [4] drawn out of order with tput cup: the job output holds the pieces (session_screen masks the row)",
        async () => {
          const r = await A.sh(
            s4,
            'v="$V"; tput clear; tput cup 5 20; printf %s "${v:16}"; tput cup 5 4; printf %s "${v:0:16}"; tput cup 10 0',
            { env: V },
          );
          assert.ok(r.out.includes(A_VAL.slice(16) + A_VAL.slice(0, 16)), r.out);
          const s = await A.call("session_screen", { session_id: s4 });
          const rows = (s.lines as string[]).join("\n");
          assert.ok(!rows.includes(A_VAL), rows);
          assert.match(rows, /\[REDACTED\]/, rows);
          await A.sh(s4, "clear");
        },
      );

      await step(
        "LIMIT: [4] a backspace between characters: output and screen masked, the recording holds the pieces",
        async () => {
          const r = await A.sh(
            s4,
            'v="$V"; printf "%s" "${v:0:10}"; printf "X\\b"; printf "%s\\n" "${v:10}"; echo BS-DONE',
            {
              env: V,
            },
          );
          assert.ok(!r.out.includes(A_VAL), r.out);
          assert.match(r.out, /\[REDACTED\]/, r.out);
          await pollUntil(
            () => recordingText(home, s4).includes("BS-DONE\r\n") || undefined,
            "the recording",
          );
          // "Other text between its characters" (docs/VAULT.md): a player draws the value whole.
          assert.ok(recordingText(home, s4).includes(`${A_VAL.slice(0, 10)}X\b${A_VAL.slice(10)}`));
        },
      );

      await step(
        "HELD: [4] a value split over two writes with a pause, read with exec_poll during the pause",
        async () => {
          const job = await A.ok("exec_start", {
            session_id: s4,
            command: ['printf "url=%s" "${V:0:13}"; sleep 1.5; printf "%s done\\n" "${V:13}"'],
            env: V,
          });
          let text = "";
          let cursor: string | undefined;
          let polls = 0;
          for (const end = Date.now() + 10_000; Date.now() < end;) {
            const p = await A.call("exec_poll", {
              job_id: job.job_id,
              wait_ms: 200,
              ...(cursor ? { cursor } : {}),
            });
            text += String(p.output ?? "");
            polls++;
            cursor = p.next_cursor as string | undefined;
            if (p.status !== "running" && p.status !== "awaiting_input") break;
          }
          assert.ok(polls >= 3, "polled during the pause");
          assert.match(text, /url=\[REDACTED\] done/, text);
          assert.ok(!text.includes(A_VAL.slice(0, 10)), text);
          await pollUntil(
            () => recordingText(home, s4).includes(" done\r\n") || undefined,
            "the recording",
          );
          assert.deepEqual(leaks(recordingText(home, s4), formsV), []);
        },
      );

      await step(
        "HELD: [4] session_screen while a full-screen program shows it (alternate screen, attributes)",
        async () => {
          const job = await A.ok("exec_start", {
            session_id: s4,
            command: [
              'printf "\\033[?1049h\\033[H"; v="$V"; printf "top %s\\n" "$v"; ' +
              'for ((i=0;i<${#v};i++)); do printf "\\033[4m%s\\033[24m" "${v:i:1}"; done; ' +
              'printf "\\033]0;%s\\007" "$v"; sleep 2; printf "\\033[?1049l"',
            ],
            env: V,
          });
          const screen = await pollUntil(async () => {
            const s = await A.call("session_screen", { session_id: s4 });
            return (s.lines as string[]).some((l) => l.startsWith("top ")) ? s : undefined;
          }, "the full-screen program");
          const text = (screen.lines as string[]).join("\n") + String(screen.title ?? "");
          assert.ok(!text.includes(A_VAL), text);
          assert.match(text, /top \[REDACTED\]/, text);
          await A.call("exec_wait", { job_id: job.job_id, timeout_ms: 10_000 });
          assert.deepEqual(leaks(recordingText(home, s4), formsV), []);
        },
      );

      // ── [5] approvals and lock races ─────────────────────────────────────────────────

      const approve = async (id: string) => {
        const res = await op(`/approvals/${id}/approve`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: "{}",
        });
        await res.body?.cancel();
        return res.status;
      };
      const usesOf = async (jobId: unknown) =>
        (await audit(op)).filter((r) => r.event === "vault.used" && r.data.job_id === jobId);

      const se5 = await A.session({ env: { L: { vault: "a-long" } } });
      await step(
        "HELD: [5] a confirm command gets no value while it waits; locked before approval it fails",
        async () => {
          const canary = `${dir}/approved-while-locked`;
          const job = await A.ok("exec_start", {
            session_id: sa,
            command: [`touch ${canary}; printf %s "$X" | sha256sum`],
            env: { X: { vault: "a-secret" } },
          });
          assert.equal(job.status, "pending_approval", shown(job));
          assert.deepEqual(await usesOf(job.job_id), [], "no value while waiting");
          const lock = await termada(home, ["lock"], env);
          assert.equal(lock.code, 0, lock.stderr);
          assert.equal(await approve(job.approval_id as string), 200);
          const w = await A.call("exec_wait", { job_id: job.job_id, timeout_ms: 10_000 });
          assert.equal(w.status, "failed", shown(w));
          assert.match(String(w.reason), /locked/i, shown(w));
          assert.ok(!exists(canary), "it ran");
          assert.deepEqual(await usesOf(job.job_id), []);
          // Locked: a new reference is VAULT_LOCKED before anything is reserved.
          const jobs0 = await A.jobCount();
          const r = await A.call("exec_run", {
            session_id: sa,
            command: ["true"],
            env: { X: { vault: "a-secret" } },
          });
          assert.equal(errorOf(r)?.code, "VAULT_LOCKED", shown(r));
          assert.equal(await A.jobCount(), jobs0);
        },
      );

      await step(
        "LIMIT: [5] a lock does not reach a session that already has a value (still masked)",
        async () => {
          // The vault is locked here (the step above): docs/VAULT.md "Locking and restarts".
          const st = await (await op("/vault")).json();
          assert.equal(st.unlocked, false);
          const r = await A.sh(se5, 'echo "${#L}"; echo "$L"');
          assert.equal(r.out, `${A_LONG.length}\n[REDACTED]\n`);
        },
      );

      await step(
        "HELD: [5] approved after lock + unlock: it runs once, with the value, masked",
        async () => {
          const unlock = await termada(home, ["unlock", "--identity", idFile], env);
          assert.equal(unlock.code, 0, unlock.stderr);
          const job = await A.ok("exec_start", {
            session_id: sa,
            command: [`touch ${dir}/approved; printf %s "$X" | sha256sum; echo "$X"`],
            env: { X: { vault: "a-secret" } },
          });
          assert.equal(job.status, "pending_approval", shown(job));
          for (const args of [["lock"], ["unlock", "--identity", idFile]]) {
            const r = await termada(home, args, env);
            assert.equal(r.code, 0, r.stderr);
          }
          assert.deepEqual(await usesOf(job.job_id), []);
          assert.equal(await approve(job.approval_id as string), 200);
          const w = await A.call("exec_wait", { job_id: job.job_id, timeout_ms: 10_000 });
          assert.equal(w.exit_code, 0, shown(w));
          const digest = Array.from(
            new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(A_VAL))),
            (b) => b.toString(16).padStart(2, "0"),
          ).join("");
          assert.ok(String(w.output).includes(digest), "the program got the value");
          assert.match(String(w.output), /^\[REDACTED\]$/m);
          assert.equal((await usesOf(job.job_id)).length, 1);
        },
      );

      await step(
        "HELD: [5] withdrawn by its agent, or its entry removed before approval: no value is taken",
        async () => {
          const j1 = await A.ok("exec_start", {
            session_id: sa,
            command: [`touch ${dir}/withdrawn; echo "$X"`],
            env: { X: { vault: "a-secret" } },
          });
          await A.call("exec_kill", { job_id: j1.job_id });
          assert.notEqual(await approve(j1.approval_id as string), 200);
          const j2 = await A.ok("exec_start", {
            session_id: sa,
            command: [`touch ${dir}/removed; echo "$X"`],
            env: { X: { vault: "a-temp" } },
          });
          const rm = await op("/vault/entries/a-temp", { method: "DELETE" });
          assert.equal(rm.status, 200, await rm.text());
          assert.equal(await approve(j2.approval_id as string), 200);
          const w = await A.call("exec_wait", { job_id: j2.job_id, timeout_ms: 10_000 });
          assert.equal(w.status, "failed", shown(w));
          assert.match(String(w.reason), /no entry "a-temp"/, shown(w));
          assert.ok(!exists(`${dir}/withdrawn`) && !exists(`${dir}/removed`));
          assert.deepEqual([...(await usesOf(j1.job_id)), ...(await usesOf(j2.job_id))], []);
        },
      );

      await step(
        "HELD: [5] an entry replaced: the old value stays masked, the new one too",
        async () => {
          const res = await op("/vault/entries/a-long", {
            method: "PUT",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ value_b64: btoa(`${A_LONG}-v2`) }),
          });
          assert.equal(res.status, 200, await res.text());
          const old = await A.sh(se5, 'echo "$L"');
          assert.equal(old.out, "[REDACTED]\n");
          const now = await A.sh(sa, 'echo "$L"; echo "${#L}"', {
            env: { L: { vault: "a-long" } },
          });
          assert.equal(now.out, `[REDACTED]\n${A_LONG.length + 3}\n`); // the longest match wins
          await A.ok("session_close", { session_id: se5 });
        },
      );

      // ── [6] exec_write {vault} misuse ────────────────────────────────────────────────

      await step("HELD: [6] a multi-line entry is refused at a prompt, nothing typed", async () => {
        const job = await A.ok("exec_start", {
          session_id: sa,
          command: ['read -r L; echo "got ${#L}"'],
        });
        await A.awaitingInput(job.job_id as string);
        const r = await A.call("exec_write", { job_id: job.job_id, vault: "a-multi" });
        assert.equal(errorOf(r)?.code, "INVALID_ARGUMENT", shown(r));
        assert.match(errorOf(r)!.message, /several lines/);
        assert.equal((await A.call("exec_poll", { job_id: job.job_id })).status, "awaiting_input");
        // Nothing was typed, and the audit says no value was used (lines checked first).
        assert.deepEqual(await usesOf(job.job_id), []);
        await A.ok("exec_write", { job_id: job.job_id, input: "xyz" });
        const w = await A.call("exec_wait", { job_id: job.job_id, timeout_ms: 10_000 });
        assert.match(String(w.output), /^xyz\ngot 3\n$/, shown(w)); // the echo, then the program
      });

      await step(
        "HELD: [6] into a finished job, into a running job that does not read: NOT_AWAITING_INPUT, no use",
        async () => {
          const done = await A.ok("exec_run", { session_id: sa, command: ["true"] });
          const running = await A.ok("exec_start", { session_id: sa, command: ["sleep 2"] });
          for (const j of [done, running]) {
            const r = await A.call("exec_write", { job_id: j.job_id, vault: "a-pw" });
            assert.equal(errorOf(r)?.code, "NOT_AWAITING_INPUT", shown(r));
            assert.deepEqual(await usesOf(j.job_id), []);
          }
          await A.call("exec_wait", { job_id: running.job_id, timeout_ms: 10_000 });
        },
      );

      await step("HELD: [6] both input and vault, or neither: INVALID_ARGUMENT", async () => {
        const job = await A.ok("exec_start", {
          session_id: sa,
          command: ['read -r L; echo "got $L"'],
        });
        await A.awaitingInput(job.job_id as string);
        for (const args of [{ input: "x", vault: "a-pw" }, {}, { vault: "a-pw", input: "" }]) {
          const r = await A.call("exec_write", { job_id: job.job_id, ...args });
          assert.equal(errorOf(r)?.code, "INVALID_ARGUMENT", shown(r));
        }
        await A.ok("exec_write", { job_id: job.job_id, input: "end" });
        await A.call("exec_wait", { job_id: job.job_id, timeout_ms: 10_000 });
      });

      await step(
        "LIMIT: [6] whatever reads the terminal gets the value: exec_write {vault} into `head -n1 | rev`",
        async () => {
          const job = await A.ok("exec_start", { session_id: sa, command: ["head -n1 | rev"] });
          await A.awaitingInput(job.job_id as string);
          await A.ok("exec_write", { job_id: job.job_id, vault: "a-pw" });
          const w = await A.call("exec_wait", { job_id: job.job_id, timeout_ms: 10_000 });
          assert.ok(!String(w.output).includes(A_PW), shown(w)); // the terminal's echo: masked
          assert.ok(String(w.output).includes(rev(A_PW)), shown(w)); // docs/VAULT.md: a prompt only
        },
      );

      await step(
        "LIMIT: [6] exec_write {vault} into a nested shell runs the value as a line, and its history keeps it",
        async () => {
          // docs/VAULT.md: "Whatever reads the terminal gets the value, a shell included."
          const job = await A.ok("exec_start", {
            session_id: sa,
            command: ["bash --norc --noprofile -i"],
          });
          await A.awaitingInput(job.job_id as string);
          await A.ok("exec_write", { job_id: job.job_id, vault: "a-pw" });
          await pollUntil(async () => {
            const p = await A.call("exec_poll", { job_id: job.job_id, wait_ms: 300 });
            return p.status === "awaiting_input" && /command not found/.test(String(p.output))
              ? p
              : undefined;
          }, "the nested shell ran the value");
          await A.ok("exec_write", {
            job_id: job.job_id,
            input: "history | tail -n 2 | rev; exit",
          });
          const w = await A.call("exec_wait", { job_id: job.job_id, timeout_ms: 10_000 });
          assert.match(String(w.output), /\[REDACTED\]: command not found/, shown(w));
          assert.ok(String(w.output).includes(rev(A_PW)), shown(w));
          assert.ok(!String(w.output).includes(A_PW), shown(w));
        },
      );

      // ── [7] limits and wire validation ───────────────────────────────────────────────

      await step(
        "HELD: [7] 256 references work, each audited; 257 variables are INVALID_ARGUMENT",
        async () => {
          const refs: Obj = {};
          for (let i = 0; i < 256; i++) refs[`V${i}`] = { vault: "a-secret" };
          const r = await A.call("exec_run", {
            session_id: sa,
            command: ['env | grep -c "^V[0-9]*=' + A_VAL.slice(0, 5) + '"; echo "$V255"'],
            env: refs,
            timeout_ms: 30_000,
          });
          assert.equal(r.exit_code, 0, shown(r));
          assert.equal(r.output, "256\n[REDACTED]\n", shown(r));
          assert.equal((await usesOf(r.job_id)).length, 256);
          const over = await A.call("exec_run", {
            session_id: sa,
            command: ["true"],
            env: { ...refs, V256: { vault: "a-secret" } },
          });
          assert.equal(errorOf(over)?.code, "INVALID_ARGUMENT", shown(over));
          assert.match(errorOf(over)!.message, /at most 256 variables/);
        },
      );

      await step(
        "HELD: [7] an unknown entry the rules allow is NOT_FOUND and nothing runs",
        async () => {
          const canary = `${dir}/unknown-ran`;
          const r = await A.call("exec_run", {
            session_id: sa,
            command: [`echo > ${canary}`],
            env: { X: { vault: "a-nothing" } },
          });
          assert.equal(errorOf(r)?.code, "NOT_FOUND", shown(r));
          assert.equal(errorOf(r)?.details?.key, "a-nothing");
          assert.ok(!exists(canary));
        },
      );

      await step(
        "HELD: [7] a 5-byte value is masked with stars; a 3-byte one (hand-made file) is never handed out",
        async () => {
          const r = await A.sh(sa, 'printf "%s|%s\\n" "${#T}" "$T"', {
            env: { T: { vault: "a-tiny" } },
          });
          assert.equal(r.out, "5|*****\n");
          const canary = `${dir}/tiny3-ran`;
          for (
            const args of [
              { session_id: sa, command: [`echo > ${canary}`], env: { T: { vault: "a-tiny3" } } },
              {
                mode: "background",
                command: ["sh", "-c", `echo > ${canary}`],
                env: { T: { vault: "a-tiny3" } },
              },
            ]
          ) {
            const x = await A.call("exec_run", args);
            const code = errorOf(x)?.code ?? (x.status === "failed" ? "failed" : undefined);
            assert.ok(code === "INVALID_ARGUMENT" || code === "failed", shown(x));
            assert.match(
              JSON.stringify(x),
              /cannot be used|cannot be redacted|at least 4 bytes/,
              shown(x),
            );
          }
          const s = await A.call("session_create", { env: { T: { vault: "a-tiny3" } } });
          assert.equal(errorOf(s)?.code, "INVALID_ARGUMENT", shown(s));
          assert.ok(!exists(canary));
          const prompt = await A.ok("exec_start", {
            session_id: sa,
            command: ['read -r L; echo "got ${#L}"'],
          });
          await A.awaitingInput(prompt.job_id as string);
          const w = await A.call("exec_write", { job_id: prompt.job_id, vault: "a-tiny3" });
          assert.equal(errorOf(w)?.code, "INVALID_ARGUMENT", shown(w));
          await A.ok("exec_write", { job_id: prompt.job_id, input: "" });
          await A.call("exec_wait", { job_id: prompt.job_id, timeout_ms: 10_000 });
        },
      );

      await step(
        "HELD: [7] a value with quotes, $(…), backticks and a backslash arrives byte for byte and runs nothing",
        async () => {
          const digest = Array.from(
            new Uint8Array(
              await crypto.subtle.digest("SHA-256", new TextEncoder().encode(metaValue)),
            ),
            (b) => b.toString(16).padStart(2, "0"),
          ).join("");
          const X = { X: { vault: "a-meta" } };
          const line = 'printf %s "$X" | sha256sum; echo "$X"';
          const bash = await A.sh(sa, line, { env: X });
          const ssh = await A.session({ shell: "sh" });
          const dash = await A.sh(ssh, line, { env: X });
          const bg = await A.call("exec_run", {
            mode: "background",
            command: ["sh", "-c", line],
            env: X,
          });
          const senv = await A.session({ env: X });
          const inEnv = await A.sh(senv, line);
          const outs: [string, string][] = [
            ["bash", bash.out],
            ["sh", dash.out],
            ["background", String(bg.output)],
            ["session env", inEnv.out],
          ];
          for (const [what, out] of outs) {
            assert.ok(out.includes(digest), `${what}: ${out}`);
            assert.match(out, /^\[REDACTED\]$/m, `${what}: ${out}`);
          }
          // At a prompt: typed as it is (IFS= read -r keeps every character).
          const prompt = await A.ok("exec_start", {
            session_id: sa,
            command: ['IFS= read -r L; printf %s "$L" | sha256sum'],
          });
          await A.awaitingInput(prompt.job_id as string);
          await A.ok("exec_write", { job_id: prompt.job_id, vault: "a-meta" });
          const w = await A.call("exec_wait", { job_id: prompt.job_id, timeout_ms: 10_000 });
          assert.ok(String(w.output).includes(digest), shown(w));
          for (const f of ["meta1", "meta2", "meta3"]) {
            assert.ok(!exists(`${dir}/${f}`), `${f}: part of the value ran`);
          }
          await A.ok("session_close", { session_id: ssh });
          await A.ok("session_close", { session_id: senv });
        },
      );

      await step(
        "HELD: [7] bad entry and variable names are refused by wire validation",
        async () => {
          const badEntries = [
            "../etc/passwd",
            "a/b",
            "a\nb",
            "a\u0000b",
            "a\u001b[31m",
            "-lead",
            "",
            "a b",
            "x".repeat(65),
            "a:b",
          ];
          const prompt = await A.ok("exec_start", {
            session_id: sa,
            command: ['read -r L; echo "got ${#L}"'],
          });
          await A.awaitingInput(prompt.job_id as string);
          for (const name of badEntries) {
            for (
              const [tool, args] of [
                ["exec_run", { session_id: sa, command: ["true"], env: { X: { vault: name } } }],
                ["session_create", { env: { X: { vault: name } } }],
                ["exec_write", { job_id: prompt.job_id, vault: name }],
              ] as [string, Obj][]
            ) {
              const r = await A.call(tool, args);
              assert.equal(
                errorOf(r)?.code,
                "INVALID_ARGUMENT",
                `${tool} ${JSON.stringify(name)}: ${shown(r)}`,
              );
            }
          }
          for (const variable of ["BASH_FUNC_x%%", "A=B", "1X", "A-B", "X Y", ""]) {
            const r = await A.call("exec_run", {
              session_id: sa,
              command: ["true"],
              env: { [variable]: { vault: "a-secret" } },
            });
            assert.equal(
              errorOf(r)?.code,
              "INVALID_ARGUMENT",
              `${JSON.stringify(variable)}: ${shown(r)}`,
            );
          }
          for (
            const ref of [
              { vault: "a-secret", value: "x" },
              { vault: 5 },
              { vault: ["a-secret"] },
              {},
            ]
          ) {
            const r = await A.call("exec_run", {
              session_id: sa,
              command: ["true"],
              env: { X: ref },
            });
            assert.equal(
              errorOf(r)?.code,
              "INVALID_ARGUMENT",
              `${JSON.stringify(ref)}: ${shown(r)}`,
            );
          }
          await A.ok("exec_write", { job_id: prompt.job_id, input: "" });
          await A.call("exec_wait", { job_id: prompt.job_id, timeout_ms: 10_000 });
        },
      );

      // ── what the daemon wrote ────────────────────────────────────────────────────────

      const heldForms = [
        ...formsV,
        ...formsL,
        ...registeredForms(A_PW),
        ...registeredForms(A_ML),
        ...registeredForms(B_VAL),
        ...registeredForms(metaValue),
      ];
      await step(
        "HELD: [4] the audit log (termada audit --json) holds names, never values",
        async () => {
          const r = await termada(home, ["audit", "-n", "5000", "--json"], env);
          assert.equal(r.code, 0, r.stderr);
          assert.match(r.stdout, /"vault\.used"/);
          assert.match(r.stdout, /"variable": "V255"/);
          assert.match(r.stdout, /\[vault:a-pw\]/); // input.written of exec_write {vault}
          assert.deepEqual(leaks(r.stdout, [...heldForms, A_TINY, A_TINY3, TOKEN_A, token]), []);
        },
      );

      await d.stop();
      await step(
        "HELD: [4] nothing in the state dir holds a value (recordings, spool, database, audit) nor did any reply",
        () => {
          for (const [path, bytes] of files(home)) {
            if (path.endsWith("operator-key.txt") || path.endsWith("vault.age")) continue;
            const text = new TextDecoder("latin1").decode(bytes);
            assert.deepEqual(leaks(text, [...heldForms, TOKEN_A]), [], `a value in ${path}`);
          }
          for (const reply of seen) {
            assert.deepEqual(leaks(reply, heldForms), [], reply.slice(0, 400));
          }
        },
      );
    } finally {
      await Deno.remove(home, { recursive: true });
      await Deno.remove(dir, { recursive: true });
    }
  },
});

// ═════════════════════════════════════════════════════════════════════════════════════════════
// [8] security.run_as: a real unprivileged user
// ═════════════════════════════════════════════════════════════════════════════════════════════

interface TestUser extends AsyncDisposable {
  name: string;
  uid: number;
  home: string;
}

async function createUser(): Promise<TestUser> {
  const name = `tmrv${crypto.randomUUID().slice(0, 8)}`;
  const r = await run(USERADD, ["--create-home", "--user-group", "--shell", "/bin/bash", name]);
  assert.equal(r.code, 0, `useradd: ${r.out}`);
  const uid = Number((await run("id", ["-u", name])).out.trim());
  return {
    name,
    uid,
    home: `/home/${name}`,
    async [Symbol.asyncDispose]() {
      await run("userdel", ["-r", "-f", name]);
    },
  };
}

async function sha256File(path: string): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", await Deno.readFile(path));
  return Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test({
  name: `vault attacks: security.run_as with a real user${
    CAN_RUN_AS ? "" : " (ignored: needs root and useradd)"
  }`,
  ignore: !CAN_RUN_AS,
  async fn(t) {
    await using user = await createUser();
    const env = { DENO_DIR, VA_TOKEN_A: TOKEN_A };
    const home = await homeWithConfig(
      CONFIG.replace("log:\n", `security:\n  run_as:\n    user: ${user.name}\nlog:\n`),
    );
    const bin = await Deno.makeTempDir({ prefix: "termada-vault-attack-bin-" });
    const seen: string[] = [];
    try {
      await using d = await startDaemon(home, { env });
      assert.match(d.stderr(), new RegExp(`sessions run as "${user.name}"`));
      await handMadeVault(d, [["a-secret", A_VAL], ["b-secret", B_VAL]]);
      const token = Deno.readTextFileSync(`${home}/token`).trim();
      await using ca = await stdioClient(home, ["--token", TOKEN_A], env);
      await using cb = await stdioClient(home, ["--agent", "b"], env);
      const A = new Agent(ca, seen);
      const B = new Agent(cb, seen);
      const sa = await A.session();
      const sb = await B.session();
      assert.equal((await B.sh(sb, "id -u")).out.trim(), String(user.uid));
      const D = d.proc.pid;
      const step = stepper(t, [A, B]);
      const sessionsDir = runAsSessionsDir(home);

      await step(
        "HELD: [8] token, vault, database, audit, config and the daemon user's ~/.config/termada: Permission denied",
        async () => {
          const out = await B.probe(
            sb,
            `for f in ${home}/token ${home}/vault.age ${home}/termada.db ${home}/config.yaml ` +
              `${home}/operator-key.txt /root/.config/termada/config.yaml; do head -c 200 $f; done; ` +
              `ls ${home} /root /root/.config/termada; ls ${sessionsDir}`,
          );
          assert.ok(!out.includes(token) && !out.includes("AGE-SECRET-KEY"), out);
          assert.doesNotMatch(out, /termada\.db\n|vault\.age\n/, out);
          assert.match(out, /Permission denied|No such file/, out);
        },
      );

      await step(
        "HELD: [8] the daemon's processes: /proc environ, fd, root, cwd refused, signals EPERM, ptrace refused",
        async () => {
          const out = await B.probe(
            sb,
            `tr '\\0' '\\n' < /proc/${D}/environ | head -3; ls /proc/${D}/fd; cat /proc/${D}/root${home}/token; ` +
              `ls /proc/${D}/cwd/; kill -0 ${D}; echo kill=$?; kill -STOP ${D}; echo stop=$?; ` +
              `gdb -p ${D} -batch -ex 'info proc' </dev/null | tail -2`,
          );
          assert.ok(!out.includes(token), out);
          // Under run_as the session's private /proc (hidepid=invisible) hides the daemon.
          assert.match(out, /environ: (Permission denied|No such file)/, out);
          assert.match(out, /^kill=1$/m, out);
          assert.match(out, /^stop=1$/m, out);
          assert.match(
            out,
            /ptrace: Operation not permitted|No such process|process \d+ not found/i,
            out,
          );
          const st = await run("ps", ["-o", "stat=", "-p", String(D)]);
          assert.doesNotMatch(st.out, /T/, "the daemon was stopped");
        },
      );

      await step(
        "HELD: [8] setuid programs gain nothing under no_new_privs: a setuid-root id, su, passwd, newgrp, sudo",
        async () => {
          // A setuid-root copy of id, made by the (root) test where the user may run it: with
          // no_new_privs the kernel does not honour the bit, so no euid=0.
          const suid = `${bin}/suid-id`;
          Deno.chmodSync(bin, 0o755);
          Deno.copyFileSync("/usr/bin/id", suid);
          Deno.chmodSync(suid, 0o4755);
          const shadow = await sha256File("/etc/shadow");
          const passwd = await sha256File("/etc/passwd");
          // Each prints a 0 (uid or gid) if it gained root; their messages go nowhere (and
          // without a controlling terminal su cannot stop at a password prompt).
          const { out } = await B.sh(
            sb,
            `grep NoNewPrivs /proc/self/status; ${suid}; ls -l ${suid} | cut -c1-10; ` +
              `setsid -w su -c 'id -u; touch ${user.home}/su-ran' root </dev/null 2>/dev/null; echo su=$?; ` +
              `setsid -w passwd -d root </dev/null >/dev/null 2>&1; echo pw-tool=$?; ` +
              `echo 'id -g' | setsid -w newgrp root 2>/dev/null; echo newgrp=$?; ` +
              `if command -v sudo >/dev/null; then sudo -n id -u 2>/dev/null; echo sudo=$?; else echo sudo=absent; fi; ` +
              `id -u`,
          );
          assert.match(out, /NoNewPrivs:\s+1/);
          assert.match(out, /^-rwsr-xr-x$/m, out);
          assert.match(out, new RegExp(`^uid=${user.uid}\\(`, "m"), out);
          assert.doesNotMatch(out, /euid=0/, out);
          assert.match(out, /^su=[1-9]\d*$/m, out);
          assert.match(out, /^pw-tool=[1-9]\d*$/m, out); // ("passwd=…" would be masked as a key)
          assert.match(out, /^sudo=([1-9]\d*|absent)$/m, out);
          assert.doesNotMatch(out, /^0$/m, out);
          assert.ok(!exists(`${user.home}/su-ran`), "su ran a command");
          assert.equal(await sha256File("/etc/shadow"), shadow);
          assert.equal(await sha256File("/etc/passwd"), passwd);
        },
      );

      await step(
        "HELD: [8] no raw disk, no mounts, no user namespace around the cover",
        async () => {
          const out = await B.probe(
            sb,
            `head -c 1024 ${ROOT_DEV} | wc -c; mount -t tmpfs none /tmp; echo mount=$?; umount ${sessionsDir}; echo umount=$?; ` +
              `unshare -Urm sh -c 'umount -l ${home}; cat ${home}/token'; echo userns=$?; ` +
              `nsenter -t ${D} -m cat ${home}/token; echo nsenter=$?`,
          );
          assert.ok(!out.includes(token), out);
          if (ROOT_DEV.startsWith("/dev/null")) assert.ok(true);
          else assert.match(out, new RegExp(`${ROOT_DEV}.*Permission denied`), out);
          for (const k of ["mount", "umount", "userns", "nsenter"]) {
            assert.doesNotMatch(out, new RegExp(`^${k}=0$`, "m"), out);
          }
        },
      );

      await step(
        "HELD: [8] the own scratch directory: nothing can be created or replaced there",
        async () => {
          const mine = `${sessionsDir}/${sb}`;
          const { out } = await B.sh(
            sb,
            `touch ${mine}/x; echo touch=$?; ln -s /etc/shadow ${mine}/cmd.sh; echo ln=$?; ` +
              `mv ${mine}/bashrc ${mine}/b2; echo mv=$?; mkdir ${mine}/d; echo mkdir=$?; ls ${sessionsDir}; echo ls=$?`,
          );
          for (const k of ["touch", "ln", "mv", "mkdir", "ls"]) {
            assert.match(out, new RegExp(`^${k}=[1-9]\\d*$`, "m"), out);
          }
          assert.ok(!exists(`${mine}/x`) && !exists(`${mine}/cmd.sh`) && exists(`${mine}/bashrc`));
        },
      );

      await step(
        "HELD: [8] B cannot read A's session environment nor A's staged cmd.sh, though both are the same user",
        async () => {
          const se = await A.session({ env: { ASEC: { vault: "a-secret" } } });
          const pid = (await A.sh(se, "echo $$")).out.trim();
          const job = await A.ok("exec_start", {
            session_id: sa,
            command: ["sleep 20"],
            env: { AJOB: { vault: "a-secret" } },
          });
          const staged = `${sessionsDir}/${sa}/cmd.sh`;
          await pollUntil(() => exists(staged) || undefined, "A's staged script");
          assert.equal(Deno.statSync(staged).uid, user.uid, "the user's own file");
          const out = await B.probe(
            sb,
            `cat /proc/${pid}/environ > /dev/null; grep -a -z -h -E '^(ASEC|AJOB)=' /proc/[0-9]*/environ 2>/dev/null | ` +
              `tr '\\0' '\\n'; cat ${staged}; cat /proc/${pid}/root${staged}; echo swept`,
          );
          assert.match(out, /swept/);
          assert.match(out, /environ: (Permission denied|No such file)/, out);
          assert.ok(!out.includes(A_VAL), `A's value was read:\n${out}`);
          await A.call("exec_kill", { job_id: job.job_id, grace_ms: 200 });
          await A.ok("session_close", { session_id: se });
        },
      );

      await step(
        "LIMIT: [8] files are shared by all sessions of the run_as user: a value A's program writes is B's",
        async () => {
          const f = `/tmp/.termada-attack-${crypto.randomUUID()}`;
          await A.sh(sa, `printf %s "$X" > ${f}`, { env: { X: { vault: "a-secret" } } });
          try {
            const plain = await B.sh(sb, `cat ${f}; echo`);
            assert.equal(plain.out, "[REDACTED]\n"); // the daemon-wide set masks it in B's output
            assert.ok((await B.probe(sb, `cat ${f}; echo`)).includes(A_VAL)); // docs: their files are shared
          } finally {
            await Deno.remove(f).catch(() => {});
          }
        },
      );

      await step(
        "HELD: [8] under run_as a shim started with `--token T` is out of the session's view (private hidepid /proc)",
        () => cannotImpersonateA(B, sb, d.port, TOKEN_FROM_ARGV),
      );

      await step(
        "HELD: [8] under run_as too, a `${VA_TOKEN_A}` config token is not in the session's environment",
        () => cannotImpersonateA(B, sb, d.port, '"$VA_TOKEN_A"'),
      );

      await step(
        "HELD: [8] `termada dashboard --open` puts no operator token on any argv (a private page opens it)",
        async () => {
          // A stand-in for the browser xdg-open starts: it keeps the URL in its argv while it
          // runs, as a browser does.
          const ready = `${bin}/ready`;
          const stop = `${bin}/stop`;
          Deno.writeTextFileSync(
            `${bin}/xdg-open`,
            `#!/bin/sh\ntouch ${ready}\nwhile [ ! -e ${stop} ]; do sleep 0.1; done\n`,
            { mode: 0o755 },
          );
          const dash = new Deno.Command(Deno.execPath(), {
            args: [...DENO_ARGS, "dashboard", "--open"],
            env: termadaEnv(home, { ...env, PATH: `${bin}:${Deno.env.get("PATH")}` }),
            stdout: "null",
            stderr: "null",
          }).spawn();
          try {
            await pollUntil(() => exists(ready) || undefined, "the browser", 20_000);
            const out = await B.probe(
              sb,
              "ps -eww -o args | grep -o 'token=[0-9a-f]*' | head -n1",
            );
            assert.ok(!out.includes(token), `the operator token was read:\n${out}`);
          } finally {
            Deno.writeTextFileSync(stop, "");
            await dash.status;
          }
        },
      );
    } finally {
      await Deno.remove(runAsSessionsDir(home), { recursive: true }).catch(() => {});
      await Deno.remove(home, { recursive: true });
      await Deno.remove(bin, { recursive: true });
    }
  },
});

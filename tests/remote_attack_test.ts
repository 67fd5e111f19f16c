/**
 * Attack probes against remote-server support, from the outside, as an agent would: a real
 * daemon, the official MCP SDK client over the stdio shim, real OpenSSH `sshd` processes on
 * 127.0.0.1 (src/remote/_test_sshd.ts), the operator API with the token from `<state>/token`.
 *
 * Each test is one attack and asserts the safe outcome. `HELD` ones held from the start;
 * `FIXED` ones broke a promise in the first review (their comment says how) and were fixed.
 * Canary files (`pwned-*`) are what a denied program would create; the safe outcome is that they
 * never exist.
 *
 * The policy most probes use is the smallest realistic one: `deny: ["touch *"]` (a deny list),
 * or an allow list where that matters. On a server there is no exec gate, so the static policy
 * is the whole boundary there (docs/REMOTE.md "What is different"): what it lets through runs.
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  call,
  homeWithConfig,
  operatorFetch,
  type RunningDaemon,
  startDaemon,
  stdioClient,
} from "./_daemon.ts";
import { denoDir, pollUntil } from "./_clients.ts";
import { freePort, sshdAvailable, TestSshd } from "../src/remote/_test_sshd.ts";

const ignore = !sshdAvailable();
const DENO_DIR = await denoDir();

type McpClient = Client & AsyncDisposable;
type Structured = Record<string, unknown>;

interface Err {
  error: { code: string; message: string; details?: Record<string, unknown> };
}

const codeOf = (r: Structured): string | undefined => (r as unknown as Err).error?.code;

function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Polls until `path` exists (a canary some remote process may still be creating), or not. */
async function appears(path: string, ms = 3000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (exists(path)) return true;
    await new Promise((r) => setTimeout(r, 25));
  }
  return exists(path);
}

function serverYaml(name: string, port: number, user: string, tags: string[] = []): string {
  return `  - name: ${name}\n    host: 127.0.0.1\n    port: ${port}\n    user: ${user}\n    tags: [${
    tags.join(", ")
  }]\n`;
}

/** A HOME for the daemon whose ~/.ssh/id_ed25519 is the key `sshd` accepts. */
function sshHome(sshd: TestSshd | undefined, parent?: string): string {
  const home = Deno.makeTempDirSync({ prefix: "termada-attack-home-", dir: parent });
  Deno.mkdirSync(`${home}/.ssh`, { mode: 0o700 });
  if (sshd) Deno.writeTextFileSync(`${home}/.ssh/id_ed25519`, sshd.clientKey, { mode: 0o600 });
  return home;
}

interface Rig extends AsyncDisposable {
  sshd: TestSshd | undefined;
  home: string;
  state: string;
  /** A scratch directory for canaries and attack files (removed at the end). */
  dir: string;
  d: RunningDaemon;
  c: McpClient;
  env: Record<string, string>;
  op: (path: string, init?: RequestInit) => Promise<Response>;
  /** Another agent's client, closed with the rig. */
  agent(name: string): Promise<McpClient>;
}

interface RigOptions {
  /** No sshd (local file probes). */
  noSshd?: boolean;
  /** Parent of the daemon's HOME (default: the system temp dir). */
  homeParent?: string;
  /** TERMADA_HOME to use instead of a fresh one (its config.yaml is written). */
  stateDir?: string;
}

/**
 * sshd (optional) + a daemon whose config is `config(sshd, dir)` + an MCP client as agent
 * "dev". Everything is closed and removed at the end, in reverse order.
 */
async function rig(
  config: (sshd: TestSshd | undefined, dir: string, user: string) => string,
  o: RigOptions = {},
): Promise<Rig> {
  const undo: (() => unknown)[] = [];
  const dispose = async () => {
    for (const f of undo.reverse()) {
      try {
        await f();
      } catch {
        // best effort
      }
    }
  };
  try {
    const sshd = o.noSshd ? undefined : await TestSshd.start();
    if (sshd) undo.push(() => sshd[Symbol.asyncDispose]());
    const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "termada-attack-" }));
    undo.push(() => Deno.remove(dir, { recursive: true }));
    const home = sshHome(sshd, o.homeParent);
    undo.push(() => Deno.remove(home, { recursive: true }));
    const user = sshd?.user ?? "root";
    const text = config(sshd, dir, user);
    let state: string;
    if (o.stateDir) {
      state = o.stateDir;
      Deno.writeTextFileSync(`${state}/config.yaml`, text);
    } else {
      state = await homeWithConfig(text);
      undo.push(() => Deno.remove(state, { recursive: true }));
    }
    const env = { HOME: home, SSH_AUTH_SOCK: "", DENO_DIR };
    const d = await startDaemon(state, { env });
    undo.push(() => d.stop());
    const c = await stdioClient(state, ["--agent", "dev"], env);
    undo.push(() => c.close());
    return {
      sshd,
      home,
      state,
      dir,
      d,
      c,
      env,
      op: operatorFetch(d),
      async agent(name: string) {
        const other = await stdioClient(state, ["--agent", name], env);
        undo.push(() => other.close());
        return other;
      },
      [Symbol.asyncDispose]: dispose,
    };
  } catch (err) {
    await dispose();
    throw err;
  }
}

const DENY_TOUCH = `policies:
  default:
    deny: ["touch *"]
`;

async function remoteSession(
  c: Client,
  args: Record<string, unknown> = {},
): Promise<string> {
  const s = await call(c, "session_create", { target: "box", ...args });
  assert.equal(s.target, "box", JSON.stringify(s));
  return s.session_id as string;
}

async function fleet(c: Client, command: string[], servers = ["box"]): Promise<Structured> {
  return await call(c, "fleet_run", { command, servers, timeout_ms: 20_000 });
}

interface Target {
  server: string;
  status: string;
  exit_code?: number;
  output: string;
}
const targetsOf = (r: Structured) => r.targets as Target[];

async function auditRecords(state: string): Promise<
  { seq: number; event: string; actor: { id: string }; data: Record<string, unknown> }[]
> {
  const names: string[] = [];
  for await (const e of Deno.readDir(`${state}/audit`)) {
    if (e.isFile && e.name.endsWith(".jsonl")) names.push(e.name);
  }
  names.sort();
  const out = [];
  for (const n of names) {
    for (const line of (await Deno.readTextFile(`${state}/audit/${n}`)).split("\n")) {
      if (line.trim()) out.push(JSON.parse(line));
    }
  }
  return out;
}

async function auditText(state: string): Promise<string> {
  return (await auditRecords(state)).map((r) => JSON.stringify(r)).join("\n");
}

interface Pending {
  approval_id: string;
  command: string[];
  owner: string;
  action?: { kind: string };
}

async function pendingOf(r: Rig, kind: string, n = 1): Promise<Pending[]> {
  return await pollUntil(
    async () => {
      const list = await (await r.op("/approvals")).json() as { approvals: Pending[] };
      const mine = list.approvals.filter((a) => a.action?.kind === kind);
      return mine.length >= n ? mine : undefined;
    },
    `${n} ${kind} approval(s) pending`,
    15_000,
  );
}

async function decide(r: Rig, id: string, approve: boolean, reason = "test"): Promise<number> {
  const res = await r.op(`/approvals/${id}/${approve ? "approve" : "deny"}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(approve ? {} : { reason }),
  });
  await res.body?.cancel();
  return res.status;
}

// ═════════════════════════════════════════════════════════════════════════════════════════════
// fleet_run and commands on servers: the static policy is the whole boundary there
// ═════════════════════════════════════════════════════════════════════════════════════════════

Deno.test({
  name: "HELD fleet_run: argv words reach the server literally; denied forms never run",
  ignore,
  async fn() {
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("box", s!.port, u)}${DENY_TOUCH}`
    );
    const x = `${r.dir}/pwned-fleet`;
    // Words a login shell would interpret are one literal argument each.
    const words = [
      `$(touch ${x})`,
      `\`touch ${x}\``,
      `; touch ${x}`,
      `\ntouch ${x}\n`,
      `'; touch ${x}; '`,
      `"; touch ${x}; "`,
      `\\'; touch ${x}; #`,
      `$'\\x41'`,
      "-n",
      `| touch ${x}`,
      `&& touch ${x}`,
      `> ${x}`,
      "*",
      "~",
      "{a,b}",
      "!!",
    ];
    const ok = await fleet(r.c, ["printf", "[%s]", ...words]);
    const t = targetsOf(ok)[0]!;
    assert.equal(t.status, "exited", JSON.stringify(ok));
    assert.equal(t.output, words.map((w) => `[${w}]`).join(""));
    // A reserved word or an assignment in first position is a program name, not syntax.
    for (const first of ["if", `X=1`, "!", "{", "time"]) {
      const rr = await fleet(r.c, [first, "touch", x]);
      if (codeOf(rr) === undefined) assert.notEqual(targetsOf(rr)[0]!.exit_code, 0, first);
    }
    const denied: string[][] = [
      ["touch", x],
      [`touch ${x}`],
      [`echo ok; touch ${x}`],
      [`echo ok\ntouch ${x}`],
      [`echo $(touch ${x})`],
      [`echo \`touch ${x}\``],
      ["sh", "-c", `touch ${x}`],
      ["bash", "-c", `echo hi && touch ${x}`],
      ["env", "A=1", "touch", x],
      ["env", "-S", `touch ${x}`],
      ["nice", "touch", x],
      ["timeout", "5", "touch", x],
      ["nohup", "touch", x],
      ["sudo", "touch", x],
      ["command", "touch", x],
      ["exec", "touch", x],
      ["/usr/bin/touch", x],
      ["xargs", "-a", "/etc/hostname", "touch"],
      ["find", r.dir, "-maxdepth", "0", "-exec", "touch", x, ";"],
      ["bash", `${r.dir}/script.sh`],
      ["python3", "-c", "print(1)"],
      ["perl", "-e", "1"],
      ["sh", "-c", "$X"],
      ["sh", "-c", `t=touch; $t ${x}`],
      ["sh", "-c", `eval "touch ${x}"`],
      [`{touch,${x}}`],
      [`tou''ch ${x}`],
      [`t\\ouch ${x}`],
      ["bash", "-c", `trap 'touch ${x}' EXIT`],
      ["ssh", "localhost", `touch ${x}`],
    ];
    for (const command of denied) {
      const rr = await fleet(r.c, command);
      assert.equal(
        codeOf(rr),
        "DENIED_BY_POLICY",
        `${JSON.stringify(command)}: ${JSON.stringify(rr)}`,
      );
    }
    assert.equal(exists(x), false, "a denied command ran on the server");
  },
});

Deno.test({
  name: "FIXED fleet_run: programs that run other programs hide a denied one (setpriv, prlimit, …)",
  ignore,
  async fn() {
    // Was a hole, now fixed: the static wrapper table (src/policy/_wrappers.ts) knows env, nice, timeout, sudo,
    // xargs, find -exec…, but not setpriv, prlimit, unshare, strace, ltrace, valgrind,
    // capsh, gdb -ex, tar --to-command/--checkpoint-action, make --eval, man -P, sg,
    // ssh-agent, dbus-run-session, systemd-run… With a deny list they are "allowed: no deny
    // rule matches" and the denied program they start runs on the server (locally the exec
    // gate would see that exec; on a server nothing does).
    // Fix: src/policy/policy.ts `decide` / `gateFiles` — when `execGate` is false (every remote
    // decision), a deny/confirm-only policy cannot be sound: treat any program not known to be
    // a leaf (a curated list of programs that never exec) as opaque, or require an allow list
    // for server commands (policy_port.ts `decide` with `opts.remote`); at least add these
    // programs to _wrappers.ts.
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("box", s!.port, u)}${DENY_TOUCH}`
    );
    const ran: string[] = [];
    const probes: [string, (x: string) => string[]][] = [
      ["setpriv", (x) => ["setpriv", "touch", x]],
      ["prlimit", (x) => ["prlimit", "touch", x]],
      ["unshare", (x) => ["unshare", "touch", x]],
      ["strace", (x) => ["strace", "-f", "-o", "/dev/null", "touch", x]],
      ["tar", (x) => ["tar", "-cf", "/dev/null", `--to-command=touch ${x}`, "/etc/hostname"]],
      ["gdb", (x) => ["gdb", "-batch", "-ex", `shell touch ${x}`]],
    ];
    for (const [prog, argv] of probes) {
      if (!["/usr/bin", "/usr/sbin", "/bin"].some((d) => exists(`${d}/${prog}`))) continue;
      const x = `${r.dir}/pwned-${prog}`;
      const rr = await fleet(r.c, argv(x));
      if (await appears(x, 500)) {
        ran.push(`${prog}: ${JSON.stringify(argv(x))} → ${codeOf(rr) ?? "ran"}`);
      }
    }
    assert.deepEqual(
      ran,
      [],
      `"touch *" is denied, yet it ran on the server through:\n${ran.join("\n")}`,
    );
  },
});

Deno.test({
  name: "FIXED fleet_run: a script written with allowed commands and run by its path is not opaque",
  ignore,
  async fn() {
    // Was a hole, now fixed: `bash x.sh` is opaque on servers (no exec gate), but running the same file by its
    // path (`/tmp/x.sh`, `./x.sh`) is decided as a program named "x.sh": a deny list lets it
    // through, and what the script runs is never seen. Both steps are allowed by
    // `deny: ["touch *"]`.
    // Fix: src/policy/_analyze.ts — a program given as a path (or any name that is not a
    // system program) is a program file; `gateFiles` in policy.ts then makes it opaque without
    // an exec gate, like `bash x.sh`.
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("box", s!.port, u)}${DENY_TOUCH}`
    );
    const x = `${r.dir}/pwned-script`;
    const script = `${r.dir}/job.sh`;
    const w = await fleet(r.c, [
      "sh",
      "-c",
      `printf '#!/bin/sh\\ntouch ${x}\\n' > ${script} && chmod +x ${script}`,
    ]);
    assert.equal(targetsOf(w)[0]?.exit_code, 0, JSON.stringify(w));
    const run = await fleet(r.c, [script]);
    assert.equal(
      await appears(x, 1000),
      false,
      `"touch *" is denied, yet running ${script} by its path touched ${x}: ${JSON.stringify(run)}`,
    );
  },
});

Deno.test({
  name:
    "FIXED fleet_run: a one-word line is decided as bash but run by `sh -c` (dash): $'…' differs",
  ignore,
  async fn() {
    // Was a hole, now fixed: a one-word fleet command becomes `sh -c <line>` on the server (remote.ts
    // `fleetRun`), but the policy parses the line as bash (mvdan-sh). In bash `$'\' ; touch X ;
    // #'` is one ANSI-C string, so the policy sees only `echo`; dash has no `$'…'`, reads `$`,
    // then `'\'`, then runs `touch X`. Even an allow list (`allow: ["echo *"]`) lets it run.
    // Fix: decide the line in the dialect that runs it — src/policy/_analyze.ts `analyzeLine`
    // with a POSIX mode (mvdan-sh LangPOSIX) for `sh -c` payloads and one-word fleet lines,
    // and flag bash-only syntax (`$'`, `$"`, `[[`, brace expansion…) as opaque there; or run
    // one-word fleet lines with the shell the policy parsed for (bash) and refuse where absent.
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("box", s!.port, u)}policies:\n  default:\n    allow: ["echo *"]\n`
    );
    const x = `${r.dir}/pwned-dialect`;
    const rr = await fleet(r.c, [`echo $'\\' ; touch ${x} ; #'`]);
    assert.equal(
      await appears(x, 1000),
      false,
      `with allow: ["echo *"] the fleet line ran touch on the server: ${JSON.stringify(rr)}`,
    );
  },
});

Deno.test({
  name:
    "FIXED fleet_run: a login script's output chooses which process group the timeout kill hits",
  ignore,
  async fn() {
    // Was a hole, now fixed: on timeout, the fleet kills `-<pid>` where pid is the first `termada-fleet-pid:N`
    // in stdout (fleet.ts `Capture.stdout`, `killRemote`: `kill -s KILL -- -N`). Output of the
    // server's login scripts comes before the real mark, and an agent can write those scripts
    // with allowed commands (Debian's bash sources ~/.bashrc for every `ssh host cmd`). So the
    // agent picks what Termada kills on the server — any process group of the SSH user, and
    // `termada-fleet-pid:1` (accepted by /^[1-9]…/) makes it `kill -KILL -- -1`: every process
    // the SSH user may signal (as root: the whole server). Here the "login script" is a file the
    // agent writes through fleet_run, sourced by a test sshd through BASH_ENV (so that this test
    // does not edit the server user's real ~/.bashrc, which Debian's bash sources for sshd
    // commands), and the victim is a `sleep` in its own process group, not -1.
    // Fix: src/remote/fleet.ts — print the mark with a per-call nonce
    // (`echo termada-fleet-pid:<nonce>:$$`) and accept only that line; refuse pid ≤ 1; better,
    // kill by the nonce (`pkill -KILL -f` on a marker env var) or rely on the channel close /
    // the `signal` request, not on a pid read from output.
    const base = await TestSshd.start();
    const plant = `${base.dir}/login-script.sh`;
    await base.stop();
    const cfg = Deno.readTextFileSync(`${base.dir}/sshd_config`) +
      // SHLVL ≥ 2: bash then reads BASH_ENV instead of ~/.bashrc (shell.c run_startup_files).
      `SetEnv BASH_ENV=${plant} SHLVL=5\n`;
    Deno.writeTextFileSync(`${base.dir}/sshd_config2`, cfg);
    const sshd = new Deno.Command("/usr/sbin/sshd", {
      args: ["-D", "-e", "-f", `${base.dir}/sshd_config2`],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    const victim = new Deno.Command("setsid", { args: ["sleep", "300"], stdin: "null" }).spawn();
    const home = sshHome(base);
    let state: string | undefined;
    try {
      await pollUntil(async () => {
        try {
          (await Deno.connect({ hostname: "127.0.0.1", port: base.port })).close();
          return true;
        } catch {
          return undefined;
        }
      }, "the test sshd listens");
      state = await homeWithConfig(
        `servers:\n${serverYaml("box", base.port, base.user)}${DENY_TOUCH}`,
      );
      const env = { HOME: home, SSH_AUTH_SOCK: "", DENO_DIR };
      await using _d = await startDaemon(state, { env });
      await using c = await stdioClient(state, ["--agent", "dev"], env);
      // The agent writes the login script with an allowed command…
      const w = await fleet(c, [
        "sh",
        "-c",
        `printf 'echo termada-fleet-pid:${victim.pid}\\n' > ${plant}`,
      ]);
      assert.equal(targetsOf(w)[0]?.exit_code, 0, JSON.stringify(w));
      // …then runs anything that times out.
      const t = await call(c, "fleet_run", {
        command: ["sleep", "6"],
        servers: ["box"],
        timeout_ms: 1500,
      });
      assert.equal(targetsOf(t)[0]?.status, "timed_out", JSON.stringify(t));
      let timer: ReturnType<typeof setTimeout> | undefined;
      const killed = await Promise.race([
        victim.status.then(() => true),
        new Promise<boolean>((res) => timer = setTimeout(() => res(false), 3000)),
      ]);
      clearTimeout(timer);
      assert.equal(
        killed,
        false,
        `Termada's timeout cleanup killed process group ${victim.pid}, chosen by the agent`,
      );
    } finally {
      await Deno.remove(home, { recursive: true }).catch(() => {});
      if (state) await Deno.remove(state, { recursive: true }).catch(() => {});
      try {
        victim.kill("SIGKILL");
      } catch {
        // already dead (killed by the attack)
      }
      await victim.status;
      sshd.kill("SIGTERM");
      await sshd.status;
      await base[Symbol.asyncDispose]();
    }
  },
});

Deno.test({
  name:
    "HELD fleet targets: names and tags reach no denied server; 256 bound holds with tags+names",
  ignore,
  async fn() {
    const down = freePort();
    await using r = await rig((_s, _d, u) => {
      let y = "servers:\n";
      for (let i = 0; i < 300; i++) {
        const tags = i < 150 ? ["a"] : ["b"];
        if (i === 7) tags.push("secret");
        y += serverYaml(`s${i}`, down, u, tags);
      }
      return `${y}policies:
  default:
    deny: ["touch *"]
    servers:
      deny: ["s3", "tag:secret"]
`;
    }, { noSshd: true });
    const f = (args: Record<string, unknown>) =>
      call(r.c, "fleet_run", { command: ["true"], timeout_ms: 2000, ...args });
    // A tag that covers a denied server denies the whole call; so does naming it, or a tag rule.
    assert.equal(codeOf(await f({ tags: ["a"] })), "DENIED_BY_POLICY");
    assert.equal(codeOf(await f({ servers: ["s1", "s3"] })), "DENIED_BY_POLICY");
    assert.equal(codeOf(await f({ servers: ["s7"] })), "DENIED_BY_POLICY");
    assert.equal(codeOf(await call(r.c, "session_create", { target: "s7" })), "DENIED_BY_POLICY");
    // Bounds: names + tags together are counted after the union; duplicates count once.
    const names = Array.from({ length: 200 }, (_, i) => `s${150 + (i % 150)}`);
    assert.equal(codeOf(await f({ servers: names.slice(0, 150), tags: ["b"] })), undefined);
    const more = Array.from({ length: 140 }, (_, i) => `s${10 + i}`).filter((n) =>
      n !== "s7" && n !== "s3"
    );
    assert.equal(codeOf(await f({ servers: more, tags: ["b"] })), "INVALID_ARGUMENT");
    const dup = await f({ servers: Array.from({ length: 256 }, () => "s1") });
    assert.equal(targetsOf(dup).length, 1, JSON.stringify(dup));
    assert.equal(
      codeOf(await f({ servers: Array.from({ length: 257 }, (_, i) => `s${i + 10}`) })),
      "INVALID_ARGUMENT",
    );
    // A pattern is not a name (schema or inventory refuses it).
    assert.ok(["NOT_FOUND", "INVALID_ARGUMENT"].includes(codeOf(await f({ servers: ["*"] }))!));
    assert.equal(codeOf(await f({ tags: ["*"] })), "INVALID_ARGUMENT");
  },
});

// ═════════════════════════════════════════════════════════════════════════════════════════════
// Sessions on a server: commands, typed lines, the session's environment
// ═════════════════════════════════════════════════════════════════════════════════════════════

Deno.test({
  name: "HELD remote session: forms the static policy cannot see through are denied (fail closed)",
  ignore,
  async fn() {
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("box", s!.port, u)}${DENY_TOUCH}`
    );
    const sid = await remoteSession(r.c);
    const x = `${r.dir}/pwned-session`;
    const script = `${r.dir}/s.sh`;
    Deno.writeTextFileSync(script, `touch ${x}\n`);
    const run = (command: string[], env?: Record<string, string>) =>
      call(r.c, "exec_run", { session_id: sid, command, ...(env ? { env } : {}) });
    const denied: [string[], Record<string, string>?][] = [
      [["bash", script]],
      [["sh", script]],
      [[`sh < ${script}`]],
      [[`. ${script}`]],
      [[`source ${script}`]],
      [["python3", "-c", "import os; os.system('true')"]],
      [["sh", "-c", "$X"]],
      [[`eval "$X"`]],
      [[`$(echo touch) ${x}`]],
      [[`tou''ch ${x}`]],
      [[`alias t=touch`]],
      [[`PROMPT_COMMAND='touch ${x}'`]],
      [[`trap 'touch ${x}' DEBUG`]],
      [[`x='a[$(touch ${x})]'; echo $((x))`]],
      [["bash", "-c", "true"], { BASH_ENV: `$(touch ${x})` }],
      [["true"], { LD_PRELOAD: `${r.dir}/x.so` }],
      [["true"], { PS1: "Password: " }],
    ];
    for (const [command, env] of denied) {
      const rr = await run(command, env);
      assert.equal(
        codeOf(rr),
        "DENIED_BY_POLICY",
        `${JSON.stringify(command)}: ${JSON.stringify(rr)}`,
      );
    }
    // Lines typed into a shell that reads commands on the server pass the policy as commands.
    const repl = await run(["sh"]);
    assert.equal(repl.status, "awaiting_input", JSON.stringify(repl));
    const typed = await call(r.c, "exec_write", { job_id: repl.job_id, input: `touch ${x}` });
    assert.equal(codeOf(typed), "DENIED_BY_POLICY", JSON.stringify(typed));
    const secret = await call(r.c, "exec_write", {
      job_id: repl.job_id,
      input: `touch ${x}`,
      secret: true,
    });
    assert.equal(codeOf(secret), "DENIED_BY_POLICY", "the agent's secret flag skips nothing");
    assert.equal(await appears(x, 500), false);
  },
});

Deno.test({
  name: "FIXED remote session: a prompt the agent prints itself makes typed lines skip the policy",
  ignore,
  async fn() {
    // Was a hole, now fixed: on a server, an exec_write line is decided by the policy unless the job's prompt
    // "looks like a password prompt" (agent.ts `write`: /(password|passphrase|passcode)…[:?]$/
    // on `job.prompt`). That prompt is text the job printed, i.e. chosen by the agent: a shell
    // that prints `Password: ` and then reads commands (its own prompt sent to /dev/null) gets
    // every line unchecked — and the audit keeps "[not echoed]" instead of the command.
    // Fix: src/control/agent.ts `write` — never skip the policy on a text heuristic for
    // servers; at most redact the *audit text* for such lines, but decide them (a password
    // that the policy denies then needs `secret` plus an auto_answer or an operator), or only
    // skip when the line cannot be a command (the job is a known password reader, e.g. the
    // program the policy allowed is `sudo`/`ssh`/`su`).
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("box", s!.port, u)}${DENY_TOUCH}`
    );
    const sid = await remoteSession(r.c);
    const x = `${r.dir}/pwned-password-prompt`;
    const j = await call(r.c, "exec_run", {
      session_id: sid,
      command: ["sh", "-c", "printf 'Password: '; exec sh 2>/dev/null"],
    });
    assert.equal(j.status, "awaiting_input", JSON.stringify(j));
    const w = await call(r.c, "exec_write", { job_id: j.job_id, input: `touch ${x}` });
    const ran = await appears(x, 3000);
    const log = await auditText(r.state);
    assert.equal(
      ran,
      false,
      `"touch *" is denied, yet the typed line ran on the server (exec_write answered ${
        JSON.stringify(w)
      }; audit has ${log.includes("[not echoed]") ? '"[not echoed]"' : "the line"})`,
    );
  },
});

Deno.test({
  name:
    "FIXED remote session: a typed line with \\r or ^U is one command for the policy, two for the tty",
  ignore,
  async fn() {
    // Was a hole, now fixed: exec_write text is decided as one shell line (`decideLine`), but on a server it goes
    // through the remote PTY's line discipline first: ICRNL turns `\r` into end-of-line, VKILL
    // (^U) erases what came before, VERASE/VWERASE (DEL, ^W) edit it, ^C/^\\ signal. The policy
    // sees `echo hi<CR>touch X` (echo with two arguments, allowed by `echo *`), the shell reads
    // `echo hi` and then `touch X`. Locally the exec gate would stop the touch.
    // Fix: src/control/agent.ts `write` (or the InputAdmission in gateway.ts) — refuse control
    // characters (everything < 0x20 but \t, and 0x7f) in exec_write input to a program that
    // reads commands, or decide the line as the terminal will deliver it (split on CR/LF, apply
    // ^U/^W/DEL, refuse ^C/^\\/^Z/^D/^V).
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("box", s!.port, u)}policies:
  default:
    allow: ["echo *", "sh"]
    deny: ["touch *"]
`
    );
    const sid = await remoteSession(r.c);
    const cr = `${r.dir}/pwned-cr`;
    const kill = `${r.dir}/pwned-vkill`;
    const repl = await call(r.c, "exec_run", { session_id: sid, command: ["sh"] });
    assert.equal(repl.status, "awaiting_input", JSON.stringify(repl));
    const plain = await call(r.c, "exec_write", { job_id: repl.job_id, input: `touch ${cr}` });
    assert.equal(codeOf(plain), "DENIED_BY_POLICY", "the plain line is denied");
    const typed = [];
    for (const input of [`echo hi\rtouch ${cr}`, `echo hi\x15touch ${kill}`]) {
      await pollUntil(async () => {
        const p = await call(r.c, "exec_poll", { job_id: repl.job_id });
        return p.status === "awaiting_input" ? true : undefined;
      }, "the REPL waits for a line");
      typed.push(await call(r.c, "exec_write", { job_id: repl.job_id, input }));
      await appears(input.includes("\r") ? cr : kill, 1500);
    }
    const ran = [cr, kill].filter(exists);
    assert.deepEqual(
      ran,
      [],
      `"touch *" is denied, yet typed lines ran it: ${JSON.stringify(typed)}`,
    );
  },
});

Deno.test({
  name:
    "FIXED remote session: the session's own env is never decided (BASH_ENV runs a denied program)",
  ignore,
  async fn() {
    // Was a hole, now fixed: exec_run's `env` is decided (BASH_ENV, LD_PRELOAD, PS1… are opaque: denied, see the
    // HELD test above), but session_create's `env` is not decided at all, and on a server it
    // goes onto the shell's command line (sessions.ts `shellCommand`). BASH_ENV='$(touch X)'
    // then runs `touch` whenever any allowed `bash -c …` starts there; SHELLOPTS=posix with
    // ENV='$(…)' runs it when the session's shell itself starts. session.created does not
    // record the env either, so the audit never shows it.
    // Fix: src/control/agent.ts `#openRemote` (and `#open` when no exec gate) — decide the
    // session env with the policy (`analyzeEnv`'s CODE_VARIABLES, plus SHELLOPTS/BASHOPTS/ENV/
    // PATH/LD_*/GIT_*…) before `sessionLauncher`, and record the variable names in
    // session.created.
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("box", s!.port, u)}${DENY_TOUCH}`
    );
    const x = `${r.dir}/pwned-session-env`;
    const made = await call(r.c, "session_create", {
      target: "box",
      env: { BASH_ENV: `$(touch ${x})` },
    });
    // Fixed: the env is decided when the session is created (refused with rules, no exec gate).
    if ((made as { error?: { code: string } }).error) {
      assert.equal((made as { error: { code: string } }).error.code, "DENIED_BY_POLICY");
      return;
    }
    const sid = made.session_id as string;
    const rr = await call(r.c, "exec_run", { session_id: sid, command: ["bash", "-c", "true"] });
    assert.equal(
      await appears(x, 1000),
      false,
      `session env BASH_ENV ran "touch" on the server when \`bash -c true\` started: ${
        JSON.stringify(rr)
      }`,
    );
  },
});

Deno.test({
  name:
    "FIXED remote session: exec_run env not on the code-variable list runs programs (GIT_CONFIG_*)",
  ignore,
  async fn() {
    // Was a hole, now fixed: `analyzeEnv` (src/policy/_analyze.ts) flags only prompt/startup/loader variables
    // (CODE_VARIABLES). Many more make an allowed program run a command of the agent's choice:
    // GIT_CONFIG_COUNT/KEY_n/VALUE_n (core.fsmonitor, core.pager, core.sshCommand), GIT_PAGER,
    // PAGER, MANPAGER, LESSOPEN, EDITOR/VISUAL, GIT_SSH_COMMAND, PATH, LD_LIBRARY_PATH,
    // PYTHONSTARTUP, PERL5OPT, NODE_OPTIONS, TAR_OPTIONS… On a server nothing sees the exec.
    // Fix: src/policy/_analyze.ts `analyzeEnv` — with no exec gate, treat every variable that is
    // not on a short list of known-inert ones (LANG, LC_*, TZ, TERM, COLUMNS…) as opaque.
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("box", s!.port, u)}${DENY_TOUCH}`
    );
    const sid = await remoteSession(r.c);
    const x = `${r.dir}/pwned-git-env`;
    const repo = `${r.dir}/repo`;
    const init = await call(r.c, "exec_run", {
      session_id: sid,
      command: ["git", "init", "-q", repo],
    });
    assert.equal(init.exit_code, 0, JSON.stringify(init));
    const st = await call(r.c, "exec_run", {
      session_id: sid,
      command: ["git", "-C", repo, "status", "--short"],
      env: {
        GIT_CONFIG_COUNT: "1",
        GIT_CONFIG_KEY_0: "core.fsmonitor",
        GIT_CONFIG_VALUE_0: `touch ${x}; false`,
      },
    });
    assert.equal(
      await appears(x, 1000),
      false,
      `an allowed "git status" ran "touch" through GIT_CONFIG_*: ${JSON.stringify(st)}`,
    );
  },
});

Deno.test({
  name:
    "FIXED remote session: a run-time value in arithmetic runs a command (allow list echo/printf)",
  ignore,
  async fn() {
    // Was a hole, now fixed: the analyzer catches `x='a[$(cmd)]'; echo $((x))` when the text is a literal, but
    // not when the value is built at run time (`x=$(printf …)`, `read x < f`, `x=$(cat f)`),
    // and a session on a server keeps its variables between calls. bash evaluates `$((x))`,
    // `${a[x]}`, `[[ $x -eq 1 ]]`, `${!x}`, `(( x ))` recursively, running `$(…)` inside an array
    // subscript. Two calls an allow list of `echo *` and `printf *` accepts run `touch`.
    // Fix: src/policy/_analyze.ts — an arithmetic context (`$((…))`, `$[…]`, `((…))`, `let`,
    // `[[ -eq ]]`, array subscripts, `${x:off}`) or an indirect expansion (`${!x}`) that reads a
    // variable whose value is not a known literal is opaque when no exec gate checks what runs.
    await using r = await rig((s, _d, u) =>
      `servers:\n${
        serverYaml("box", s!.port, u)
      }policies:\n  default:\n    allow: ["echo *", "printf *"]\n`
    );
    const sid = await remoteSession(r.c);
    const x = `${r.dir}/pwned-arith`;
    const a = await call(r.c, "exec_run", {
      session_id: sid,
      command: [`x=$(printf 'a[%s(touch ${x})]' '$')`],
    });
    assert.equal(a.exit_code, 0, JSON.stringify(a));
    const b = await call(r.c, "exec_run", { session_id: sid, command: ["echo $((x))"] });
    assert.equal(
      await appears(x, 1000),
      false,
      `with allow: ["echo *", "printf *"], \`echo $((x))\` ran touch on the server: ${
        JSON.stringify(b)
      }`,
    );
  },
});

Deno.test({
  name: "FIXED remote sh session: argv quoted with bash's $'…' is read differently by dash",
  ignore,
  async fn() {
    // Was a hole, now fixed: in a session with `shell: "sh"` (dash on Debian servers), a multi-word argv is made
    // a line by `argvToScript` → `quoteWord`, which quotes a word with a control character as
    // bash's `$'…'`. dash has no `$'…'`: the word `' ; touch X ; #⏎` becomes
    // `$'\' ; touch X ; #\n'`, which dash runs as `echo $\` then `touch X`. The policy decided the
    // exact argv (`echo <one word>`), so even `allow: ["echo *"]` lets it run. A one-word line
    // has the same problem (decided as bash, eval'd by dash).
    // Fix: src/shell/quote.ts `argvToScript` / src/engine/lifecycle.ts — for `sh` sessions quote
    // with `allowAnsiC: false` (stage the command in a file when a word has control
    // characters), and decide one-word lines for sh sessions in POSIX dialect (see the fleet
    // dialect hole).
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("box", s!.port, u)}policies:\n  default:\n    allow: ["echo *"]\n`
    );
    const sid = await remoteSession(r.c, { shell: "sh" });
    const x = `${r.dir}/pwned-sh-quote`;
    const y = `${r.dir}/pwned-sh-line`;
    const a = await call(r.c, "exec_run", {
      session_id: sid,
      command: ["echo", `' ; touch ${x} ; #\n`],
    });
    const b = await call(r.c, "exec_run", {
      session_id: sid,
      command: [`echo $'\\' ; touch ${y} ; #'`],
    });
    const ran = [x, y].filter(exists);
    assert.deepEqual(
      ran,
      [],
      `allow: ["echo *"] and touch ran in the sh session on the server: ${
        JSON.stringify([a, b].map((j) => j.output ?? j.error))
      }`,
    );
  },
});

Deno.test({
  name: "FIXED remote sh session: a staged command appends to its own file, dash reads the tail",
  ignore,
  async fn() {
    // Was a hole, now fixed: a command with a newline (or over 2048 bytes) is staged in
    // `~/.cache/termada/sessions/<id>/cmd.sh` on the server and sourced (integration.ts
    // `typedCommand`). The path is known to the agent ($TERMADA_SESSION_ID is in its env) and
    // writable by it; dash reads a sourced file as it goes, so an allowed first line that
    // appends to cmd.sh makes dash run text the policy never saw. Locally the exec gate stops
    // the appended program; on a server nothing does.
    // Fix: src/engine/session.ts `run` — for remote sessions never source a file the session
    // user can write while it runs: send the script on stdin of a helper channel, or read the
    // file whole before running it (`eval "$(cat f)"` after removing it, or bash/zsh which read
    // a sourced file whole), or stage outside the session user's reach.
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("box", s!.port, u)}${DENY_TOUCH}`
    );
    const sid = await remoteSession(r.c, { shell: "sh" });
    const x = `${r.dir}/pwned-staged`;
    const rr = await call(r.c, "exec_run", {
      session_id: sid,
      command: [
        `printf 'touch ${x}\\n' >> "$HOME/.cache/termada/sessions/$TERMADA_SESSION_ID/cmd.sh"\necho staged`,
      ],
    });
    assert.equal(
      await appears(x, 1000),
      false,
      `"touch *" is denied, yet dash ran the line appended to the staged file: ${
        JSON.stringify(rr)
      }`,
    );
  },
});

// ═════════════════════════════════════════════════════════════════════════════════════════════
// file_read / file_write: the control plane, credentials, daemon-changing files
// ═════════════════════════════════════════════════════════════════════════════════════════════

Deno.test("HELD file tools: the control plane through .., //, trailing /, /proc/*/root, /proc/self/fd, symlinks, long paths", async () => {
  // No rules at all: the policy allows every file call, so only the control-plane guard stands.
  await using r = await rig(() => "", { noSshd: true });
  const st = r.state;
  const token = Deno.readTextFileSync(`${st}/token`).trim();
  const pid = r.d.proc.pid;
  const links = `${r.dir}/links`;
  Deno.mkdirSync(links);
  Deno.symlinkSync(`${st}/token`, `${links}/file`);
  Deno.symlinkSync(st, `${links}/dir`);
  Deno.symlinkSync(`${links}/dir`, `${links}/chain`);
  Deno.symlinkSync(`../../${st.slice(1)}`, `${links}/relative`);
  Deno.symlinkSync(`/proc/self/root${st}`, `${links}/procroot`);
  const depth = "../".repeat(20);
  const reads = [
    `${st}/token`,
    `${st}//token`,
    `${st}/./token`,
    `${st}/audit/../token`,
    `${st}/token/`,
    `${st}/token/.`,
    `/tmp/../${st.slice(1)}/token`,
    `${depth}${st.slice(1)}/token`,
    `/proc/self/root${st}/token`,
    `/proc/thread-self/root${st}/token`,
    `/proc/${pid}/root${st}/token`,
    `/proc/self/cwd/${depth}${st.slice(1)}/token`,
    `/proc/${pid}/cwd/${depth}${st.slice(1)}/token`,
    `/dev/../proc/self/root${st}/token`,
    `${links}/file`,
    `${links}/dir/token`,
    `${links}/chain/token`,
    `${links}/relative/token`,
    `${links}/procroot/token`,
    `${st}${"/.".repeat(1900)}/token`,
    `${st}/known_hosts`,
    `${st}/servers.json`,
    `${st}/config.yaml`,
    `${st}/termada.db`,
    `${st}/daemon.json`,
    `${st}/termada-mcp.sock.key`,
  ];
  const leaks: string[] = [];
  for (const path of reads) {
    const rr = await call(r.c, "file_read", { path });
    const code = codeOf(rr);
    if (code === undefined) leaks.push(`${path.slice(0, 120)}: read ${String(rr.size)} bytes`);
    // INTERNAL "Requires all access": Deno's permissions refuse /proc/<pid>/… (see below).
    else if (
      code !== "DENIED_BY_POLICY" && code !== "NOT_FOUND" &&
      !/Requires all access/.test((rr as unknown as Err).error.message)
    ) leaks.push(`${path}: ${code}`);
  }
  // Every descriptor of the daemon that leads into the state dir (db, audit segment, lock…).
  for (let n = 0; n < 256; n++) {
    let target: string;
    try {
      target = Deno.readLinkSync(`/proc/${pid}/fd/${n}`);
    } catch {
      continue;
    }
    for (const path of [`/proc/self/fd/${n}`, `/dev/fd/${n}`, `/proc/${pid}/fd/${n}`]) {
      const rr = await call(r.c, "file_read", { path, max_bytes: 4096 });
      const content = typeof rr.content === "string" ? rr.content : "";
      if (target.startsWith(st) && codeOf(rr) === undefined) leaks.push(`${path} → ${target}`);
      if (content.includes(token)) leaks.push(`${path} → ${target} holds the token`);
    }
  }
  // Writes: the config, known_hosts, servers.json, a new file; through every route above.
  const before = Deno.readTextFileSync(`${st}/config.yaml`);
  for (
    const path of [
      `${st}/config.yaml`,
      `/proc/self/root${st}/config.yaml`,
      `${links}/dir/config.yaml`,
      `${links}/chain/known_hosts`,
      `${st}/audit/../servers.json`,
      `${st}/new-file`,
      `${st}/run/x`,
      `/proc/${pid}/cwd/${depth}${st.slice(1)}/known_hosts`,
    ]
  ) {
    const rr = await call(r.c, "file_write", { path, content: "servers: []\n" });
    const refusedByDeno = /Requires all access/.test((rr as unknown as Err).error?.message ?? "");
    if (codeOf(rr) !== "DENIED_BY_POLICY" && !refusedByDeno) {
      leaks.push(`write ${path}: ${JSON.stringify(rr)}`);
    }
  }
  assert.equal(Deno.readTextFileSync(`${st}/config.yaml`), before);
  assert.equal(exists(`${st}/new-file`), false);
  assert.deepEqual(leaks, []);
});

Deno.test("FIXED file tools: a state dir reached through a symlink is not recognised as the control plane", async () => {
  // Was a hole, now fixed: the guard compares the path asked and its realpath against the control-plane paths
  // as configured (controlPlanePaths in src/config/schema.ts, via sandboxReport().hiding.paths),
  // which are not resolved. When TERMADA_HOME (or $HOME, XDG_STATE_HOME…) goes through a symlink
  // — macOS /tmp → /private/tmp, a symlinked /home — the real path of the state dir is outside
  // the list and `file_read <real>/token` returns the operator token.
  // Fix: src/control/files.ts `#admit` — compare against the realpath of every hidden path too
  // (resolve them once at start; or compare (dev, inode) of each ancestor of the reached path
  // with those of the hidden directories).
  const real = await Deno.realPath(await Deno.makeTempDir({ prefix: "termada-attack-realstate-" }));
  const link = `${real}-link`;
  Deno.symlinkSync(real, link);
  try {
    await using r = await rig(() => "", { noSshd: true, stateDir: link });
    const token = Deno.readTextFileSync(`${real}/token`).trim();
    const viaLink = await call(r.c, "file_read", { path: `${link}/token` });
    assert.equal(codeOf(viaLink), "DENIED_BY_POLICY", "the configured path is guarded");
    const viaReal = await call(r.c, "file_read", { path: `${real}/token` });
    assert.equal(
      codeOf(viaReal),
      "DENIED_BY_POLICY",
      `the operator token came back through the state dir's real path: ${
        String(viaReal.content).trim() === token ? "the token itself" : JSON.stringify(viaReal)
      }`,
    );
  } finally {
    await Deno.remove(link).catch(() => {});
    await Deno.remove(real, { recursive: true }).catch(() => {});
  }
});

Deno.test("FIXED file tools: with security.exec_gate: off the control-plane guard is gone", async () => {
  // Was a hole, now fixed: FileOps takes the control plane from `sandboxReport().hiding.paths`, and the sandbox
  // reports `paths: []` in `off` mode (src/sandbox/sandbox.ts constructor). file_read runs as the
  // daemon whatever the sandbox mode, so turning the exec gate off also turns off "never
  // reachable by agents": `<state>/token` is readable, `config.yaml` writable.
  // Fix: src/control/files.ts `#admit` — take the hidden list from the config
  // (`controlPlanePaths(paths)`), not from the sandbox's report; keep `paths` in the off report.
  await using r = await rig(() => `security:\n  exec_gate: "off"\n`, { noSshd: true });
  const token = Deno.readTextFileSync(`${r.state}/token`).trim();
  const rr = await call(r.c, "file_read", { path: `${r.state}/token` });
  assert.equal(
    codeOf(rr),
    "DENIED_BY_POLICY",
    `exec_gate off: file_read returned ${
      String(rr.content).trim() === token ? "the operator token" : JSON.stringify(rr)
    }`,
  );
});

Deno.test("HELD file tools: /proc/<daemon>/mem, maps, environ, fd cannot be read (Deno's permissions refuse them)", async () => {
  // Held, but not by Termada: FileOps' guard is path-based and does not know procfs; what
  // stops `file_read /proc/self/mem` (the daemon's heap: operator token, socket key, agent
  // tokens) is Deno's own rule that /proc/<pid>/… needs --allow-all (-P=daemon does not grant
  // it), and the answer is INTERNAL "Requires all access". A daemon started with `deno run -A`
  // (or a future Deno that relaxes the rule) would hand out its memory. Defence in depth:
  // src/control/files.ts `#admit` should refuse procfs/sysfs paths for local targets itself.
  await using r = await rig(() => "", { noSshd: true });
  const token = Deno.readTextFileSync(`${r.state}/token`).trim();
  const pid = r.d.proc.pid;
  Deno.symlinkSync(`/proc/${pid}/mem`, `${r.dir}/mem`);
  Deno.symlinkSync(`/proc/${pid}`, `${r.dir}/proc`);
  const got: string[] = [];
  for (
    const path of [
      "/proc/self/mem",
      "/proc/self/maps",
      "/proc/self/environ",
      "/proc/thread-self/mem",
      `/proc/${pid}/mem`,
      `/proc/${pid}/task/${pid}/mem`,
      `/proc/${pid}/maps`,
      `/proc/${pid}/environ`,
      `/proc/${pid}/cmdline`,
      `${r.dir}/mem`,
      `${r.dir}/proc/maps`,
    ]
  ) {
    const rr = await call(r.c, "file_read", { path, offset: 0, max_bytes: 65536 });
    if (codeOf(rr) === undefined) got.push(`${path}: ${String(rr.bytes)} bytes`);
    if (JSON.stringify(rr).includes(token)) got.push(`${path}: the token`);
  }
  assert.deepEqual(got, []);
});

Deno.test({
  name: "FIXED file tools: the daemon's own SSH key (its server credential) is readable by agents",
  ignore,
  async fn() {
    // Was a hole, now fixed: REMOTE.md promises "Agents name servers; they are never given keys or credentials"
    // and "Key material stays in the daemon's process". The credential source is
    // ~/.ssh/id_ed25519 (id_ecdsa, id_rsa) of the daemon's user, and file_read runs as that
    // user: with no file rules (or `files.read: {allow: ["/**"]}`, or a policy with only write
    // rules) `file_read ~/.ssh/id_ed25519` returns the private key, with which the agent logs in
    // to every server directly, outside policy and audit. (SECURITY.md says ~/.ssh in general is
    // readable when the policy allows it; the keys Termada itself uses are a different matter.)
    // Fix: src/control/files.ts `#admit` — add the credential files auth.ts reads
    // (~/.ssh/id_*, and SSH_AUTH_SOCK) to the always-forbidden list for local targets.
    await using r = await rig((s, _d, u) => `servers:\n${serverYaml("box", s!.port, u)}`);
    const rr = await call(r.c, "file_read", { path: `${r.home}/.ssh/id_ed25519` });
    assert.equal(
      codeOf(rr),
      "DENIED_BY_POLICY",
      `file_read returned ${
        String(rr.content).includes("PRIVATE KEY") ? "the daemon's private key" : JSON.stringify(rr)
      }`,
    );
  },
});

Deno.test("HELD file tools: with only files.write allow /tmp/**, nothing that changes the daemon is writable", async () => {
  // The daemon's HOME is outside /tmp (else ~/.ssh would be inside the allowed tree).
  await using r = await rig(() =>
    `policies:
  default:
    files:
      write:
        allow: ["/tmp/**"]
`, { noSshd: true, homeParent: "/var/tmp" });
  const h = r.home;
  Deno.writeTextFileSync(`${h}/.ssh/authorized_keys`, "ssh-ed25519 AAAA original\n");
  Deno.mkdirSync(`${r.dir}/in-tmp`);
  Deno.symlinkSync(h, `${r.dir}/in-tmp/home`);
  Deno.symlinkSync(`${h}/.ssh/authorized_keys`, `${r.dir}/in-tmp/ak`);
  let hardLinked = false;
  try {
    Deno.linkSync(`${h}/.ssh/authorized_keys`, `${r.dir}/in-tmp/hard`);
    hardLinked = true;
  } catch {
    // /tmp and /var/tmp on different filesystems here
  }
  const attempts = [
    `${h}/.ssh/authorized_keys`,
    `${h}/.ssh/authorized_keys2`,
    `${h}/.bashrc`,
    `${h}/.profile`,
    `${h}/.config/systemd/user/termada-attack.service`,
    `${h}/.config/termada/config.yaml`,
    `${h}/.config/autostart/x.desktop`,
    `/etc/cron.d/termada-attack`,
    `/etc/profile.d/termada-attack.sh`,
    `${r.state}/servers.json`,
    `${r.state}/known_hosts`,
    `/tmp/../${h.slice(1)}/.ssh/authorized_keys`,
    `${r.dir}/in-tmp/home/.ssh/authorized_keys`,
    `${r.dir}/in-tmp/ak`,
    `/proc/self/root${h}/.ssh/authorized_keys`,
    `/tmp/${"../".repeat(5)}${h.slice(1)}/.bashrc`,
  ];
  const written: string[] = [];
  for (const path of attempts) {
    const rr = await call(r.c, "file_write", { path, content: "ssh-ed25519 AAAA attacker\n" });
    if (codeOf(rr) === undefined) written.push(`${path}: ${JSON.stringify(rr)}`);
  }
  if (hardLinked) {
    // A hard link inside /tmp is written by replacing it (new inode): the original stays.
    const rr = await call(r.c, "file_write", {
      path: `${r.dir}/in-tmp/hard`,
      content: "ssh-ed25519 AAAA attacker\n",
    });
    assert.equal(codeOf(rr), undefined, JSON.stringify(rr));
  }
  assert.deepEqual(written, []);
  assert.equal(Deno.readTextFileSync(`${h}/.ssh/authorized_keys`), "ssh-ed25519 AAAA original\n");
  assert.equal(exists(`${h}/.config/systemd/user/termada-attack.service`), false);
  assert.equal(exists("/etc/cron.d/termada-attack"), false);
});

Deno.test("FIXED file tools: file_write creates setuid and setgid files (a root daemon: setuid-root binaries)", async () => {
  // Was a hole, now fixed: `mode` accepts 0..0o7777 (src/wire/remote.ts FileWriteInput, files.ts
  // checkWriteOptions) and the temp file is chmod'ed to it before the rename. A root daemon's
  // agent with `files.write: {allow: ["/tmp/**"]}` writes any ELF (16 MiB, base64) as
  // /tmp/x mode 4755 owned by root: a setuid-root program for every local user, and over SFTP
  // as a root SSH user the same on servers. (Sessions run with no_new_privs, so it does not
  // lift a session by itself; it lifts everything else that can exec it.)
  // Fix: src/remote/files.ts `checkWriteOptions` (and FileWriteInput) — accept permission bits
  // 0..0o777 only (or 0o1777); never set S_ISUID/S_ISGID/S_ISVTX from an agent's request.
  await using r = await rig(() =>
    `policies:
  default:
    files:
      write:
        allow: ["/tmp/**"]
`, { noSshd: true });
  const made: string[] = [];
  for (const mode of ["4755", "2755", 0o6777]) {
    const path = `${r.dir}/setid-${mode}`;
    const rr = await call(r.c, "file_write", { path, content: "#!/bin/sh\nid\n", mode });
    if (codeOf(rr) === undefined && (Deno.statSync(path).mode! & 0o6000) !== 0) {
      made.push(
        `${path} ${(Deno.statSync(path).mode! & 0o7777).toString(8)} uid ${
          Deno.statSync(path).uid
        }`,
      );
    }
  }
  assert.deepEqual(made, [], "an agent made setuid/setgid files");
});

Deno.test("FIXED file tools: a symlink swapped between the check and the write carries it out of the allowed tree", async () => {
  // HOLE (documented in SECURITY.md as "a symlink swapped between the check and the access is
  // not caught", so "deny" does not mean never here): FileOps decides on the realpath of the
  // directory, then LocalFiles.write opens `<dir>/.name.tmp` and renames by the *lexical* path,
  // resolving every symlink again. An agent with a local session (the policy has no command
  // rules) flips `allowed/d` between `allowed/real` and a directory outside; some write lands
  // outside.
  // Fix: src/remote/files.ts LocalFiles.write (and read) — open the parent directory once
  // (O_DIRECTORY|O_NOFOLLOW per component, or openat2 RESOLVE_NO_SYMLINKS through ffi), check
  // *that fd's* real path with the policy, then openat/renameat relative to it; or at least
  // write to the realpath the policy decided and re-verify the parent's (dev, inode) after the
  // rename.
  await using r = await rig((_s, dir) =>
    `policies:
  default:
    files:
      write:
        allow: ["${dir}/allowed/**"]
`, { noSshd: true });
  const allowed = `${r.dir}/allowed`;
  const outside = `${r.dir}/outside`;
  Deno.mkdirSync(`${allowed}/real`, { recursive: true });
  Deno.mkdirSync(outside);
  const direct = await call(r.c, "file_write", { path: `${outside}/pwned-race`, content: "x" });
  assert.equal(codeOf(direct), "DENIED_BY_POLICY", "outside is denied when asked directly");
  const racer = await call(r.c, "exec_start", {
    command: [
      `cd ${allowed} && while :; do ln -sfn ${allowed}/real d; ln -sfn ${outside} d; done`,
    ],
  });
  assert.ok(typeof racer.job_id === "string", JSON.stringify(racer));
  let landed = false;
  let tries = 0;
  const deadline = Date.now() + 20_000;
  try {
    while (!landed && tries < 400 && Date.now() < deadline) {
      tries++;
      await call(r.c, "file_write", { path: `${allowed}/d/pwned-race`, content: "x" });
      landed = exists(`${outside}/pwned-race`);
    }
  } finally {
    await call(r.c, "exec_kill", { job_id: racer.job_id, grace_ms: 200 });
  }
  assert.equal(
    landed,
    false,
    `a write decided for ${allowed}/… landed in ${outside} (try ${tries})`,
  );
});

Deno.test({
  name:
    "FIXED file tools: over SFTP on a server that is this machine, the control plane is plain files",
  ignore,
  async fn() {
    // Was a hole, now fixed: the control-plane guard applies to target "local" only (files.ts `#admit`:
    // `hidden = w.target === "local" ? … : []`). A server whose host is this machine (127.0.0.1,
    // localhost, the host's own name; here the test sshd, as the daemon's user) is a way around
    // it: file_read of `<state>/token` in a session there returns the operator token, and
    // file_write could plant `<state>/known_hosts` lines or `servers.json`. (The same session
    // can `cat` it too: a loopback server is an unsandboxed shell as the daemon's user.)
    // Fix: src/remote/inventory.ts `check` — refuse (or mark `local: true` and treat as local,
    // with the control-plane guard and the exec-gate-less warning) servers whose host resolves
    // to a loopback or own address; and in FileOps.#admit apply the hidden list when the
    // binding's host is loopback and its user is the daemon's.
    await using r = await rig((s, _d, u) => `servers:\n${serverYaml("box", s!.port, u)}`);
    const token = Deno.readTextFileSync(`${r.state}/token`).trim();
    const sid = await remoteSession(r.c);
    const rr = await call(r.c, "file_read", { session_id: sid, path: `${r.state}/token` });
    assert.equal(
      codeOf(rr),
      "DENIED_BY_POLICY",
      `file_read over SFTP returned ${
        String(rr.content).trim() === token ? "the operator token" : JSON.stringify(rr)
      }`,
    );
  },
});

// ═════════════════════════════════════════════════════════════════════════════════════════════
// Approvals
// ═════════════════════════════════════════════════════════════════════════════════════════════

const CONFIRM_PROD = `policies:
  default:
    servers:
      confirm: ["tag:prod"]
approvals:
  confirm_timeout_ms: 30000
`;

Deno.test({
  name: "HELD approvals: no agent approves or withdraws an action approval (its own or another's)",
  ignore,
  async fn() {
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("prod", s!.port, u, ["prod"])}${CONFIRM_PROD}`
    );
    const other = await r.agent("other");
    const x = `${r.dir}/pwned-approval`;
    const pending = call(r.c, "fleet_run", { command: ["touch", x], servers: ["prod"] });
    const [apr] = await pendingOf(r, "fleet");
    assert.equal(apr!.owner, "dev");
    for (const c of [r.c, other]) {
      const names: string[] = (await c.listTools()).tools.map((t: { name: string }) => t.name);
      assert.deepEqual(
        names.filter((n: string) => /approv|decide|deny|grant/i.test(n)),
        [],
        names.join(),
      );
      for (const id of [apr!.approval_id, (apr as unknown as { job_id: string }).job_id]) {
        for (const tool of ["exec_kill", "exec_poll", "exec_write"]) {
          const rr = await call(c, tool, {
            job_id: id,
            ...(tool === "exec_write" ? { input: "y" } : {}),
          });
          assert.ok(
            ["NOT_FOUND", "INVALID_ARGUMENT"].includes(codeOf(rr)!),
            `${tool} ${id}: ${JSON.stringify(rr)}`,
          );
        }
      }
    }
    // The operator routes need the operator token; an agent has none.
    for (const auth of [undefined, "Bearer x", `Bearer ${"0".repeat(64)}`]) {
      const res = await fetch(
        `http://127.0.0.1:${r.d.port}/api/approvals/${apr!.approval_id}/approve`,
        {
          method: "POST",
          headers: { "content-type": "application/json", ...(auth ? { authorization: auth } : {}) },
          body: "{}",
        },
      );
      await res.body?.cancel();
      assert.equal(res.status, 401);
    }
    const still = await pendingOf(r, "fleet");
    assert.equal(
      still[0]!.approval_id,
      apr!.approval_id,
      "still pending: nobody but an operator decided",
    );
    assert.equal(await decide(r, apr!.approval_id, false), 200);
    assert.equal(codeOf(await pending), "DENIED_BY_POLICY");
    assert.equal(exists(x), false);
  },
});

Deno.test({
  name:
    "FIXED approvals: a fleet confirm hides the tail of a long word and the servers of a long argv",
  ignore,
  async fn() {
    // Was a hole, now fixed: the approval's `command` is `shortArgv(summary)` (gateway.ts `admitAction`): at most
    // 64 words of 256 characters. The summary is `argv + "on" + servers`, so
    // - `sh -c "echo <300 chars>; touch X"` shows the operator `echo aaaa…` and hides the touch;
    // - an argv of 64+ words pushes "on" and every server out of the approval: the operator is
    //   asked to approve a fleet run on prod without seeing prod (or any server) named.
    // The audit's action records use the same cut summary.
    // Fix: src/control/gateway.ts `admitAction` / src/control/remote.ts `fleetRun` — cut the
    // command and the targets separately (targets first, always shown), and keep the full argv
    // (bounded by the fleet's own 120 KiB line limit) in the approval row so the queue can show
    // it; refuse to ask when what runs cannot be shown whole.
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("prod", s!.port, u, ["prod"])}${CONFIRM_PROD}`
    );
    const x = `${r.dir}/pwned-hidden-tail`;
    const long = call(r.c, "fleet_run", {
      command: ["sh", "-c", `echo ${"a".repeat(300)}; touch ${x}`],
      servers: ["prod"],
    });
    const wide = call(r.c, "fleet_run", {
      command: ["echo", ...Array.from({ length: 70 }, (_, i) => `w${i}`)],
      servers: ["prod"],
    });
    const list = await pendingOf(r, "fleet", 2);
    const a = list.find((p) => p.command.includes("sh"))!;
    const b = list.find((p) => p.command.includes("w69"))!;
    const problems: string[] = [];
    if (!a.command.join(" ").includes("touch")) {
      problems.push(
        `the operator is asked about ${JSON.stringify(a.command)}: "touch" is not shown`,
      );
    }
    if (!b.command.includes("prod")) {
      problems.push(
        `the operator is not shown the servers: ${JSON.stringify(b.command.slice(-3))}`,
      );
    }
    for (const p of list) assert.equal(await decide(r, p.approval_id, false), 200);
    await long;
    await wide;
    assert.equal(exists(x), false);
    assert.deepEqual(problems, []);
  },
});

Deno.test({
  name:
    "HELD approvals: editing the inventory after the ask never redirects the approved session or fleet",
  ignore,
  async fn() {
    await using r = await rig(() => CONFIRM_PROD);
    await using b = await TestSshd.start();
    Deno.writeTextFileSync(
      `${b.dir}/authorized_keys`,
      Deno.readTextFileSync(`${r.sshd!.clientKeyPath}.pub`),
    );
    const a = r.sshd!;
    const add = (port: number, tags: string[]) =>
      r.op("/servers", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ name: "prod", host: "127.0.0.1", port, user: a.user, tags }),
      });
    const added = await add(a.port, ["prod"]);
    assert.equal(added.status, 201, await added.text());
    const session = call(r.c, "session_create", { target: "prod" });
    const fl = call(r.c, "fleet_run", { command: ["echo $SSH_CONNECTION"], servers: ["prod"] });
    const [s] = await pendingOf(r, "session");
    const [f] = await pendingOf(r, "fleet");
    assert.ok(s!.command.join(" ").includes(`:${a.port}`), JSON.stringify(s!.command));
    // The operator swaps "prod" for another machine without the tag, then approves.
    const del = await r.op("/servers/prod", { method: "DELETE" });
    assert.equal(del.status, 200, await del.text());
    const swapped = await add(b.port, []);
    assert.equal(swapped.status, 201, await swapped.text());
    assert.equal(await decide(r, s!.approval_id, true), 200);
    assert.equal(await decide(r, f!.approval_id, true), 200);
    const opened = await session;
    assert.equal(opened.target, "prod", JSON.stringify(opened));
    const where = await call(r.c, "exec_run", {
      session_id: opened.session_id,
      command: ["echo $SSH_CONNECTION"],
    });
    assert.equal(String(where.output).trim().split(" ")[3], String(a.port), JSON.stringify(where));
    const ran = await fl;
    assert.equal(
      targetsOf(ran)[0]!.output.trim().split(" ")[3],
      String(a.port),
      JSON.stringify(ran),
    );
    await call(r.c, "session_close", { session_id: opened.session_id });
  },
});

Deno.test({
  name:
    "HELD approvals: stop-all cancels pending session, fleet, forward and file approvals; nothing happens",
  ignore,
  async fn() {
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("box", s!.port, u, ["prod"])}policies:
  default:
    servers:
      confirm: ["tag:prod"]
    forwards:
      confirm: ["*"]
    files:
      write:
        confirm: ["/**"]
approvals:
  confirm_timeout_ms: 30000
`
    );
    const x = `${r.dir}/pwned-stop`;
    const file = `${r.dir}/pwned-file`;
    const calls = [
      call(r.c, "fleet_run", { command: ["touch", x], servers: ["box"] }),
      call(r.c, "port_forward", { server: "box", remote_host: "127.0.0.1", remote_port: 9 }),
      call(r.c, "file_write", { path: file, content: "x" }),
      call(r.c, "session_create", { target: "box" }),
    ];
    const list = await pollUntil(
      async () => {
        const l = await (await r.op("/approvals")).json() as { approvals: Pending[] };
        return l.approvals.length >= 4 ? l.approvals : undefined;
      },
      "four approvals pending",
      15_000,
    );
    const fwd = list.find((p) => p.action?.kind === "forward")!;
    const localPort = Number(/127\.0\.0\.1:(\d+)/.exec(fwd.command[0]!)![1]);
    const stop = await r.op("/stop", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ barrier_ms: 10_000, grace_ms: 200 }),
    });
    assert.equal(stop.status, 200, await stop.text());
    const results = await Promise.all(calls);
    for (const rr of results) {
      assert.ok(["STOPPED", "DENIED_BY_POLICY"].includes(codeOf(rr)!), JSON.stringify(rr));
    }
    const after = await (await r.op("/approvals")).json() as { approvals: Pending[] };
    assert.deepEqual(after.approvals, []);
    for (const p of list) assert.notEqual(await decide(r, p.approval_id, true), 200);
    assert.equal(exists(x), false);
    assert.equal(exists(file), false);
    await assert.rejects(Deno.connect({ hostname: "127.0.0.1", port: localPort }));
    // Under the barrier nothing new is admitted.
    const again = await call(r.c, "port_forward", {
      server: "box",
      remote_host: "127.0.0.1",
      remote_port: 9,
    });
    assert.equal(codeOf(again), "STOPPED", JSON.stringify(again));
  },
});

// ═════════════════════════════════════════════════════════════════════════════════════════════
// Port forwards
// ═════════════════════════════════════════════════════════════════════════════════════════════

/** A loopback HTTP server (the service behind sshd), closed with `await using`. */
function httpServer(text: string): AsyncDisposable & { port: number } {
  const ac = new AbortController();
  const srv = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    () => new Response(text),
  );
  return {
    port: srv.addr.port,
    async [Symbol.asyncDispose]() {
      ac.abort();
      await srv.finished;
    },
  };
}

async function get(
  port: number,
  path = "/",
  init: RequestInit = {},
): Promise<{ status: number; text: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, init);
  return { status: res.status, text: await res.text() };
}

Deno.test({
  name:
    "HELD forwards: 127.0.0.1 only, strict input, no option smuggling, the daemon's port is taken",
  ignore,
  async fn() {
    await using r = await rig((s, _d, u) => `servers:\n${serverYaml("box", s!.port, u)}`);
    await using http = httpServer("behind");
    const f = (args: Record<string, unknown>) =>
      call(r.c, "port_forward", {
        server: "box",
        remote_host: "127.0.0.1",
        remote_port: http.port,
        ...args,
      });
    assert.equal(codeOf(await f({ local_address: "0.0.0.0" })), "INVALID_ARGUMENT");
    assert.equal(codeOf(await f({ bind_address: "0.0.0.0" })), "INVALID_ARGUMENT");
    for (
      const remote_host of ["127.0.0.1 -R 0.0.0.0:1:x", "a\nb", "[::1]", "x/y", "-oProxyCommand=x"]
    ) {
      const rr = await f({ remote_host });
      // `-oProxyCommand=x` is a valid-looking name: it must at least not be an option anywhere.
      if (remote_host.startsWith("-")) {
        if (codeOf(rr) === undefined) {
          await call(r.c, "port_forward_close", { forward_id: rr.forward_id });
        }
        continue;
      }
      assert.equal(
        codeOf(rr),
        "INVALID_ARGUMENT",
        `${JSON.stringify(remote_host)}: ${JSON.stringify(rr)}`,
      );
    }
    assert.equal(
      codeOf(await f({ local_port: r.d.port })),
      "INVALID_ARGUMENT",
      "the daemon's own port",
    );
    const ok = await f({});
    assert.equal(ok.local_address, "127.0.0.1");
    assert.equal((await get(ok.local_port as number)).text, "behind");
    for (const hostname of ["127.0.0.2", "::1"]) {
      await assert.rejects(
        Deno.connect({ hostname, port: ok.local_port as number }),
        `listening on ${hostname}`,
      );
    }
    await call(r.c, "port_forward_close", { forward_id: ok.forward_id });
  },
});

Deno.test({
  name:
    "HELD forwards: the daemon's own port through a loopback server gives no operator or agent access",
  ignore,
  async fn() {
    await using r = await rig((s, _d, u) => `servers:\n${serverYaml("box", s!.port, u)}`);
    const fw = await call(r.c, "port_forward", {
      server: "box",
      remote_host: "127.0.0.1",
      remote_port: r.d.port,
    });
    const p = fw.local_port as number;
    // Raw HTTP, so the Host header can claim to be the daemon's own address (a browser-style
    // fetch through the forward is already refused by the loopback Host/Origin guard: 403).
    const raw = async (
      method: string,
      path: string,
      headers: Record<string, string>,
      body = "",
    ) => {
      const conn = await Deno.connect({ hostname: "127.0.0.1", port: p });
      const head = [
        `${method} ${path} HTTP/1.1`,
        `Host: 127.0.0.1:${r.d.port}`,
        "Connection: close",
      ];
      for (const [k, v] of Object.entries(headers)) head.push(`${k}: ${v}`);
      head.push(`Content-Length: ${new TextEncoder().encode(body).length}`);
      await conn.write(new TextEncoder().encode(`${head.join("\r\n")}\r\n\r\n${body}`));
      let text = "";
      const dec = new TextDecoder();
      for await (const chunk of conn.readable) text += dec.decode(chunk, { stream: true });
      return Number(/^HTTP\/1\.1 (\d+)/.exec(text)?.[1] ?? 0);
    };
    const json = {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    };
    assert.ok([401, 403].includes((await get(p, "/api/approvals")).status));
    assert.equal(await raw("GET", "/api/approvals", {}), 401);
    assert.equal(await raw("POST", "/api/stop", json, "{}"), 401);
    assert.equal(await raw("GET", "/metrics", {}), 401);
    const init = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-03-26",
        capabilities: {},
        clientInfo: { name: "dev", version: "1" },
      },
    });
    assert.equal(await raw("POST", "/mcp", { ...json, "x-termada-agent": "dev" }, init), 401);
    await call(r.c, "port_forward_close", { forward_id: fw.forward_id });
  },
});

Deno.test({
  name: "HELD forwards: 16 per agent, owner-scoped, closed with their live connections by stop-all",
  ignore,
  async fn() {
    await using r = await rig((s, _d, u) => `servers:\n${serverYaml("box", s!.port, u)}`);
    const other = await r.agent("other");
    // An echo service behind sshd, to hold a live connection through the forward.
    const echo = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const serving = (async () => {
      for await (const conn of echo) {
        (async () => {
          try {
            await conn.readable.pipeTo(conn.writable);
          } catch {
            // closed
          }
        })();
      }
    })().catch(() => {});
    try {
      const port = (echo.addr as Deno.NetAddr).port;
      const ids: string[] = [];
      for (let i = 0; i < 16; i++) {
        const f = await call(r.c, "port_forward", {
          server: "box",
          remote_host: "127.0.0.1",
          remote_port: port,
        });
        assert.equal(codeOf(f), undefined, JSON.stringify(f));
        ids.push(f.forward_id as string);
      }
      const over = await call(r.c, "port_forward", {
        server: "box",
        remote_host: "127.0.0.1",
        remote_port: port,
      });
      assert.equal(codeOf(over), "QUOTA_EXCEEDED", JSON.stringify(over));
      assert.deepEqual((await call(other, "port_forward_list", {})).forwards, []);
      for (const id of ids.slice(0, 3)) {
        assert.equal(
          codeOf(await call(other, "port_forward_close", { forward_id: id })),
          "NOT_FOUND",
        );
      }
      const mine = (await call(r.c, "port_forward_list", {})).forwards as { local_port: number }[];
      assert.equal(mine.length, 16);
      // A live connection through the first forward.
      const conn = await Deno.connect({ hostname: "127.0.0.1", port: mine[0]!.local_port });
      await conn.write(new TextEncoder().encode("ping"));
      const buf = new Uint8Array(4);
      let got = 0;
      while (got < 4) got += (await conn.read(buf.subarray(got))) ?? 4;
      assert.equal(new TextDecoder().decode(buf), "ping");
      const stop = await r.op("/stop", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ barrier_ms: 5000, grace_ms: 200 }),
      });
      assert.equal(stop.status, 200, await stop.text());
      // The live connection ends (EOF or reset) within a deadline; no forward accepts.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const ended = await Promise.race([
        conn.read(new Uint8Array(16)).then(() => true, () => true),
        new Promise<boolean>((res) => timer = setTimeout(() => res(false), 5000)),
      ]);
      clearTimeout(timer);
      try {
        conn.close();
      } catch {
        // closed
      }
      assert.equal(ended, true, "a connection through a forward survived stop-all");
      for (const f of mine) {
        await assert.rejects(Deno.connect({ hostname: "127.0.0.1", port: f.local_port }));
      }
      const list = (await (await r.op("/forwards")).json()) as { forwards: unknown[] };
      assert.deepEqual(list.forwards, []);
    } finally {
      echo.close();
      await serving;
    }
  },
});

Deno.test({
  name: "FIXED forwards: a deny rule on 127.0.0.1 is text: localhost, 127.1, 0x7f000001 … reach it",
  ignore,
  async fn() {
    // HOLE (documented in REMOTE.md: "Patterns are text: localhost is not 127.0.0.1", but then a
    // forward deny rule on an address never means "never"): the forward subject is
    // `<server>:<remote_host as the agent wrote it>:<port>`, and sshd resolves the host with
    // getaddrinfo/inet_aton on the server. Every other spelling of the denied address gets
    // through `deny: ["*:127.0.0.1:*"]`.
    // Fix: src/control/remote.ts `forwardOpen` — canonicalise `remote_host` before deciding
    // (lower-case, strip a trailing dot, parse every inet_aton form and IPv4-mapped IPv6 to
    // dotted quad; `localhost` → loopback) and decide each candidate; or accept only
    // canonical dotted-quad/IPv6/DNS names in PortForwardInput (src/wire/remote.ts).
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("box", s!.port, u)}policies:
  default:
    forwards:
      deny: ["*:127.0.0.1:*"]
      allow: ["*"]
`
    );
    await using http = httpServer("denied service");
    const direct = await call(r.c, "port_forward", {
      server: "box",
      remote_host: "127.0.0.1",
      remote_port: http.port,
    });
    assert.equal(codeOf(direct), "DENIED_BY_POLICY");
    const through: string[] = [];
    for (
      const host of [
        "localhost",
        "LOCALHOST",
        "localhost.",
        "127.1",
        "127.0.1",
        "2130706433",
        "0x7f000001",
        "0177.0.0.1",
        "127.000.000.001",
        "::ffff:127.0.0.1",
        "0.0.0.0",
      ]
    ) {
      const f = await call(r.c, "port_forward", {
        server: "box",
        remote_host: host,
        remote_port: http.port,
      });
      if (codeOf(f) !== undefined) continue;
      try {
        const res = await get(f.local_port as number);
        if (res.text === "denied service") through.push(host);
      } catch {
        // this spelling did not resolve on the server
      } finally {
        await call(r.c, "port_forward_close", { forward_id: f.forward_id });
      }
    }
    assert.deepEqual(
      through,
      [],
      `"*:127.0.0.1:*" is denied, yet these reached it: ${through.join(", ")}`,
    );
  },
});

// ═════════════════════════════════════════════════════════════════════════════════════════════
// Host keys
// ═════════════════════════════════════════════════════════════════════════════════════════════

async function keygen(path: string): Promise<void> {
  for (const p of [path, `${path}.pub`]) await Deno.remove(p).catch(() => {});
  const out = await new Deno.Command("ssh-keygen", {
    args: ["-q", "-t", "ed25519", "-N", "", "-C", "impostor", "-f", path],
    stdout: "null",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
}

/**
 * Cuts every SSH connection of `sshd` for real: SIGKILL (by pid) to each `sshd` process below
 * its listener. TestSshd.dropConnections kills only the listener's direct children, and the
 * post-auth process (which holds the TCP connection) can outlive them. Shells are left alone,
 * so a session sees a lost link, not an exit.
 */
async function cutConnections(sshd: TestSshd): Promise<number> {
  const root = Number(Deno.readTextFileSync(`${sshd.dir}/sshd.pid`).trim());
  const out = await new Deno.Command("ps", { args: ["-eo", "pid=,ppid=,comm="], stdout: "piped" })
    .output();
  const parent = new Map<number, number>();
  const comm = new Map<number, string>();
  for (const line of new TextDecoder().decode(out.stdout).split("\n")) {
    const m = /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line);
    if (!m) continue;
    parent.set(Number(m[1]), Number(m[2]));
    comm.set(Number(m[1]), m[3]!.trim());
  }
  const below = (pid: number): boolean => {
    for (
      let p = parent.get(pid), n = 0;
      p !== undefined && p > 1 && n < 64;
      p = parent.get(p), n++
    ) {
      if (p === root) return true;
    }
    return false;
  };
  let n = 0;
  for (const [pid, name] of comm) {
    if (!below(pid) || !name.startsWith("sshd")) continue;
    try {
      Deno.kill(pid, "SIGKILL");
      n++;
    } catch {
      // gone
    }
  }
  return n;
}

Deno.test({
  name:
    "HELD host keys: a session that reconnects to a server whose key changed is refused, not re-trusted",
  ignore,
  async fn() {
    await using r = await rig((s, _d, u) =>
      `servers:\n${serverYaml("box", s!.port, u)}remote:\n  reconnect_attempts: 3\n`
    );
    const sid = await remoteSession(r.c);
    const before = Deno.readTextFileSync(`${r.state}/known_hosts`);
    // The same host and port come back with another key (an impostor, or a re-key).
    assert.ok(await cutConnections(r.sshd!) > 0, "no ssh connection to cut");
    await r.sshd!.stop();
    await keygen(r.sshd!.hostKeyPath);
    await r.sshd!.restart();
    const gone = await pollUntil(
      async () => {
        const l = (await call(r.c, "session_list", {})).sessions as {
          session_id: string;
          state?: string;
        }[];
        const s = l.find((x) => x.session_id === sid);
        return s === undefined || s.state === "closed" ? true : undefined;
      },
      "the session gives up reconnecting",
      60_000,
    );
    assert.equal(gone, true);
    const log = await auditRecords(r.state);
    assert.ok(
      log.some((x) => x.event === "session.link_lost" && x.data.session_id === sid),
      "the link was lost",
    );
    assert.equal(log.filter((x) => x.event === "session.reconnected").length, 0);
    assert.equal(
      Deno.readTextFileSync(`${r.state}/known_hosts`),
      before,
      "nothing new was trusted",
    );
    const again = await call(r.c, "session_create", { target: "box" });
    assert.equal(codeOf(again), "SERVER_UNREACHABLE");
    assert.match((again as unknown as Err).error.message, /changed/);
    const fl = await fleet(r.c, ["true"]);
    assert.equal(targetsOf(fl)[0]!.status, "unreachable", JSON.stringify(fl));
  },
});

Deno.test({
  name: "HELD host keys: a malformed known_hosts stops every new unpinned connection",
  ignore,
  async fn() {
    await using r = await rig((s, _d, u) => `servers:\n${serverYaml("box", s!.port, u)}`);
    await using b = await TestSshd.start();
    Deno.writeTextFileSync(
      `${b.dir}/authorized_keys`,
      Deno.readTextFileSync(`${r.sshd!.clientKeyPath}.pub`),
    );
    const add = await r.op("/servers", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "other", host: "127.0.0.1", port: b.port, user: b.user }),
    });
    assert.equal(add.status, 201, await add.text());
    const first = await fleet(r.c, ["true"]);
    assert.equal(targetsOf(first)[0]!.exit_code, 0, JSON.stringify(first));
    Deno.writeTextFileSync(`${r.state}/known_hosts`, "this is not a known_hosts line\n", {
      append: true,
    });
    const s = await call(r.c, "session_create", { target: "other" });
    assert.equal(codeOf(s), "SERVER_UNREACHABLE", JSON.stringify(s));
    assert.ok(
      String((s as unknown as Err).error.details?.file ?? "").endsWith("known_hosts"),
      JSON.stringify(s),
    );
    const fl = await fleet(r.c, ["true"], ["other"]);
    assert.equal(targetsOf(fl)[0]!.status, "unreachable", JSON.stringify(fl));
    const fw = await call(r.c, "port_forward", {
      server: "other",
      remote_host: "127.0.0.1",
      remote_port: 9,
    });
    if (codeOf(fw) === undefined) {
      // Forwards connect per accepted connection: the connection must be refused.
      const conn = await Deno.connect({ hostname: "127.0.0.1", port: fw.local_port as number });
      const n = await conn.read(new Uint8Array(1)).catch(() => null);
      conn.close();
      assert.equal(n, null);
      const view = (await call(r.c, "port_forward_list", {})).forwards as { last_error?: string }[];
      assert.match(view[0]?.last_error ?? "", /known_hosts/);
    }
  },
});

// ═════════════════════════════════════════════════════════════════════════════════════════════
// Audit
// ═════════════════════════════════════════════════════════════════════════════════════════════

Deno.test({
  name: "HELD audit: every remote action has its intent before its effect, and no content or keys",
  ignore,
  async fn() {
    await using r = await rig((s, _d, u) => `servers:\n${serverYaml("box", s!.port, u)}`);
    await using http = httpServer("HTTP-BODY-NOT-AUDITED");
    const secretFile = `${r.dir}/secret.txt`;
    const content = "FILE-CONTENT-NOT-AUDITED-7f3a\n";
    const w = await call(r.c, "file_write", { path: secretFile, content });
    assert.equal(codeOf(w), undefined, JSON.stringify(w));
    const rd = await call(r.c, "file_read", { path: secretFile });
    assert.equal(rd.content, content);
    const fl = await fleet(r.c, ["echo", "FLEET-OUTPUT-NOT-AUDITED-91c2"]);
    assert.equal(targetsOf(fl)[0]!.exit_code, 0);
    const sid = await remoteSession(r.c);
    const remoteFile = await call(r.c, "file_write", {
      session_id: sid,
      path: `${r.dir}/remote.txt`,
      content: "SFTP-CONTENT-NOT-AUDITED-55aa",
    });
    assert.equal(codeOf(remoteFile), undefined, JSON.stringify(remoteFile));
    await call(r.c, "exec_run", { session_id: sid, command: ["echo SESSION-OUTPUT-NOT-AUDITED"] });
    const f = await call(r.c, "port_forward", {
      server: "box",
      remote_host: "127.0.0.1",
      remote_port: http.port,
    });
    assert.equal((await get(f.local_port as number)).text, "HTTP-BODY-NOT-AUDITED");
    await call(r.c, "port_forward_close", { forward_id: f.forward_id });
    await call(r.c, "session_close", { session_id: sid });
    const log = await auditRecords(r.state);
    const text = log.map((x) => JSON.stringify(x)).join("\n");
    for (
      const s of [
        "FILE-CONTENT-NOT-AUDITED",
        "SFTP-CONTENT-NOT-AUDITED",
        "FLEET-OUTPUT-NOT-AUDITED-91c2\\n",
        "HTTP-BODY-NOT-AUDITED",
        "PRIVATE KEY",
        r.sshd!.clientKey.split("\n")[1]!,
        Deno.readTextFileSync(`${r.state}/token`).trim(),
      ]
    ) assert.equal(text.includes(s), false, `the audit holds ${s.slice(0, 40)}`);
    // Each action: action.requested (intent) first, then its effects and action.done.
    const byAction = new Map<string, string[]>();
    for (const x of log) {
      const id = x.data.action_id as string | undefined;
      if (id) byAction.set(id, [...(byAction.get(id) ?? []), x.event]);
    }
    const kinds = new Set(
      log.filter((x) => x.event === "action.requested").map((x) => x.data.kind),
    );
    for (const k of ["file.write", "file.read", "fleet", "session", "forward"]) {
      assert.ok(kinds.has(k), k);
    }
    for (const [id, events] of byAction) {
      assert.equal(events[0], "action.requested", `${id}: ${events.join(", ")}`);
      assert.ok(events.includes("action.done"), `${id}: ${events.join(", ")}`);
    }
    // The remote session is recorded with its server before its commands.
    const created = log.findIndex((x) =>
      x.event === "session.created" && x.data.session_id === sid
    );
    assert.equal(log[created]?.data.target, "box");
    const job = log.findIndex((x) =>
      x.data.session_id === sid && String(x.event).startsWith("job.")
    );
    assert.ok(created >= 0 && job > created);
  },
});

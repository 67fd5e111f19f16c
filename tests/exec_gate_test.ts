/**
 * Black-box tests of the exec gate (docs/SECURITY.md): every execve of every process of a
 * session is decided by the daemon on what really runs. A real daemon, the real MCP SDK client
 * over `termada serve --stdio`, real bash/sh/python3/git/make in real sessions.
 *
 * The policy denies `touch *` (and `perl *` for `#!` interpreters). Each case reaches `touch` in
 * a way the static check of the command text cannot see (a copy under another name, a program
 * that runs programs, an environment variable, shell state, typed input, the session's env) and
 * fails if the canary file `touch` would create exists afterwards. Cases marked `exec` must pass
 * the static layer and be stopped at execve (a `blocked` entry naming the rule); cases marked
 * `any` are forms the static layer refuses today (DENIED_BY_POLICY) — either layer may stop
 * those, but nothing may run. No case is vacuous: a daemon with no rules and the gate off replays
 * every case and each one does create its canary; `security.exec_gate: off` with the same policy
 * runs the copied touch.
 *
 * Also here: exec-time confirm (approve once, deny, timeout, a statically approved job), the
 * `exec.denied` audit record, what is checked vs what runs (symlink and memory races, nested
 * `#!`, the dynamic loader, /proc/self/fd), allowed work under the gate, and the degraded modes
 * (TERMADA_SIMULATE_MISSING=seccomp with `auto` and `required`).
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { call, homeWithConfig, operatorFetch, ROOT, startDaemon, stdioClient } from "./_daemon.ts";

type Obj = Record<string, unknown>;
interface Blocked {
  program: string;
  path: string;
  argv: string[];
  rule?: string;
  reason: string;
}
type Op = ReturnType<typeof operatorFetch>;

const FIXTURES = `${ROOT}tests/_fixtures/exec_gate`;
/** The dynamic loader, which runs the program named by its first argument without an execve. */
const LDSO = "/lib64/ld-linux-x86-64.so.2";
const RUN_MS = 20_000;

const DENY_CONFIG = `policies:
  default:
    deny: ["touch *", "perl *"]
`;

function onPath(program: string): boolean {
  return (Deno.env.get("PATH") ?? "/usr/bin:/bin").split(":").some((d) =>
    isFile(`${d}/${program}`)
  );
}

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false; // absent (or unreadable): not there for this test
  }
}

function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

const HAS = {
  python3: onPath("python3"),
  perl: isFile("/usr/bin/perl"),
  git: onPath("git"),
  make: onPath("make"),
  cc: onPath("cc"),
  less: onPath("less"),
  awk: onPath("awk"),
  ldso: isFile(LDSO),
};

async function sha256(path: string): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", await Deno.readFile(path));
  return Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, "0")).join("");
}

function errorOf(r: Obj): { code: string; message: string } | undefined {
  return r.error as { code: string; message: string } | undefined;
}

function blockedOf(r: Obj): Blocked[] {
  return (r.blocked as Blocked[] | undefined) ?? [];
}

function shown(r: Obj): string {
  return JSON.stringify(r).slice(0, 1500);
}

/** The job ran (no tool error) and the gate named `rule` for an exec whose argv mentions `word`. */
function assertBlockedAtExec(r: Obj, rule: string, word: string): Blocked {
  const e = errorOf(r);
  assert.equal(e, undefined, `expected the command to pass the static check: ${shown(r)}`);
  const hit = blockedOf(r).find((b) => b.rule === rule && b.argv.some((a) => a.includes(word)));
  assert.ok(hit, `expected a blocked exec by rule "${rule}" mentioning "${word}": ${shown(r)}`);
  assert.equal(typeof hit.program, "string");
  assert.equal(typeof hit.path, "string");
  assert.ok(hit.reason.length > 0);
  return hit;
}

/**
 * Stopped by one layer or the other on one of the lines: DENIED_BY_POLICY before it ran, or a
 * blocked exec naming the rule. Any other tool error fails.
 */
function assertStopped(results: Obj[], rule: string, word: string): void {
  for (const r of results) {
    const e = errorOf(r);
    if (e) assert.equal(e.code, "DENIED_BY_POLICY", shown(r));
  }
  const stopped = results.some((r) =>
    errorOf(r) !== undefined ||
    blockedOf(r).some((b) => b.rule === rule && b.argv.some((a) => a.includes(word)))
  );
  assert.ok(stopped, `neither layer stopped it: ${results.map(shown).join("\n")}`);
}

function assertNoCanary(path: string, r?: Obj): void {
  assert.ok(!exists(path), `the denied program ran: ${path} exists${r ? `\n${shown(r)}` : ""}`);
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, ms = 10_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface OpenSession extends AsyncDisposable {
  id: string;
  run(line: string | string[], timeoutMs?: number): Promise<Obj>;
}

async function openSession(
  c: Client,
  opts: { cwd: string; env?: Record<string, string> },
): Promise<OpenSession> {
  const s = await call(c, "session_create", opts);
  assert.equal(errorOf(s), undefined, shown(s));
  const id = s.session_id as string;
  return {
    id,
    run: (line, timeoutMs = RUN_MS) =>
      call(c, "exec_run", {
        session_id: id,
        command: typeof line === "string" ? [line] : line,
        timeout_ms: timeoutMs,
      }),
    async [Symbol.asyncDispose]() {
      await call(c, "session_close", { session_id: id });
    },
  };
}

/** A fresh directory under `root` holding `t`, a copy of /usr/bin/touch. */
async function caseDir(root: string): Promise<string> {
  const dir = await Deno.makeTempDir({ dir: root });
  await Deno.copyFile("/usr/bin/touch", `${dir}/t`);
  await Deno.chmod(`${dir}/t`, 0o755);
  return dir;
}

async function approvalsOf(op: Op): Promise<Obj[]> {
  const r = await op("/approvals");
  const body = await r.json();
  assert.equal(r.status, 200, JSON.stringify(body));
  return body.approvals as Obj[];
}

async function decide(op: Op, id: string, action: "approve" | "deny"): Promise<Response> {
  return await op(`/approvals/${id}/${action}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}",
  });
}

async function auditRecords(op: Op): Promise<Obj[]> {
  const r = await op("/audit?n=10000");
  const body = await r.json();
  assert.equal(r.status, 200, JSON.stringify(body));
  return body.records as Obj[];
}

// ── cases through exec_run ────────────────────────────────────────────────────

interface RunCase {
  name: string;
  /** Shell lines run one by one in one session (cwd = the case dir); the last is the attempt. */
  lines: (dir: string) => string[];
  setup?: (dir: string) => Promise<void>;
  stop: "exec" | "any";
  rule?: string;
  needs?: (keyof typeof HAS)[];
  /** A word of the blocked exec's argv (default: "canary", or "pl" for the perl cases). */
  word?: string;
  /** Extra checks on the last result. */
  check?: (r: Obj) => void;
}

const write = (path: string, text: string, mode = 0o644) => async () => {
  await Deno.writeTextFile(path, text);
  await Deno.chmod(path, mode);
};

const RUN_CASES: RunCase[] = [
  {
    name: "a copy of touch under another name",
    lines: () => ["./t canary; echo rc=$?"],
    stop: "exec",
    check: (r) => {
      assert.match(String(r.output), /Permission denied/);
      assert.match(String(r.output), /rc=126/);
      const b = assertBlockedAtExec(r, "touch *", "canary");
      assert.deepEqual(b.argv, ["./t", "canary"]);
      assert.equal(b.path, "./t");
    },
  },
  {
    name: "a symlink to touch",
    lines: () => ["ln -s /usr/bin/touch s && ./s canary"],
    stop: "exec",
  },
  {
    name: "a hard link to touch (or to a copy of it)",
    lines: () => ["{ ln /usr/bin/touch h 2>/dev/null || ln ./t h; } && ./h canary"],
    stop: "exec",
  },
  {
    name: "find -exec touch",
    lines: () => ["find . -maxdepth 0 -exec touch canary \\;"],
    stop: "any",
  },
  {
    name: "find -exec with a copy",
    lines: () => ["find . -maxdepth 0 -exec ./t canary \\;"],
    stop: "exec",
  },
  { name: "xargs touch", lines: () => ["echo canary | xargs touch"], stop: "any" },
  { name: "xargs with a copy", lines: () => ["echo canary | xargs ./t"], stop: "exec" },
  { name: "env touch", lines: () => ["env touch canary"], stop: "any" },
  { name: "env with a copy", lines: () => ["env ./t canary"], stop: "exec" },
  {
    name: "make runs touch from a Makefile",
    setup: (d) => write(`${d}/Makefile`, "all:\n\ttouch canary\n")(),
    lines: () => ["make"],
    stop: "exec",
    needs: ["make"],
  },
  {
    name: "git -c alias.x='!touch'",
    lines: () => ["git init -q g && cd g && git -c alias.x='!touch ../canary' x; cd .."],
    stop: "any",
    needs: ["git"],
  },
  {
    name: "a git alias set in the repo's config, then run",
    lines: () => [
      "git init -q g && git -C g config alias.mk '!../t ../canary'",
      "cd g && git mk; cd ..",
    ],
    stop: "exec",
    needs: ["git"],
  },
  {
    name: "GIT_PAGER runs a copy",
    lines: () => ["git init -q g", "cd g && GIT_PAGER='../t ../canary' git -p log; cd .."],
    stop: "exec",
    needs: ["git"],
  },
  {
    name: "GIT_EDITOR runs a copy",
    lines: () => [
      "git init -q g",
      "cd g && GIT_EDITOR='../t ../canary' git commit --allow-empty; cd ..",
    ],
    stop: "exec",
    needs: ["git"],
  },
  {
    name: "EDITOR (for git) runs a copy",
    lines: () => [
      "git init -q g",
      "cd g && EDITOR='../t ../canary' git commit --allow-empty; cd ..",
    ],
    stop: "exec",
    needs: ["git"],
  },
  {
    name: "LESSOPEN runs a copy",
    setup: (d) => write(`${d}/f.txt`, "hi\n")(),
    lines: () => ["LESSOPEN='|./t canary %s' less -F f.txt"],
    stop: "exec",
    needs: ["less"],
  },
  {
    name: 'python3 -c "os.system(touch)"',
    lines: () => [`python3 -c "import os; os.system('touch canary')"`],
    stop: "any",
    needs: ["python3"],
  },
  {
    name: "a python3 script doing os.system(touch)",
    setup: (d) => write(`${d}/p.py`, 'import os\nos.system("touch canary")\n')(),
    lines: () => ["python3 p.py"],
    stop: "exec",
    needs: ["python3"],
  },
  {
    name: "a python3 script doing posix_spawn(/usr/bin/touch)",
    setup: (d) =>
      write(
        `${d}/p.py`,
        'import os\ntry:\n    os.waitpid(os.posix_spawn("/usr/bin/touch", ["touch", "canary"], ' +
          "dict(os.environ)), 0)\nexcept OSError as e:\n    print(e)\n",
      )(),
    lines: () => ["python3 p.py"],
    stop: "exec",
    needs: ["python3"],
  },
  {
    name: "fexecve of a memfd holding touch's bytes (execveat, no name at all)",
    setup: (d) =>
      write(
        `${d}/p.py`,
        [
          "import os",
          'fd = os.memfd_create("x", 0)',
          'os.write(fd, open("/usr/bin/touch", "rb").read())',
          "pid = os.fork()",
          "if pid == 0:",
          "    try:",
          '        os.execve(fd, ["x", "canary"], dict(os.environ))',
          "    except OSError as e:",
          "        print(e)",
          "    os._exit(1)",
          "os.waitpid(pid, 0)",
          "",
        ].join("\n"),
      )(),
    lines: () => ["python3 p.py"],
    stop: "exec",
    needs: ["python3"],
  },
  {
    name: "bash -c with a variable program name",
    lines: () => ['p=to; p=${p}uch; bash -c "$p canary"'],
    stop: "any",
  },
  {
    name: "awk BEGIN{system(touch)}",
    lines: () => [`awk 'BEGIN{system("touch canary")}'`],
    stop: "any",
    needs: ["awk"],
  },
  {
    name: "awk -f a program file calling system()",
    setup: (d) => write(`${d}/a.awk`, 'BEGIN{system("./t canary")}\n')(),
    lines: () => ["awk -f a.awk"],
    stop: "exec",
    needs: ["awk"],
  },
  {
    name: "sh -c with the command built by printf",
    lines: () => [`sh -c "$(printf 'tou%sh canary' c)"`],
    stop: "any",
  },
  {
    name: "hash -p touch under another name",
    lines: () => ["hash -p /usr/bin/touch mytool; mytool canary"],
    stop: "any",
  },
  {
    name: "hash -p inside a script",
    setup: (d) => write(`${d}/h.sh`, "hash -p /usr/bin/touch mytool\nmytool canary\n")(),
    lines: () => ["bash h.sh"],
    stop: "exec",
  },
  { name: "alias mk=touch", lines: () => ["alias mk=touch", "mk canary"], stop: "any" },
  {
    name: "an alias inside a script",
    setup: (d) => write(`${d}/a.sh`, "shopt -s expand_aliases\nalias mk=./t\nmk canary\n")(),
    lines: () => ["bash a.sh"],
    stop: "exec",
  },
  {
    name: "PATH= prefix puts a copy named ls first",
    lines: () => ["mkdir -p bin && cp ./t bin/ls && PATH=$PWD/bin:$PATH ls canary"],
    stop: "exec",
  },
  {
    name: "export PATH in the session, then the copy named ls",
    lines: () => ["mkdir -p bin && cp ./t bin/ls && export PATH=$PWD/bin:$PATH", "ls canary"],
    stop: "exec",
  },
  {
    name: "a function named like a program",
    lines: () => ['ls() { ./t "$@"; }', "ls canary"],
    stop: "exec",
  },
  { name: "bash <<< 'touch x'", lines: () => ["bash <<< 'touch canary'"], stop: "any" },
  {
    name: "bash <<< with a copy",
    lines: () => ["bash <<< './t canary'"],
    stop: "exec",
  },
  {
    name: "bash /dev/stdin <<< with a copy",
    lines: () => ["bash /dev/stdin <<< './t canary'"],
    stop: "exec",
  },
  {
    name: "a script file fed to bash",
    setup: (d) => write(`${d}/s.sh`, "touch canary\n")(),
    lines: () => ["bash s.sh"],
    stop: "exec",
  },
  {
    name: "a #!/usr/bin/perl script is checked as `perl <script>`",
    setup: (d) => write(`${d}/pl`, '#!/usr/bin/perl\nopen(F, ">canary"); close F;\n', 0o755)(),
    lines: () => ["./pl"],
    stop: "exec",
    rule: "perl *",
    needs: ["perl"],
    check: (r) => {
      const b = blockedOf(r).find((b) => b.rule === "perl *");
      assert.ok(b, shown(r));
      assert.deepEqual(b.argv, ["./pl"]);
    },
  },
  {
    name: "a #!/usr/bin/env perl script",
    setup: (d) => write(`${d}/pl`, '#!/usr/bin/env perl\nopen(F, ">canary"); close F;\n', 0o755)(),
    lines: () => ["./pl"],
    stop: "exec",
    rule: "perl *",
    needs: ["perl"],
  },
  {
    name: "a script whose interpreter is a script whose interpreter is touch",
    setup: async (d) => {
      await write(`${d}/B`, `#!/usr/bin/touch ${d}/canary\n`, 0o755)();
      await write(`${d}/A`, `#!${d}/B\n`, 0o755)();
    },
    lines: () => ["./A"],
    stop: "exec",
    word: "A",
  },
  {
    name: "a script whose interpreter is a #!/usr/bin/perl script",
    setup: async (d) => {
      await write(`${d}/PB`, '#!/usr/bin/perl\nopen(F, ">canary"); close F;\n', 0o755)();
      await write(`${d}/PA`, `#!${d}/PB\n`, 0o755)();
    },
    lines: () => ["./PA"],
    stop: "exec",
    rule: "perl *",
    word: "PA",
    needs: ["perl"],
  },
  {
    name: "the dynamic loader runs /usr/bin/touch (no execve of touch at all)",
    lines: () => [`${LDSO} /usr/bin/touch canary`],
    stop: "exec",
    needs: ["ldso"],
  },
  {
    name: "the dynamic loader runs a copy",
    lines: () => [`${LDSO} ./t canary`],
    stop: "exec",
    needs: ["ldso"],
  },
  {
    name: "the dynamic loader under another name (a link, a copy) runs touch",
    lines: () => [`ln -s ${LDSO} myld; ./myld /usr/bin/touch canary`],
    stop: "any",
    needs: ["ldso"],
  },
  {
    name: "a copy of the dynamic loader runs touch",
    lines: () => [`cp ${LDSO} ldcopy; ./ldcopy /usr/bin/touch canary`],
    stop: "any",
    needs: ["ldso"],
  },
  {
    name: "the dynamic loader with an option that takes a value (--inhibit-rpath)",
    lines: () => [`${LDSO} --inhibit-rpath /bin/true /usr/bin/touch canary`],
    stop: "any",
    needs: ["ldso"],
  },
  {
    name: "exec of /proc/self/fd/N open on touch",
    lines: () => ["/proc/self/fd/3 canary 3</usr/bin/touch"],
    stop: "exec",
  },
  {
    name: "exec of /dev/fd/N open on a copy",
    lines: () => ["/dev/fd/4 canary 4<./t"],
    stop: "exec",
  },
];

// The canary of a case is "canary" in its dir; a `#!` perl case names the script, not it.
function canaryWord(c: RunCase): string {
  return c.word ?? (c.rule === "perl *" ? "pl" : "canary");
}

/**
 * Runs one case in a fresh session in a fresh dir: the dir, every line's result and the last.
 * `strict`: every line must pass the static check (the `exec` cases, and any case when the
 * policy has no rules).
 */
async function runCase(
  c: Client,
  root: string,
  rc: RunCase,
  strict = rc.stop === "exec",
): Promise<{ dir: string; results: Obj[]; r: Obj }> {
  const dir = await caseDir(root);
  await rc.setup?.(dir);
  await using s = await openSession(c, { cwd: dir });
  const results: Obj[] = [];
  for (const line of rc.lines(dir)) {
    const r = await s.run(line);
    if (strict) assert.equal(errorOf(r), undefined, `line "${line}": ${shown(r)}`);
    results.push(r);
  }
  return { dir, results, r: results[results.length - 1]! };
}

// ── cases through session_create {env} ──────────────────────────────────────

interface EnvCase {
  name: string;
  env: (dir: string) => Record<string, string>;
  setup?: (dir: string) => Promise<void>;
  line: string;
  /** Also printed by the line when it runs. */
  output?: RegExp;
}

const ENV_CASES: EnvCase[] = [
  {
    name: "BASH_ENV sources a script that runs a copy",
    setup: (d) => write(`${d}/benv.sh`, `${d}/t ${d}/canary\n`)(),
    env: (d) => ({ BASH_ENV: `${d}/benv.sh` }),
    line: "bash -c 'echo sub'",
    output: /sub/,
  },
  {
    name: "BASH_ENV sources a script that runs touch",
    setup: (d) => write(`${d}/benv.sh`, `touch ${d}/canary\n`)(),
    env: (d) => ({ BASH_ENV: `${d}/benv.sh` }),
    line: "bash -c 'echo sub'",
    output: /sub/,
  },
  {
    name: "PATH puts a copy named ls first",
    setup: async (d) => {
      await Deno.mkdir(`${d}/bin`);
      await Deno.copyFile(`${d}/t`, `${d}/bin/ls`);
      await Deno.chmod(`${d}/bin/ls`, 0o755);
    },
    env: (d) => ({ PATH: `${d}/bin:${Deno.env.get("PATH") ?? "/usr/bin:/bin"}` }),
    line: "ls canary",
  },
];

async function runEnvCase(c: Client, root: string, ec: EnvCase): Promise<{ dir: string; r: Obj }> {
  const dir = await caseDir(root);
  await ec.setup?.(dir);
  await using s = await openSession(c, { cwd: dir, env: ec.env(dir) });
  return { dir, r: await s.run(ec.line) };
}

Deno.test("exec gate: a denied program does not run, however it is reached", async (t) => {
  const home = await homeWithConfig(DENY_CONFIG);
  const root = await Deno.makeTempDir({ prefix: "termada-gate-" });
  try {
    await using d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const op = operatorFetch(d);

    await t.step("capabilities: the boundary is active here", async () => {
      const cap = await call(c, "capabilities", {});
      const b = cap.boundary as Record<string, Record<string, unknown>> & { mode: string };
      assert.equal(b.mode, "auto");
      assert.equal(b.exec_gate!.active, true, JSON.stringify(b));
      assert.equal(b.hiding!.active, true, JSON.stringify(b));
      assert.equal(typeof b.hiding!.how, "string");
      assert.equal(b.landlock!.active, true, JSON.stringify(b));
      assert.equal(b.landlock!.abi, 7);
      assert.equal(b.cgroup!.active, true, JSON.stringify(b));
      assert.equal((cap.boundary as Obj).subreaper, true);
      assert.equal((cap.features as Obj).exec_gate, true);
    });

    for (const rc of RUN_CASES) {
      const missing = (rc.needs ?? []).filter((n) => !HAS[n]);
      await t.step({
        name: `exec_run: ${rc.name} (${rc.stop === "exec" ? "stopped at exec" : "stopped"})`,
        ignore: missing.length > 0,
        fn: async () => {
          const { dir, results, r } = await runCase(c, root, rc);
          assertNoCanary(`${dir}/canary`, r);
          const rule = rc.rule ?? "touch *";
          if (rc.stop === "exec") assertBlockedAtExec(r, rule, canaryWord(rc));
          else assertStopped(results, rule, canaryWord(rc));
          rc.check?.(r);
        },
      });
    }

    await t.step(
      "the denial is audited as exec.denied, with the file's content identity",
      async () => {
        const dir = await caseDir(root);
        await using s = await openSession(c, { cwd: dir });
        const r = await s.run(`./t ${dir}/audited-canary`);
        assertBlockedAtExec(r, "touch *", "audited-canary");
        assertNoCanary(`${dir}/audited-canary`);
        const want = await sha256("/usr/bin/touch");
        const rec = await waitFor(
          "the exec.denied record",
          async () =>
            (await auditRecords(op)).find((x) =>
              x.event === "exec.denied" &&
              ((x.data as Obj).argv as string[]).includes(`${dir}/audited-canary`)
            ),
        );
        const data = rec.data as Obj & { decision: Obj & { rule: Obj } };
        assert.equal(data.job_id, r.job_id);
        assert.equal(data.session_id, s.id);
        assert.equal(data.path, "./t");
        assert.equal(data.sha256, want);
        assert.equal(typeof data.pid, "number");
        assert.equal(data.decision.action, "deny");
        assert.equal(data.decision.rule.pattern, "touch *");
        assert.deepEqual((rec.actor as Obj).id, "dev");
      },
    );

    await t.step("exec_run without a session: the program is stopped at exec", async () => {
      const dir = await caseDir(root);
      const r = await call(c, "exec_run", {
        command: [`${dir}/t`, `${dir}/canary`],
        cwd: dir,
        timeout_ms: RUN_MS,
      });
      assertStopped([r], "touch *", "canary");
      assertNoCanary(`${dir}/canary`, r);
    });

    await t.step("a background job: the program is stopped at exec", async () => {
      const dir = await caseDir(root);
      const st = await call(c, "exec_start", {
        command: ["./t canary; echo rc=$?"],
        cwd: dir,
        mode: "background",
      });
      assert.equal(errorOf(st), undefined, shown(st));
      const r = await call(c, "exec_wait", { job_id: st.job_id, timeout_ms: RUN_MS });
      assert.equal(r.status, "exited", shown(r));
      assertBlockedAtExec(r, "touch *", "canary");
      assert.match(String(r.output), /rc=126/);
      assertNoCanary(`${dir}/canary`, r);
    });

    // ── typed input ──

    const interactive = async (
      dir: string,
      program: string,
      typed: { input: string; expect: "ok" | "denied" }[],
      quit: { input: string; append_newline?: boolean },
    ): Promise<Obj> => {
      await using s = await openSession(c, { cwd: dir });
      const st = await call(c, "exec_start", { session_id: s.id, command: [program] });
      assert.equal(errorOf(st), undefined, shown(st));
      const job = st.job_id as string;
      try {
        const prompt = () =>
          call(c, "exec_wait", { job_id: job, until: { prompt: true }, timeout_ms: 10_000 });
        let w = await prompt();
        assert.equal(w.status, "awaiting_input", shown(w));
        for (const { input, expect } of typed) {
          let a = await call(c, "exec_write", { job_id: job, input });
          // Under load the prompt can be seen a moment before the reader is back in read():
          // wait for it again (bounded) rather than fail on the timing.
          for (let i = 0; i < 3 && errorOf(a)?.code === "NOT_AWAITING_INPUT"; i++) {
            await prompt();
            a = await call(c, "exec_write", { job_id: job, input });
          }
          if (expect === "denied") {
            assert.equal(errorOf(a)?.code, "DENIED_BY_POLICY", shown(a));
            continue;
          }
          assert.equal(errorOf(a), undefined, `typing "${input}": ${shown(a)}`);
          w = await prompt();
          assert.equal(w.status, "awaiting_input", shown(w));
        }
        await call(c, "exec_write", { job_id: job, ...quit });
        const end = await call(c, "exec_wait", { job_id: job, timeout_ms: 10_000 });
        assert.equal(end.status, "exited", shown(end));
        return end;
      } finally {
        const p = await call(c, "exec_poll", { job_id: job });
        if (p.status === "running" || p.status === "awaiting_input") {
          await call(c, "exec_kill", { job_id: job });
        }
      }
    };

    await t.step("exec_write: a copy typed into an interactive bash", async () => {
      const dir = await caseDir(root);
      const end = await interactive(dir, "bash", [
        { input: "./t canary; echo rc=$?", expect: "ok" },
        // The typed line itself is checked too: a plain `touch` never reaches the shell.
        { input: "touch canary2", expect: "denied" },
      ], { input: "exit" });
      assertBlockedAtExec(end, "touch *", "canary");
      assert.match(String(end.output), /rc=126/);
      assertNoCanary(`${dir}/canary`, end);
      assertNoCanary(`${dir}/canary2`, end);
    });

    await t.step("exec_write: a copy typed into sh", async () => {
      const dir = await caseDir(root);
      const end = await interactive(dir, "sh", [{ input: "./t canary", expect: "ok" }], {
        input: "exit",
      });
      assertBlockedAtExec(end, "touch *", "canary");
      assertNoCanary(`${dir}/canary`, end);
    });

    await t.step("exec_write: a function named like a program, typed into bash", async () => {
      const dir = await caseDir(root);
      const end = await interactive(dir, "bash", [
        { input: 'ls() { ./t "$@"; }', expect: "ok" },
        { input: "ls canary", expect: "ok" },
      ], { input: "exit" });
      assertBlockedAtExec(end, "touch *", "canary");
      assertNoCanary(`${dir}/canary`, end);
    });

    await t.step({
      name: "exec_write: a python3 REPL imports a module that runs os.system(copy)",
      ignore: !HAS.python3,
      fn: async () => {
        const dir = await caseDir(root);
        await Deno.writeTextFile(`${dir}/evil.py`, 'import os\nos.system("./t canary")\n');
        const end = await interactive(dir, "python3", [{ input: "import evil", expect: "ok" }], {
          input: "\u0004",
          append_newline: false,
        });
        assertBlockedAtExec(end, "touch *", "canary");
        assertNoCanary(`${dir}/canary`, end);
      },
    });

    // ── the session's environment ──

    for (const ec of ENV_CASES) {
      await t.step(`session_create env: ${ec.name}`, async () => {
        const { dir, r } = await runEnvCase(c, root, ec);
        assertBlockedAtExec(r, "touch *", "canary");
        if (ec.output) assert.match(String(r.output), ec.output);
        assertNoCanary(`${dir}/canary`, r);
      });
    }

    // The shell integration owns PROMPT_COMMAND (it ends each job with it), so a value given
    // here is replaced, not run: this case only asserts that nothing ran.
    await t.step("session_create env: PROMPT_COMMAND naming a copy runs nothing", async () => {
      const dir = await caseDir(root);
      await using s = await openSession(c, {
        cwd: dir,
        env: { PROMPT_COMMAND: `${dir}/t ${dir}/canary` },
      });
      for (const line of ["echo one", "echo two"]) {
        const r = await s.run(line);
        assert.equal(errorOf(r), undefined, shown(r));
        assert.equal(r.status, "exited", shown(r));
      }
      assertNoCanary(`${dir}/canary`);
    });

    // ── races: what is checked must be what runs ──

    await t.step({
      name: "a symlink swapped between the check and the exec does not run touch",
      ignore: !HAS.python3,
      fn: async () => {
        const dir = await caseDir(root);
        await using s = await openSession(c, { cwd: dir });
        const r = await s.run(`python3 ${FIXTURES}/race_symlink.py . canary 3`, 30_000);
        assert.equal(errorOf(r), undefined, shown(r));
        assertNoCanary(`${dir}/canary`, r);
      },
    });

    await t.step({
      name: "execve's path rewritten in memory by another thread does not run touch",
      ignore: !HAS.python3,
      fn: async () => {
        const dir = await caseDir(root);
        await using s = await openSession(c, { cwd: dir });
        const r = await s.run(`python3 ${FIXTURES}/race_memory.py . canary 3`, 30_000);
        assert.equal(errorOf(r), undefined, shown(r));
        assertNoCanary(`${dir}/canary`, r);
      },
    });

    // ── allowed work is unchanged under the gate ──

    const allowed = async (dir: string, line: string): Promise<Obj> => {
      await using s = await openSession(c, { cwd: dir });
      const r = await s.run(line, 60_000);
      assert.equal(errorOf(r), undefined, shown(r));
      assert.equal(r.status, "exited", shown(r));
      assert.equal(r.exit_code, 0, shown(r));
      assert.equal(r.blocked, undefined, shown(r));
      return r;
    };

    await t.step({
      name: "allowed: a small make build",
      ignore: !HAS.make,
      fn: async () => {
        const dir = await Deno.makeTempDir({ dir: root });
        if (HAS.cc) {
          await Deno.writeTextFile(
            `${dir}/m.c`,
            '#include <stdio.h>\nint main(void){puts("built");return 0;}\n',
          );
          await Deno.writeTextFile(`${dir}/Makefile`, "m: m.c\n\tcc -o m m.c\n");
        } else {
          await Deno.writeTextFile(`${dir}/src.txt`, "built\n");
          await Deno.writeTextFile(
            `${dir}/Makefile`,
            "m: src.txt\n\techo copying\n\tcp src.txt m.txt\n",
          );
        }
        const r = await allowed(dir, HAS.cc ? "make && ./m" : "make && cat m.txt");
        assert.match(String(r.output), /built/);
      },
    });

    await t.step({
      name: "allowed: git init and commit",
      ignore: !HAS.git,
      fn: async () => {
        const dir = await Deno.makeTempDir({ dir: root });
        const r = await allowed(
          dir,
          "git init -q repo && cd repo && echo a > a.txt && git add a.txt && " +
            "git -c user.name=T -c user.email=t@example.com commit -q -m first && " +
            "git log --format=%s",
        );
        assert.match(String(r.output), /^first$/m);
      },
    });

    await t.step("allowed: a pipeline", async () => {
      const dir = await Deno.makeTempDir({ dir: root });
      const r = await allowed(
        dir,
        "printf 'b\\na\\nb\\nc\\n' | sort | uniq -c | sort -rn | head -1 | tr -s ' '",
      );
      assert.match(String(r.output), /2 b/);
    });

    await t.step({
      name: "allowed: a python3 script that runs a program",
      ignore: !HAS.python3,
      fn: async () => {
        const dir = await Deno.makeTempDir({ dir: root });
        await Deno.writeTextFile(
          `${dir}/s.py`,
          'import subprocess\nprint(subprocess.run(["echo", "from-py"], capture_output=True, ' +
            "text=True).stdout.strip())\n",
        );
        const r = await allowed(dir, "python3 s.py");
        assert.match(String(r.output), /from-py/);
      },
    });

    await t.step("allowed: mktemp in /tmp", async () => {
      const dir = await Deno.makeTempDir({ dir: root });
      const r = await allowed(
        dir,
        'f=$(mktemp /tmp/termada-gate-XXXXXX) && echo data > "$f" && cat "$f" && rm "$f" && echo gone',
      );
      assert.match(String(r.output), /data\ngone/);
    });
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("exec gate: a confirm rule at exec waits for the operator", async (t) => {
  const home = await homeWithConfig(`policies:
  default:
    confirm: ["touch *"]
    deny: ["perl *"]
approvals:
  confirm_timeout_ms: 1500
`);
  const root = await Deno.makeTempDir({ prefix: "termada-gate-" });
  try {
    await using d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const op = operatorFetch(d);
    const execApproval = (jobId: string, word: string) =>
      waitFor(
        `an exec approval for ${word}`,
        async () =>
          (await approvalsOf(op)).find((a) =>
            a.job_id === jobId && a.exec !== undefined &&
            (a.command as string[]).some((w) => w.includes(word))
          ),
      );

    await t.step(
      "approve lets that exec run once; the next exec asks again; deny fails it",
      async () => {
        const dir = await caseDir(root);
        await using s = await openSession(c, { cwd: dir });
        const st = await call(c, "exec_start", {
          session_id: s.id,
          command: ["./t first; echo rc1=$?; ./t second; echo rc2=$?"],
        });
        assert.equal(errorOf(st), undefined, shown(st));
        const job = st.job_id as string;
        const a1 = await execApproval(job, "first");
        assert.deepEqual(a1.command, ["./t", "first"]);
        assert.equal(a1.rule, "touch *");
        const ex = a1.exec as Obj;
        assert.equal(ex.path, "./t");
        assert.equal(typeof ex.pid, "number");
        assertNoCanary(`${dir}/first`); // it waits in execve
        const ok = await decide(op, a1.approval_id as string, "approve");
        assert.equal(ok.status, 200, await ok.text());
        const a2 = await execApproval(job, "second");
        assert.notEqual(a2.approval_id, a1.approval_id);
        const again = await decide(op, a1.approval_id as string, "approve");
        await again.body?.cancel();
        assert.notEqual(again.status, 200, "an approval is used once");
        const no = await decide(op, a2.approval_id as string, "deny");
        assert.equal(no.status, 200, await no.text());
        const r = await call(c, "exec_wait", { job_id: job, timeout_ms: RUN_MS });
        assert.equal(r.status, "exited", shown(r));
        assert.match(String(r.output), /rc1=0/);
        assert.match(String(r.output), /rc2=126/);
        assert.ok(exists(`${dir}/first`), "the approved exec ran");
        assertNoCanary(`${dir}/second`, r);
        const b = blockedOf(r);
        assert.equal(b.length, 1, shown(r));
        assert.deepEqual(b[0]!.argv, ["./t", "second"]);
        assert.equal(b[0]!.rule, "touch *");
      },
    );

    await t.step("an unanswered exec approval times out as denied", async () => {
      const dir = await caseDir(root);
      await using s = await openSession(c, { cwd: dir });
      const st = await call(c, "exec_start", {
        session_id: s.id,
        command: ["./t canary; echo rc=$?"],
      });
      const job = st.job_id as string;
      await execApproval(job, "canary");
      const r = await call(c, "exec_wait", { job_id: job, timeout_ms: RUN_MS });
      assert.equal(r.status, "exited", shown(r));
      assert.match(String(r.output), /rc=126/);
      assertBlockedAtExec(r, "touch *", "canary");
      assertNoCanary(`${dir}/canary`, r);
      assert.equal((await approvalsOf(op)).filter((a) => a.job_id === job).length, 0);
    });

    await t.step(
      "a statically approved job is not asked again at exec; deny still applies",
      async () => {
        const dir = await caseDir(root);
        await Deno.writeTextFile(
          `${dir}/pl`,
          '#!/usr/bin/perl\nopen(F, ">perl-canary"); close F;\n',
        );
        await Deno.chmod(`${dir}/pl`, 0o755);
        await using s = await openSession(c, { cwd: dir });
        const st = await call(c, "exec_start", {
          session_id: s.id,
          command: ["touch static && ./t inner && ./pl; echo rc=$?"],
        });
        assert.equal(st.status, "pending_approval", shown(st));
        const ok = await decide(op, st.approval_id as string, "approve");
        assert.equal(ok.status, 200, await ok.text());
        const r = await call(c, "exec_wait", { job_id: st.job_id, timeout_ms: RUN_MS });
        assert.equal(r.status, "exited", shown(r));
        assert.ok(exists(`${dir}/static`), shown(r));
        assert.ok(exists(`${dir}/inner`), `the copy was asked again or refused: ${shown(r)}`);
        if (HAS.perl) {
          assertBlockedAtExec(r, "perl *", "pl");
          assertNoCanary(`${dir}/perl-canary`, r);
        }
        const asked = (await auditRecords(op)).filter((x) =>
          x.event === "exec.approval_requested" && (x.data as Obj).job_id === st.job_id
        );
        assert.equal(asked.length, 0, JSON.stringify(asked));
      },
    );
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("security.exec_gate: off runs the copied touch the gate stops", async (t) => {
  const home = await homeWithConfig(DENY_CONFIG + "security:\n  exec_gate: off\n");
  const root = await Deno.makeTempDir({ prefix: "termada-gate-" });
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);

    await t.step("capabilities: the gate is inactive and says why", async () => {
      const cap = await call(c, "capabilities", {});
      const gate = (cap.boundary as Record<string, Obj>).exec_gate!;
      assert.equal(gate.active, false);
      assert.match(String(gate.reason), /off/);
    });

    await t.step(
      "a copy named in PATH runs; by its path it is opaque; plain touch is refused",
      async () => {
        const dir = await caseDir(root);
        await using s = await openSession(c, { cwd: dir });
        // Without the gate a copy under another name is invisible to the static layer…
        const r = await s.run("PATH=.:$PATH t canary; echo rc=$?");
        assert.match(String(r.output), /rc=0/, shown(r));
        assert.equal(r.blocked, undefined);
        assert.ok(exists(`${dir}/canary`), shown(r));
        // …while a program named by its path is a program file: opaque, denied with rules.
        const byPath = await s.run("./t canary3");
        assert.equal(errorOf(byPath)?.code, "DENIED_BY_POLICY", shown(byPath));
        assert.ok(!exists(`${dir}/canary3`));
        const st = await s.run("touch canary2");
        assert.equal(errorOf(st)?.code, "DENIED_BY_POLICY", shown(st));
        assert.ok(!exists(`${dir}/canary2`));
      },
    );
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("with no rules and no gate every case reaches its program (no case is vacuous)", async (t) => {
  const home = await homeWithConfig("security:\n  exec_gate: off\n");
  const root = await Deno.makeTempDir({ prefix: "termada-gate-" });
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    for (const rc of RUN_CASES) {
      await t.step({
        name: `exec_run: ${rc.name}`,
        ignore: (rc.needs ?? []).some((n) => !HAS[n]),
        fn: async () => {
          const { dir, r } = await runCase(c, root, rc, true);
          assert.ok(exists(`${dir}/canary`), `the case never reached its program: ${shown(r)}`);
        },
      });
    }
    for (const ec of ENV_CASES) {
      await t.step(`session_create env: ${ec.name}`, async () => {
        const { dir, r } = await runEnvCase(c, root, ec);
        assert.ok(exists(`${dir}/canary`), `the case never reached its program: ${shown(r)}`);
      });
    }
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("without seccomp notification: auto says why the gate is off, required refuses sessions", async (t) => {
  const env = { TERMADA_SIMULATE_MISSING: "seccomp" };
  await t.step("auto: capabilities shows the gate inactive with a reason", async () => {
    const home = await homeWithConfig(DENY_CONFIG);
    try {
      await using _d = await startDaemon(home, { env });
      await using c = await stdioClient(home, ["--agent", "dev"]);
      const cap = await call(c, "capabilities", {});
      const gate = (cap.boundary as Record<string, Obj>).exec_gate!;
      assert.equal(gate.active, false, JSON.stringify(cap.boundary));
      assert.equal(typeof gate.reason, "string");
      assert.ok(String(gate.reason).length > 0);
      assert.equal((cap.features as Obj).exec_gate, false);
      await using s = await openSession(c, { cwd: "/tmp" });
      assert.equal((await s.run("echo still-runs")).output, "still-runs\n");
    } finally {
      await Deno.remove(home, { recursive: true });
    }
  });
  await t.step("required: session_create fails with NOT_SUPPORTED", async () => {
    const home = await homeWithConfig(DENY_CONFIG + "security:\n  exec_gate: required\n");
    try {
      await using _d = await startDaemon(home, { env });
      await using c = await stdioClient(home, ["--agent", "dev"]);
      const r = await call(c, "session_create", { cwd: "/tmp" });
      assert.equal(errorOf(r)?.code, "NOT_SUPPORTED", shown(r));
      const bg = await call(c, "exec_start", { command: ["echo x"], mode: "background" });
      assert.equal(errorOf(bg)?.code, "NOT_SUPPORTED", shown(bg));
    } finally {
      await Deno.remove(home, { recursive: true });
    }
  });
});

Deno.test("an exec of a FIFO, a terminal or a pipe never stalls the daemon", async (t) => {
  const home = await homeWithConfig(DENY_CONFIG);
  const root = await Deno.makeTempDir({ prefix: "termada-gate-" });
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    await using other = await stdioClient(home, ["--agent", "other"]);
    for (
      const [name, line] of [
        ["a FIFO nobody writes to", "mkfifo f; ./f; echo rc=$?"],
        ["the session's own terminal (/dev/stdin)", "/dev/stdin; echo rc=$?"],
        ["a pipe that stays open (/dev/fd/7)", "/dev/fd/7 7< <(sleep 5); echo rc=$?"],
      ] as const
    ) {
      await t.step(name, async () => {
        const dir = await caseDir(root);
        await using s = await openSession(c, { cwd: dir });
        const run = s.run(line);
        // Meanwhile another agent is answered at once: the daemon's thread is free.
        const t0 = performance.now();
        const cap = await call(other, "capabilities", {});
        assert.equal(typeof cap.version, "string");
        assert.ok(performance.now() - t0 < 3000, "capabilities waited behind the exec");
        const r = await run;
        assert.match(String(r.output), /rc=12[67]/, shown(r));
      });
    }
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(root, { recursive: true });
  }
});

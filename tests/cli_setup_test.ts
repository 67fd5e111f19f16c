/**
 * Black-box: the operator's installation commands, run as real processes on temp homes:
 * `termada setup` (read back by the real Claude Code CLI), `termada doctor` (no daemon, a
 * running daemon, a broken config and loose permissions) and `termada service` (a fake
 * `systemctl` on PATH stands for the user manager, so no real unit is ever enabled).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT, startDaemon, tempHome, termada } from "./_daemon.ts";
import { denoDir, runWithDeadline, stopLockedDaemon } from "./_clients.ts";

const CLAUDE = `${ROOT}.tools/node_modules/.bin/claude`;
const SYSTEMD_ANALYZE = "/usr/bin/systemd-analyze";

/** An empty HOME (no TERMADA_HOME of its own) and the environment that points at it. */
async function emptyHome(): Promise<{ home: string; env: Record<string, string> }> {
  const home = await Deno.realPath(await Deno.makeTempDir({ prefix: "termada-setup-home-" }));
  return {
    home,
    // Deno's own cache stays the test run's: a fresh HOME would make Deno look for its npm
    // packages under $HOME/.cache/deno. No termada on PATH: setup writes the source command.
    env: { HOME: home, DENO_DIR: await denoDir(), PATH: "/usr/local/bin:/usr/bin:/bin" },
  };
}

const LINE = /^(OK|WARN|FAIL) {2,}\S.* {2}\S/;

/** `doctor` output: every line is a check, a fix under one, or the summary. */
function parseDoctor(out: string): Map<string, { status: string; line: string; fix?: string }> {
  const checks = new Map<string, { status: string; line: string; fix?: string }>();
  let last: { status: string; line: string; fix?: string } | undefined;
  const lines = out.trimEnd().split("\n");
  for (const line of lines.slice(0, -1)) {
    const fix = /^\s+fix: (.+)$/.exec(line);
    if (fix) {
      assert.ok(last && last.status !== "OK", `a fix follows a WARN or FAIL: ${line}`);
      last.fix = fix[1];
      continue;
    }
    assert.match(line, LINE, out);
    const m = /^(OK|WARN|FAIL)\s+(.+?)\s{2,}/.exec(line)!;
    last = { status: m[1]!, line };
    checks.set(m[2]!, last);
  }
  assert.match(lines.at(-1)!, /^\d+ ok, \d+ warning\(s\), \d+ failure\(s\) in \d+ ms$/);
  for (const c of checks.values()) {
    if (c.status !== "OK") assert.ok(c.fix, `a fix under ${c.line}`);
  }
  return checks;
}

Deno.test("setup on an empty HOME registers termada for Claude Code: `claude mcp list` lists it", async () => {
  try {
    Deno.statSync(CLAUDE);
  } catch {
    assert.fail(`The Claude Code CLI is missing (${CLAUDE}): run the dev-tools install`);
  }
  const { home, env } = await emptyHome();
  try {
    const first = await termada(home, ["setup", "--client", "claude"], env);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /^claude: added termada to ~\/\.claude\.json$/m);
    assert.match(first.stdout, /^command: \S*deno run .*mod\.ts serve --stdio$/m);
    const file = join(home, ".claude.json");
    const written = JSON.parse(await Deno.readTextFile(file));
    assert.deepEqual(written.mcpServers.termada.args.slice(-2), ["serve", "--stdio"]);
    assert.equal((await Deno.stat(file)).mode! & 0o777, 0o600);
    const mtime = (await Deno.stat(file)).mtime;

    const again = await termada(home, ["setup", "--client", "claude"], env);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /^claude: unchanged \(~\/\.claude\.json\)$/m);
    assert.deepEqual((await Deno.stat(file)).mtime, mtime, "not rewritten");

    const list = await runWithDeadline(CLAUDE, ["mcp", "list"], {
      env: {
        ...env,
        TERMADA_HOME: home,
        DISABLE_TELEMETRY: "1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        DISABLE_AUTOUPDATER: "1",
        DISABLE_ERROR_REPORTING: "1",
        NO_COLOR: "1",
        MCP_TIMEOUT: "30000",
      },
      cwd: home,
      ms: 90_000,
    });
    const out = list.stdout + list.stderr;
    assert.equal(list.timedOut, false, `claude mcp list finished: ${out}`);
    // Listed with the command setup wrote (connecting is first_run_test's business).
    assert.match(out, /^termada: \S*deno run .*serve --stdio/m, out);
  } finally {
    await stopLockedDaemon(home);
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("setup refuses a malformed ~/.claude.json (exit 2, file named) and leaves it as it was", async () => {
  const { home, env } = await emptyHome();
  try {
    const none = await termada(home, ["setup"], env);
    assert.equal(none.code, 1, "no client found");
    assert.match(none.stderr, /No MCP client found/);
    const file = join(home, ".claude.json");
    await Deno.writeTextFile(file, '{"numStartups": 3, ');
    const r = await termada(home, ["setup", "--client", "claude"], env);
    assert.equal(r.code, 2, r.stderr);
    assert.match(
      r.stderr,
      /INVALID_ARGUMENT: Cannot update ".*\.claude\.json": it is not valid JSON/,
    );
    assert.equal(await Deno.readTextFile(file), '{"numStartups": 3, ');
    const unknown = await termada(home, ["setup", "--client", "vim"], env);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /Unknown client "vim"/);
    const flag = await termada(home, ["setup", "--bogus"], env);
    assert.equal(flag.code, 2);
    assert.match(flag.stderr, /Unknown option "--bogus"/);
    assert.deepEqual([...Deno.readDirSync(home)].map((e) => e.name), [".claude.json"]);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("doctor on an empty home with no daemon: every check has a line, no FAIL, exit 0", async () => {
  const home = await tempHome();
  try {
    const started = performance.now();
    const r = await termada(home, ["doctor"]);
    const ms = Math.round(performance.now() - started);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const checks = parseDoctor(r.stdout);
    for (
      const name of [
        "config",
        "pty",
        "bash",
        "zsh",
        "servers",
        "state dir",
        "token",
        "port",
        "audit",
        "clock",
        "daemon",
      ]
    ) assert.ok(checks.has(name), `${name} in:\n${r.stdout}`);
    assert.ok(checks.has("exec gate") || checks.has("boundary"), r.stdout);
    assert.match(checks.get("daemon")!.line, /not running/);
    assert.equal(checks.get("pty")!.status, "OK", r.stdout);
    assert.ok(ms < 15_000, `doctor took ${ms} ms`);
    const json = await termada(home, ["doctor", "--json"]);
    const parsed = JSON.parse(json.stdout);
    assert.equal(parsed.ok, true);
    assert.ok(parsed.checks.every((c: { status: string }) => /^(OK|WARN|FAIL)$/.test(c.status)));
    assert.deepEqual(
      [...Deno.readDirSync(home)],
      [],
      "doctor creates nothing in the home (its probe daemon had its own)",
    );
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("doctor with a running daemon reports it and takes the boundary from it", async () => {
  const home = await tempHome();
  try {
    await using d = await startDaemon(home);
    const r = await termada(home, ["doctor"]);
    const checks = parseDoctor(r.stdout);
    assert.match(checks.get("daemon")!.line, new RegExp(`running \\(pid ${d.proc.pid}, `));
    assert.match(checks.get("exec gate")!.line, /from the running daemon/);
    assert.equal(checks.get("state dir")!.status, "OK", r.stdout);
    assert.equal(checks.get("token")!.status, "OK", r.stdout);
    assert.match(checks.get("audit")!.line, /^OK .* [1-9]\d* records verified/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("doctor: a broken config FAILs (exit 1); a loose state dir WARNs; a readable token FAILs", async () => {
  const home = await tempHome();
  try {
    await Deno.writeTextFile(join(home, "config.yaml"), "sessions:\n  shell: fish\n");
    const bad = await termada(home, ["doctor"]);
    assert.equal(bad.code, 1, bad.stdout);
    const c = parseDoctor(bad.stdout).get("config")!;
    assert.equal(c.status, "FAIL");
    assert.match(c.line, /config\.yaml/);
    assert.match(c.line, /shell/);

    await Deno.remove(join(home, "config.yaml"));
    await Deno.chmod(home, 0o755);
    await Deno.writeTextFile(join(home, "token"), "t0ken\n", { mode: 0o644 });
    await Deno.chmod(join(home, "token"), 0o644);
    const loose = await termada(home, ["doctor"]);
    const checks = parseDoctor(loose.stdout);
    assert.equal(checks.get("state dir")!.status, "WARN", loose.stdout);
    assert.match(checks.get("state dir")!.fix!, /^chmod 700 /);
    assert.equal(checks.get("token")!.status, "FAIL", loose.stdout);
    assert.match(checks.get("token")!.fix!, /^chmod 600 /);
    assert.equal(loose.code, 1);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

/** A `systemctl` that logs its arguments; `up` decides whether a user manager answers. */
async function fakeSystemctl(dir: string, up: boolean): Promise<string> {
  const log = join(dir, "systemctl.log");
  await Deno.writeTextFile(
    join(dir, "systemctl"),
    `#!/bin/sh\necho "$*" >> '${log}'\n` +
      (up
        ? `case "$*" in *is-active*) echo active;; esac\nexit 0\n`
        : `echo "Failed to connect to bus: No medium found" >&2\nexit 1\n`),
    { mode: 0o755 },
  );
  return log;
}

Deno.test("service install, status and uninstall on a temp HOME, with and without a user manager", async (t) => {
  const { home, env } = await emptyHome();
  const bin = join(home, "bin");
  await Deno.mkdir(bin);
  const svc = { ...env, PATH: `${bin}:${env.PATH}` };
  const unit = join(home, ".config", "systemd", "user", "termada.service");
  try {
    await t.step("without a user manager: the unit is written, the commands printed", async () => {
      const log = await fakeSystemctl(bin, false);
      const dry = await termada(home, ["service", "install", "--dry-run"], svc);
      assert.equal(dry.code, 0, dry.stderr);
      assert.match(dry.stdout, /^would write ~\/\.config\/systemd\/user\/termada\.service$/m);
      assert.match(dry.stdout, /^ExecStart=.*mod\.ts serve$/m);
      assert.throws(() => Deno.statSync(unit), "dry run writes nothing");

      const r = await termada(home, ["service", "install"], svc);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^wrote ~\/\.config\/systemd\/user\/termada\.service$/m);
      assert.match(r.stdout, /^WARN {2}systemctl --user is not available \(Failed to connect/m);
      assert.match(r.stdout, /^ {2}systemctl --user daemon-reload$/m);
      assert.match(r.stdout, /^ {2}systemctl --user enable --now termada\.service$/m);
      const text = await Deno.readTextFile(unit);
      assert.match(text, new RegExp(`^Environment="TERMADA_HOME=${home}"$`, "m"));
      assert.equal(await Deno.readTextFile(log), "--user show-environment\n");

      const s = await termada(home, ["service", "status"], svc);
      assert.equal(s.code, 0, s.stdout + s.stderr);
      assert.match(
        s.stdout,
        /^installed: ~\/\.config\/systemd\/user\/termada\.service \(up to date\)$/m,
      );
    });

    await t.step({
      name: "the written unit passes systemd-analyze verify",
      ignore: (() => {
        try {
          Deno.statSync(SYSTEMD_ANALYZE);
          return false;
        } catch {
          return true;
        }
      })(),
      fn: async () => {
        const r = await new Deno.Command(SYSTEMD_ANALYZE, {
          args: ["verify", unit],
          stdout: "piped",
          stderr: "piped",
        }).output();
        const err = new TextDecoder().decode(r.stderr);
        assert.equal(r.code, 0, err);
        assert.equal(err.trim(), "", "no warnings");
      },
    });

    await t.step(
      "with a user manager: enabled, active; uninstall disables and removes",
      async () => {
        const log = await fakeSystemctl(bin, true);
        await Deno.remove(log).catch(() => {});
        const again = await termada(home, ["service", "install", "--json"], svc);
        assert.equal(again.code, 0, again.stderr);
        const j = JSON.parse(again.stdout);
        assert.equal(j.file_action, "unchanged");
        assert.deepEqual(j.ran.map((x: { command: string }) => x.command), [
          "systemctl --user daemon-reload",
          "systemctl --user enable --now termada.service",
        ]);
        const s = await termada(home, ["service", "status"], svc);
        assert.match(s.stdout, /^termada\.service: active$/m);
        const u = await termada(home, ["service", "uninstall"], svc);
        assert.equal(u.code, 0, u.stderr);
        assert.match(u.stdout, /^removed ~\/\.config\/systemd\/user\/termada\.service$/m);
        assert.match(u.stdout, /^ran systemctl --user disable --now termada\.service$/m);
        assert.throws(() => Deno.statSync(unit));
        const twice = await termada(home, ["service", "uninstall"], svc);
        assert.equal(twice.code, 0);
        assert.match(twice.stdout, /^not installed: nothing to remove at /m);
        const gone = await termada(home, ["service", "status"], svc);
        assert.equal(gone.code, 1, "status says so in its exit code");
        assert.match(gone.stdout, /^not installed/m);
      },
    );

    await t.step("bad input is a usage error", async () => {
      const r = await termada(home, ["service", "restart"], svc);
      assert.equal(r.code, 2);
      assert.match(r.stderr, /Unknown service command "restart"/);
      const f = await termada(home, ["service", "install", "--now"], svc);
      assert.equal(f.code, 2);
      assert.match(f.stderr, /Unknown option "--now"/);
    });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

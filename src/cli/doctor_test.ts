import assert from "node:assert/strict";
import { join } from "node:path";
import type { Boundary } from "../wire/mod.ts";
import {
  checkAudit,
  checkBoundary,
  checkClock,
  checkPort,
  type CheckResult,
  checkShell,
  checkStateDir,
  checkToken,
  formatChecks,
  type Probes,
  runDoctor,
} from "./doctor.ts";

const BOUNDARY: Boundary = {
  mode: "auto",
  exec_gate: { active: true },
  hiding: { active: true, how: "landlock" },
  landlock: { active: true, abi: 7 },
  terminals: { active: true },
  cgroup: { active: true },
  subreaper: true,
  run_as: null,
};

/** A machine where everything works, unless a test says otherwise. */
function probes(over: Partial<Probes> = {}): Probes {
  let t = Date.parse("2026-06-01T00:00:00Z");
  let m = 0;
  return {
    openPty: () => "/dev/pts/9",
    which: (name) => `/usr/bin/${name}`,
    shellVersion: (_p, kind) => Promise.resolve(kind === "bash" ? "5.2" : "5.9"),
    daemon: () => Promise.resolve(undefined),
    boundary: () => Promise.resolve({ boundary: BOUNDARY, source: "a probe daemon" }),
    banner: () => Promise.resolve("SSH-2.0-OpenSSH_9.2p1"),
    portFree: () => true,
    now: () => t,
    monotonic: () => m,
    sleep: (ms) => {
      t += ms;
      m += ms;
      return Promise.resolve();
    },
    uid: () => Deno.uid(),
    ...over,
  };
}

async function withHome(fn: (home: string) => Promise<void>): Promise<void> {
  const home = await Deno.makeTempDir({ prefix: "termada-doctor-test-" });
  try {
    await fn(home);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
}

const byName = (rs: CheckResult[]) => Object.fromEntries(rs.map((r) => [r.check, r]));

Deno.test("doctor on a healthy machine: every check OK, in a fixed order", async () => {
  await withHome(async (home) => {
    const rs = await runDoctor({ env: { HOME: home, TERMADA_HOME: home }, probes: probes() });
    assert.deepEqual(rs.map((r) => r.check), [
      "config",
      "pty",
      "bash",
      "zsh",
      "exec gate",
      "landlock",
      "cgroups",
      "hiding",
      "terminals",
      "servers",
      "state dir",
      "token",
      "port",
      "audit",
      "clock",
      "daemon",
    ]);
    assert.deepEqual(rs.filter((r) => r.status !== "OK"), []);
  });
});

Deno.test("doctor reports a broken config as FAIL and goes on with the defaults", async () => {
  await withHome(async (home) => {
    await Deno.writeTextFile(join(home, "config.yaml"), "server:\n  bind: 10.0.0.1:80\n");
    const rs = byName(
      await runDoctor({ env: { HOME: home, TERMADA_HOME: home }, probes: probes() }),
    );
    assert.equal(rs.config!.status, "FAIL");
    assert.match(rs.config!.detail, /config\.yaml/);
    assert.match(rs.config!.detail, /loopback/);
    assert.ok(rs.config!.fix);
    assert.equal(rs.pty!.status, "OK", "the other checks still ran");
  });
});

Deno.test("doctor checks each configured server's sshd banner", async () => {
  await withHome(async (home) => {
    await Deno.writeTextFile(
      join(home, "config.yaml"),
      "servers:\n  - {name: web, host: 127.0.0.1, port: 2222, user: deploy}\n" +
        "  - {name: db, host: 127.0.0.2, user: root}\n" +
        "  - {name: http, host: 127.0.0.3, port: 80, user: x}\n",
    );
    const rs = byName(
      await runDoctor({
        env: { HOME: home, TERMADA_HOME: home },
        probes: probes({
          banner: (host) =>
            host === "127.0.0.1"
              ? Promise.resolve("SSH-2.0-OpenSSH_9.2p1")
              : host === "127.0.0.2"
              ? Promise.reject(new Error("Connection refused"))
              : Promise.resolve("HTTP/1.1 400 Bad Request"),
        }),
      }),
    );
    assert.equal(rs["server web"]!.status, "OK");
    assert.match(rs["server web"]!.detail, /deploy@127\.0\.0\.1:2222 SSH-2\.0-OpenSSH/);
    assert.equal(rs["server db"]!.status, "FAIL");
    assert.match(rs["server db"]!.detail, /127\.0\.0\.2:22 unreachable: Connection refused/);
    assert.equal(rs["server http"]!.status, "FAIL");
    assert.match(rs["server http"]!.detail, /not as sshd/);
  });
});

Deno.test("doctor: a probe that throws becomes its line, never an exception", async () => {
  await withHome(async (home) => {
    const rs = byName(
      await runDoctor({
        env: { HOME: home, TERMADA_HOME: home },
        probes: probes({
          openPty: () => {
            throw new Error("ENXIO");
          },
          boundary: () => Promise.reject(new Error("a daemon cannot start here: boom")),
        }),
      }),
    );
    assert.equal(rs.pty!.status, "FAIL");
    assert.match(rs.pty!.detail, /ENXIO/);
    assert.equal(rs.boundary!.status, "WARN");
    assert.match(rs.boundary!.detail, /boom/);
  });
});

Deno.test("doctor: state dir and token permissions", () => {
  const uid = 1000;
  const dir = (mode: number, owner = uid) =>
    ({ isDirectory: true, mode: 0o40000 | mode, uid: owner }) as Deno.FileInfo;
  assert.equal(checkStateDir("/s", undefined, uid).status, "OK");
  assert.equal(checkStateDir("/s", dir(0o700), uid).status, "OK");
  const loose = checkStateDir("/s", dir(0o755), uid);
  assert.equal(loose.status, "WARN");
  assert.match(loose.detail, /0755.*other users/);
  assert.equal(loose.fix, "chmod 700 /s (the daemon also does at its next start)");
  assert.equal(checkStateDir("/s", dir(0o700, 0), uid).status, "FAIL");
  const file = (mode: number) => ({ isFile: true, mode: 0o100000 | mode, uid }) as Deno.FileInfo;
  assert.equal(checkToken("/s/token", file(0o600), uid).status, "OK");
  const open = checkToken("/s/token", file(0o644), uid);
  assert.equal(open.status, "FAIL");
  assert.match(open.fix!, /^chmod 600 \/s\/token/);
});

Deno.test("doctor: shells", () => {
  assert.equal(checkShell("bash", "/bin/bash", "5.2", true).status, "OK");
  assert.equal(checkShell("bash", "/bin/bash", "4.3", true).status, "FAIL");
  assert.equal(checkShell("bash", undefined, undefined, true).status, "FAIL");
  const zsh = checkShell("zsh", undefined, undefined, false);
  assert.equal(zsh.status, "OK");
  assert.match(zsh.detail, /optional/);
  assert.equal(checkShell("zsh", undefined, undefined, true).status, "FAIL");
});

Deno.test("doctor: the boundary, against the configured exec_gate mode", () => {
  const none: Boundary = {
    ...BOUNDARY,
    exec_gate: { active: false, reason: "the kernel has no seccomp user notification" },
    landlock: { active: false, abi: 0, reason: "no Landlock" },
    cgroup: { active: false, reason: "No cgroup2 hierarchy" },
    hiding: { active: false, reason: "neither" },
    terminals: { active: false, reason: "a devpts instance per session needs a mount namespace" },
  };
  const auto = checkBoundary(none, "a probe daemon", "auto");
  assert.deepEqual(auto.map((v) => v.status), ["WARN", "WARN", "WARN", "WARN", "WARN"]);
  assert.match(auto[4]!.detail, /share the host's terminals/);
  assert.match(auto[0]!.detail, /no seccomp user notification/);
  assert.ok(auto.every((v) => v.fix));
  assert.equal(checkBoundary(none, "x", "required")[0]!.status, "FAIL");
  const off = checkBoundary(BOUNDARY, "x", "off")[0]!;
  assert.equal(off.status, "WARN");
  assert.match(off.detail, /off in the config/);
});

Deno.test("doctor: port clashes", () => {
  const taken = () => false;
  assert.equal(checkPort(null, () => true, undefined).status, "OK");
  assert.equal(checkPort(null, taken, 7717).status, "OK", "our own daemon");
  assert.equal(checkPort(null, taken, undefined).status, "WARN", "the default is a preference");
  assert.equal(checkPort("127.0.0.1:8800", taken, undefined).status, "FAIL");
  assert.equal(checkPort("127.0.0.1:0", taken, undefined).status, "OK");
});

Deno.test("doctor: the audit chain is verified offline; a broken one FAILs", async () => {
  await withHome(async (home) => {
    assert.equal(checkAudit(join(home, "audit")).status, "OK");
    await Deno.mkdir(join(home, "audit"));
    await Deno.writeTextFile(
      join(home, "audit", "audit-000001.jsonl"),
      '{"seq":1,"garbage":true}\n',
    );
    const r = checkAudit(join(home, "audit"));
    assert.equal(r.status, "FAIL", JSON.stringify(r));
    assert.match(r.detail, /BROKEN/);
  });
});

Deno.test("doctor: the clock", () => {
  const t = Date.parse("2026-06-01T00:00:00Z");
  assert.equal(checkClock([t, t + 100], [0, 100]).status, "OK");
  assert.equal(checkClock([0, 100], [0, 100]).status, "FAIL", "1970");
  assert.equal(checkClock([t, t + 5000], [0, 100]).status, "WARN", "a jump");
});

Deno.test("doctor output: one line per check, a fix line under WARN and FAIL, a summary", () => {
  const text = formatChecks([
    { check: "pty", status: "OK", detail: "/dev/pts/1 opened and closed", ms: 1 },
    { check: "state dir", status: "WARN", detail: "loose", fix: "chmod 700 /s", ms: 1 },
  ], 42);
  assert.equal(
    text,
    "OK    pty        /dev/pts/1 opened and closed\n" +
      "WARN  state dir  loose\n" +
      "                 fix: chmod 700 /s\n" +
      "1 ok, 1 warning(s), 0 failure(s) in 42 ms\n",
  );
});

import assert from "node:assert/strict";
import { join } from "node:path";
import { TermadaError } from "../shared/mod.ts";
import {
  ensurePrivateDir,
  ensureSharedDir,
  ensureStateDirs,
  MAX_SOCKET_PATH_BYTES,
  resolvePaths,
  runAsSessionsDir,
} from "./paths.ts";

const HOME_ONLY = { HOME: "/home/ada" };

Deno.test("resolvePaths follows the XDG fallbacks under $HOME", () => {
  const p = resolvePaths({ env: HOME_ONLY });
  assert.equal(p.configFile, "/home/ada/.config/termada/config.yaml");
  assert.equal(p.stateDir, "/home/ada/.local/state/termada");
  assert.equal(p.socketPath, "/home/ada/.local/state/termada/termada.sock");
  assert.equal(p.lockPath, "/home/ada/.local/state/termada/termada.lock");
  assert.equal(p.dbPath, "/home/ada/.local/state/termada/termada.db");
  assert.equal(p.logPath, "/home/ada/.local/state/termada/daemon.log");
  assert.equal(p.recordingsDir, "/home/ada/.local/state/termada/recordings");
  assert.equal(p.spoolDir, "/home/ada/.local/state/termada/spool");
  assert.equal(p.runtimeDir, "/home/ada/.local/state/termada/run");
  assert.equal(p.tokenFile, "/home/ada/.local/state/termada/token");
});

Deno.test("resolvePaths uses XDG_CONFIG_HOME and XDG_STATE_HOME when absolute", async (t) => {
  await t.step("absolute values are used", () => {
    const p = resolvePaths({
      env: { ...HOME_ONLY, XDG_CONFIG_HOME: "/cfg", XDG_STATE_HOME: "/st" },
    });
    assert.equal(p.configFile, "/cfg/termada/config.yaml");
    assert.equal(p.stateDir, "/st/termada");
    assert.equal(p.dbPath, "/st/termada/termada.db");
  });
  await t.step("relative values are ignored, as the XDG spec says", () => {
    const p = resolvePaths({
      env: { ...HOME_ONLY, XDG_CONFIG_HOME: "cfg", XDG_STATE_HOME: "" },
    });
    assert.equal(p.configFile, "/home/ada/.config/termada/config.yaml");
    assert.equal(p.stateDir, "/home/ada/.local/state/termada");
  });
});

Deno.test("TERMADA_HOME puts config and state in one directory", async (t) => {
  const env = { ...HOME_ONLY, XDG_STATE_HOME: "/st", TERMADA_HOME: "/srv/termada" };
  await t.step("from the environment", () => {
    const p = resolvePaths({ env });
    assert.equal(p.configFile, "/srv/termada/config.yaml");
    assert.equal(p.stateDir, "/srv/termada");
    assert.equal(p.socketPath, "/srv/termada/termada.sock");
    assert.equal(p.runtimeDir, "/srv/termada/run");
  });
  await t.step("the home option wins over the environment", () => {
    const p = resolvePaths({ env, home: "/tmp/h" });
    assert.equal(p.configFile, "/tmp/h/config.yaml");
    assert.equal(p.stateDir, "/tmp/h");
  });
  await t.step("needs no HOME", () => {
    assert.equal(resolvePaths({ env: {}, home: "/tmp/h" }).stateDir, "/tmp/h");
  });
});

Deno.test("--config overrides only the config file", () => {
  const p = resolvePaths({ env: HOME_ONLY, configFile: "/etc/termada.yaml" });
  assert.equal(p.configFile, "/etc/termada.yaml");
  assert.equal(p.stateDir, "/home/ada/.local/state/termada");
  const q = resolvePaths({ env: HOME_ONLY, home: "/h", configFile: "/other.yaml" });
  assert.equal(q.configFile, "/other.yaml");
  assert.equal(q.stateDir, "/h");
});

Deno.test("resolvePaths without HOME or XDG dirs names what to set", () => {
  assert.throws(
    () => resolvePaths({ env: {} }),
    (err) =>
      err instanceof TermadaError && err.code === "INVALID_ARGUMENT" && /HOME/.test(err.message),
  );
});

Deno.test("a socket path over 107 bytes falls back to a short private location", async (t) => {
  const longHome = "/" + "d".repeat(120);
  await t.step("to XDG_RUNTIME_DIR when set", () => {
    const p = resolvePaths({ env: { XDG_RUNTIME_DIR: "/run/user/1000" }, home: longHome });
    assert.match(p.socketPath, /^\/run\/user\/1000\/termada-[0-9a-f]{12}\.sock$/);
    assert.equal(p.stateDir, longHome);
    assert.equal(p.dbPath, join(longHome, "termada.db"));
  });
  await t.step("to a per-user directory in /tmp otherwise", () => {
    const p = resolvePaths({ env: {}, home: longHome });
    const uid = Deno.uid() ?? 0;
    assert.match(p.socketPath, new RegExp(`^/tmp/termada-${uid}-[0-9a-f]{12}/termada\\.sock$`));
  });
  await t.step("the name depends on the state dir", () => {
    const a = resolvePaths({ env: {}, home: longHome }).socketPath;
    const b = resolvePaths({ env: {}, home: longHome + "x" }).socketPath;
    assert.notEqual(a, b);
    assert.equal(a, resolvePaths({ env: {}, home: longHome }).socketPath);
  });
  await t.step("a path of exactly 107 bytes stays in the state dir", () => {
    const home = "/" + "e".repeat(MAX_SOCKET_PATH_BYTES - "/termada.sock".length - 1);
    const p = resolvePaths({ env: {}, home });
    assert.equal(new TextEncoder().encode(p.socketPath).length, MAX_SOCKET_PATH_BYTES);
    assert.equal(p.socketPath, join(home, "termada.sock"));
  });
  await t.step("multi-byte characters count as bytes", () => {
    const home = "/" + "é".repeat(50); // 100 bytes, 50 characters
    assert.notEqual(resolvePaths({ env: {}, home }).socketPath, join(home, "termada.sock"));
  });
});

function modeOf(path: string): number {
  return (Deno.statSync(path).mode ?? 0) & 0o777;
}

Deno.test("ensurePrivateDir creates missing directories with mode 0700", () => {
  const tmp = Deno.makeTempDirSync({ prefix: "termada-cfg-" });
  try {
    const dir = join(tmp, "a", "b", "state");
    ensurePrivateDir(dir);
    assert.ok(Deno.statSync(dir).isDirectory);
    assert.equal(modeOf(dir), 0o700);
    ensurePrivateDir(dir); // idempotent
    assert.equal(modeOf(dir), 0o700);
  } finally {
    Deno.removeSync(tmp, { recursive: true });
  }
});

Deno.test("ensurePrivateDir forces 0700 on an existing looser directory", () => {
  const tmp = Deno.makeTempDirSync({ prefix: "termada-cfg-" });
  try {
    const dir = join(tmp, "open");
    Deno.mkdirSync(dir);
    Deno.chmodSync(dir, 0o755);
    ensurePrivateDir(dir);
    assert.equal(modeOf(dir), 0o700);
  } finally {
    Deno.removeSync(tmp, { recursive: true });
  }
});

Deno.test("ensurePrivateDir refuses a file in the way", () => {
  const tmp = Deno.makeTempDirSync({ prefix: "termada-cfg-" });
  try {
    const file = join(tmp, "state");
    Deno.writeTextFileSync(file, "not a dir");
    assert.throws(
      () => ensurePrivateDir(file),
      (err) =>
        err instanceof TermadaError && err.code === "INVALID_ARGUMENT" &&
        err.message === `Cannot use "${file}" as a private directory: it is not a directory`,
    );
    assert.equal(Deno.readTextFileSync(file), "not a dir");
  } finally {
    Deno.removeSync(tmp, { recursive: true });
  }
});

Deno.test("ensurePrivateDir follows the user's own symlink to a directory", () => {
  const tmp = Deno.makeTempDirSync({ prefix: "termada-cfg-" });
  try {
    const real = join(tmp, "real");
    Deno.mkdirSync(real, { mode: 0o755 });
    Deno.chmodSync(real, 0o755);
    const link = join(tmp, "link");
    Deno.symlinkSync(real, link);
    ensurePrivateDir(link);
    assert.equal(modeOf(real), 0o700);
    // A link to a file is still not a directory.
    const file = join(tmp, "f");
    Deno.writeTextFileSync(file, "");
    Deno.symlinkSync(file, join(tmp, "flink"));
    assert.throws(() => ensurePrivateDir(join(tmp, "flink")), /it is not a directory/);
  } finally {
    Deno.removeSync(tmp, { recursive: true });
  }
});

Deno.test("ensureStateDirs creates every private directory the daemon writes to", () => {
  const tmp = Deno.makeTempDirSync({ prefix: "termada-cfg-" });
  try {
    const p = resolvePaths({ env: {}, home: join(tmp, "home") });
    ensureStateDirs(p);
    for (const dir of [p.stateDir, p.recordingsDir, p.spoolDir, p.runtimeDir]) {
      assert.equal(modeOf(dir), 0o700, dir);
    }
  } finally {
    Deno.removeSync(tmp, { recursive: true });
  }
});

Deno.test({
  name: "ensurePrivateDir refuses a directory owned by another user",
  ignore: Deno.uid() !== 0, // only root can hand a directory to someone else
  fn() {
    const tmp = Deno.makeTempDirSync({ prefix: "termada-cfg-" });
    try {
      const dir = join(tmp, "theirs");
      Deno.mkdirSync(dir);
      Deno.chownSync(dir, 65534, 65534);
      assert.throws(() => ensurePrivateDir(dir), /owned by another user \(uid 65534/);
    } finally {
      Deno.removeSync(tmp, { recursive: true });
    }
  },
});

Deno.test("runAsSessionsDir: one directory per state dir, in /run when only root writes there", async () => {
  const a = runAsSessionsDir("/srv/a");
  assert.match(a, /^\/run\/termada-[0-9a-f]{12}$|^\/tmp\/termada-\d+-[0-9a-f]{12}-sessions$/);
  assert.equal(runAsSessionsDir("/srv/a"), a);
  assert.notEqual(runAsSessionsDir("/srv/b"), a);
  // A /run anyone may write to is not used: someone could take the name first.
  const open = await Deno.makeTempDir({ prefix: "termada-run-" });
  try {
    Deno.chmodSync(open, 0o777);
    assert.match(runAsSessionsDir("/srv/a", open), /^\/tmp\/termada-\d+-[0-9a-f]{12}-sessions$/);
  } finally {
    await Deno.remove(open, { recursive: true });
  }
});

Deno.test("ensureSharedDir makes a 0711 directory of its own and refuses a symlink", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "termada-shared-" });
  try {
    const dir = join(tmp, "sessions");
    ensureSharedDir(dir);
    assert.equal((Deno.statSync(dir).mode ?? 0) & 0o7777, 0o711);
    Deno.chmodSync(dir, 0o755);
    ensureSharedDir(dir);
    assert.equal((Deno.statSync(dir).mode ?? 0) & 0o7777, 0o711, "loosened modes are fixed");
    Deno.symlinkSync(dir, join(tmp, "link"));
    assert.throws(() => ensureSharedDir(join(tmp, "link")), TermadaError);
    Deno.writeTextFileSync(join(tmp, "file"), "");
    assert.throws(() => ensureSharedDir(join(tmp, "file")), TermadaError);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

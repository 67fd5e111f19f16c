import assert from "node:assert/strict";
import { join } from "node:path";
import {
  formatReport,
  install,
  launchdPlist,
  type ServiceContext,
  serviceFile,
  status,
  type Systemctl,
  systemdUnit,
  uninstall,
  type UnitInputs,
} from "./service.ts";

const SYSTEMD_ANALYZE = "/usr/bin/systemd-analyze";

function inputs(command = "/usr/bin/true", extra: Partial<UnitInputs> = {}): UnitInputs {
  return {
    launch: { command, args: ["serve"], source: "path" },
    env: {},
    stateDir: "/home/a/.local/state/termada",
    ...extra,
  };
}

/** A user manager that records what it was asked; `up: false` is a machine without one. */
function fakeSystemctl(up: boolean): Systemctl & { calls: string[][] } {
  const calls: string[][] = [];
  return {
    calls,
    available: () =>
      Promise.resolve(up ? { ok: true } : { ok: false, reason: "Failed to connect to bus" }),
    run: (args) => {
      calls.push(args);
      return Promise.resolve(
        args[0] === "is-active" ? { code: 0, out: "active" } : { code: 0, out: "" },
      );
    },
  };
}

async function withHome(fn: (home: string) => Promise<void>): Promise<void> {
  const home = await Deno.makeTempDir({ prefix: "termada-service-" });
  try {
    await fn(home);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
}

function ctx(home: string, systemctl: Systemctl, platform: "linux" | "darwin" = "linux") {
  return {
    platform,
    home,
    env: {},
    uid: 1000,
    inputs: inputs(),
    systemctl,
  } satisfies ServiceContext;
}

Deno.test("the systemd unit passes systemd-analyze verify, quoting and escaping included", async (t) => {
  let analyze = true;
  try {
    Deno.statSync(SYSTEMD_ANALYZE);
  } catch {
    analyze = false;
  }
  const cases: [string, UnitInputs][] = [
    ["plain", inputs()],
    ["from source with awkward words", {
      launch: {
        command: "/usr/bin/true",
        args: ["run", "--config", "/a dir/deno.json", "100%", "$HOME", 'q"x', "serve"],
        source: "source",
      },
      env: { TERMADA_HOME: "/tmp/my home%", DENO_DIR: "/cache/deno" },
      stateDir: "/tmp/my home%",
    }],
  ];
  for (const [name, i] of cases) {
    await t.step({
      name,
      ignore: !analyze,
      fn: async () => {
        const dir = await Deno.makeTempDir({ prefix: "termada-unit-" });
        try {
          const file = join(dir, "termada.service");
          await Deno.writeTextFile(file, systemdUnit(i));
          const r = await new Deno.Command(SYSTEMD_ANALYZE, {
            args: ["verify", file],
            stdout: "piped",
            stderr: "piped",
          }).output();
          const err = new TextDecoder().decode(r.stderr);
          assert.equal(r.code, 0, err);
          assert.equal(err.trim(), "", "no warnings either");
        } finally {
          await Deno.remove(dir, { recursive: true });
        }
      },
    });
  }
});

Deno.test("the systemd unit restarts on failure, logs to the journal and passes TERMADA_HOME only when set", () => {
  const plain = systemdUnit(inputs());
  assert.match(plain, /^ExecStart=\/usr\/bin\/true serve$/m);
  assert.match(plain, /^Restart=on-failure$/m);
  assert.match(plain, /^StandardOutput=journal$/m);
  assert.match(plain, /^StandardError=journal$/m);
  assert.match(plain, /^WantedBy=default.target$/m);
  assert.doesNotMatch(plain, /Environment=/);
  assert.doesNotMatch(plain, /ProtectHome|PrivateTmp|ProtectSystem/, "agents need the real home");
  const home = systemdUnit(
    inputs("/usr/bin/true", { env: { TERMADA_HOME: "/t", DENO_DIR: "/d" } }),
  );
  assert.match(home, /^Environment="TERMADA_HOME=\/t"$/m);
  assert.doesNotMatch(home, /DENO_DIR/, "DENO_DIR only for a run from source");
  const source = systemdUnit({
    ...inputs(),
    launch: { command: "/usr/bin/deno", args: ["run", "x.ts", "serve"], source: "source" },
    env: { DENO_DIR: "/d" },
  });
  assert.match(source, /^Environment="DENO_DIR=\/d"$/m);
});

Deno.test("the LaunchAgent plist runs the daemon at load, keeps it alive on failure and logs under the state dir", () => {
  const text = launchdPlist(inputs("/opt/t&t/termada", { env: { TERMADA_HOME: "/x<y" } }));
  assert.match(text, /^<\?xml version="1.0" encoding="UTF-8"\?>\n<!DOCTYPE plist/);
  assert.match(text, /<key>Label<\/key><string>dev.termada<\/string>/);
  assert.match(
    text,
    /<key>ProgramArguments<\/key>\n {2}<array>\n {4}<string>\/opt\/t&amp;t\/termada<\/string>\n {4}<string>serve<\/string>\n {2}<\/array>/,
  );
  assert.match(text, /<key>RunAtLoad<\/key><true\/>/);
  assert.match(text, /<key>KeepAlive<\/key><dict><key>SuccessfulExit<\/key><false\/><\/dict>/);
  assert.match(
    text,
    /<key>StandardErrorPath<\/key><string>\/home\/a\/.local\/state\/termada\/launchd.log<\/string>/,
  );
  assert.match(text, /<key>TERMADA_HOME<\/key><string>\/x&lt;y<\/string>/);
  // Balanced tags: every opened element is closed.
  for (const tag of ["dict", "array", "plist"]) {
    assert.equal(
      text.match(new RegExp(`<${tag}[ >]`, "g"))?.length,
      text.match(new RegExp(`</${tag}>`, "g"))?.length,
      tag,
    );
  }
});

Deno.test("service install writes the unit and enables it when a user manager answers; again it is unchanged", async () => {
  await withHome(async (home) => {
    const sc = fakeSystemctl(true);
    const c = ctx(home, sc);
    const r = await install(c);
    const file = join(home, ".config", "systemd", "user", "termada.service");
    assert.equal(r.file, file);
    assert.equal(r.file_action, "written");
    assert.equal(await Deno.readTextFile(file), systemdUnit(c.inputs));
    assert.deepEqual(sc.calls, [["daemon-reload"], ["enable", "--now", "termada.service"]]);
    assert.equal(r.ok, true);
    assert.equal((await install(c)).file_action, "unchanged");
    const s = await status(c);
    assert.deepEqual([s.installed, s.current, s.active, s.ok], [true, true, "active", true]);
  });
});

Deno.test("service install without a user manager writes the unit and prints the commands with a WARN", async () => {
  await withHome(async (home) => {
    const sc = fakeSystemctl(false);
    const r = await install(ctx(home, sc));
    assert.equal(r.ok, true);
    assert.deepEqual(sc.calls, []);
    const text = formatReport("install", r, home, false);
    assert.equal(
      text,
      "wrote ~/.config/systemd/user/termada.service\n" +
        "WARN  systemctl --user is not available (Failed to connect to bus); " +
        "run these in your login session:\n" +
        "  systemctl --user daemon-reload\n" +
        "  systemctl --user enable --now termada.service\n",
    );
  });
});

Deno.test("service install --dry-run changes nothing and shows the file", async () => {
  await withHome(async (home) => {
    const sc = fakeSystemctl(true);
    const r = await install(ctx(home, sc), true);
    assert.equal(r.file_action, "would write");
    assert.deepEqual(sc.calls, []);
    assert.deepEqual([...Deno.readDirSync(home)], []);
    assert.match(formatReport("install", r, home, true), /^would write .*\n\n# Written by/);
  });
});

Deno.test("service status notices a unit that differs from what install writes", async () => {
  await withHome(async (home) => {
    const c = ctx(home, fakeSystemctl(false));
    assert.equal((await status(c)).installed, false);
    await install(c);
    const file = serviceFile(c);
    await Deno.writeTextFile(file, (await Deno.readTextFile(file)).replace("2s", "9s"));
    const s = await status(c);
    assert.deepEqual([s.installed, s.current, s.ok], [true, false, false]);
    assert.match(formatReport("status", s, home, false), /differs from what install writes/);
  });
});

Deno.test("service uninstall stops, removes and is idempotent", async () => {
  await withHome(async (home) => {
    const sc = fakeSystemctl(true);
    const c = ctx(home, sc);
    await install(c);
    sc.calls.length = 0;
    const r = await uninstall(c);
    assert.equal(r.file_action, "removed");
    assert.deepEqual(sc.calls, [["disable", "--now", "termada.service"], ["daemon-reload"]]);
    assert.throws(() => Deno.statSync(serviceFile(c)));
    const again = await uninstall(c);
    assert.equal(again.file_action, "absent");
    assert.equal(again.ok, true);
  });
});

Deno.test("service uninstall without a user manager also removes the enable link", async () => {
  await withHome(async (home) => {
    const c = ctx(home, fakeSystemctl(false));
    await install(c);
    const file = serviceFile(c);
    const wants = join(file, "..", "default.target.wants");
    await Deno.mkdir(wants);
    await Deno.symlink(file, join(wants, "termada.service"));
    const r = await uninstall(c);
    assert.equal(r.file_action, "removed");
    assert.deepEqual([...Deno.readDirSync(wants)], []);
    assert.match(r.warning ?? "", /not available/);
  });
});

Deno.test("service on macOS writes the LaunchAgent and prints the launchctl commands", async () => {
  await withHome(async (home) => {
    const c = ctx(home, fakeSystemctl(true), "darwin");
    const r = await install(c);
    assert.equal(r.file, join(home, "Library", "LaunchAgents", "dev.termada.plist"));
    assert.deepEqual(r.todo, [`launchctl bootstrap gui/1000 ${r.file}`]);
    assert.equal(await Deno.readTextFile(r.file), launchdPlist(c.inputs));
    const u = await uninstall(c);
    assert.deepEqual(u.todo, ["launchctl bootout gui/1000/dev.termada"]);
  });
});

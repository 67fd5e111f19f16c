import assert from "node:assert/strict";
import { TermadaError } from "../shared/mod.ts";
import { capabilitySets } from "./drop.ts";
import {
  parseGroup,
  parsePasswd,
  resolveRunAs,
  runAsPrivilegeProblem,
  SETPRIV,
  setprivArgv,
} from "./run_as.ts";

const PASSWD = `root:x:0:0:root:/root:/bin/bash
# a comment
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
broken line
ada:x:1001:1001:Ada,,,:/home/ada:/bin/zsh
bob:x:1002:100::/home/bob:
svc:x:1003:0::/srv:/bin/sh
`;
const GROUP = `root:x:0:
tty:x:5:
users:x:100:ada,bob
ada:x:1001:
agents:x:2000:
`;
const FILES = { passwd: PASSWD, group: GROUP };
const DAEMON = { daemonUid: 0, where: 'Config "/c.yaml"' };

function configError(fn: () => unknown, key: string, pattern: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof TermadaError);
    assert.equal(err.code, "INVALID_ARGUMENT");
    assert.match(err.message, new RegExp(`^Config "/c\\.yaml": security\\.run_as\\.${key}: `));
    assert.match(err.message, pattern);
    assert.equal(err.details?.key, `security.run_as.${key}`);
    return true;
  });
}

Deno.test("parsePasswd and parseGroup read the fields and skip what is not an entry", () => {
  const users = parsePasswd(PASSWD);
  assert.deepEqual(users.map((u) => u.name), ["root", "daemon", "ada", "bob", "svc"]);
  assert.deepEqual(users[2], {
    name: "ada",
    uid: 1001,
    gid: 1001,
    home: "/home/ada",
    shell: "/bin/zsh",
  });
  assert.deepEqual(parseGroup(GROUP).find((g) => g.name === "users"), { name: "users", gid: 100 });
  assert.deepEqual(parsePasswd("x:x:-1:0::/:/bin/sh\ny:x:99999999999:0::/:/bin/sh\n"), []);
});

Deno.test("resolveRunAs finds the user by name or uid, with its primary group", async (t) => {
  await t.step("by name", () => {
    assert.deepEqual(resolveRunAs({ user: "ada" }, FILES, DAEMON), {
      user: "ada",
      uid: 1001,
      gid: 1001,
      group: "ada",
      home: "/home/ada",
      shell: "/bin/zsh",
      ttyGid: 5,
    });
  });
  await t.step("by uid, and an empty shell means /bin/sh", () => {
    const u = resolveRunAs({ user: "1002" }, FILES, DAEMON);
    assert.equal(u.user, "bob");
    assert.equal(u.gid, 100);
    assert.equal(u.group, "users");
    assert.equal(u.shell, "/bin/sh");
  });
  await t.step("a group given by name or id replaces the primary one", () => {
    assert.equal(resolveRunAs({ user: "ada", group: "agents" }, FILES, DAEMON).gid, 2000);
    const byId = resolveRunAs({ user: "ada", group: "3000" }, FILES, DAEMON);
    assert.equal(byId.gid, 3000);
    assert.equal(byId.group, "3000");
  });
  await t.step("without a tty group the terminal gets the user's group", () => {
    const u = resolveRunAs({ user: "ada" }, { passwd: PASSWD, group: "ada:x:1001:\n" }, DAEMON);
    assert.equal(u.ttyGid, 1001);
  });
});

Deno.test("resolveRunAs refuses, naming the field, what cannot separate sessions", async (t) => {
  await t.step("an unknown user or uid", () => {
    configError(() => resolveRunAs({ user: "eve" }, FILES, DAEMON), "user", /no user "eve"/);
    configError(() => resolveRunAs({ user: "4242" }, FILES, DAEMON), "user", /uid 4242/);
  });
  await t.step("an unknown group name", () => {
    configError(
      () => resolveRunAs({ user: "ada", group: "nope" }, FILES, DAEMON),
      "group",
      /no group "nope" in \/etc\/group/,
    );
  });
  await t.step("root, or root's group", () => {
    configError(() => resolveRunAs({ user: "root" }, FILES, DAEMON), "user", /is root/);
    configError(() => resolveRunAs({ user: "svc" }, FILES, DAEMON), "user", /gid 0/);
    configError(
      () => resolveRunAs({ user: "ada", group: "root" }, FILES, DAEMON),
      "group",
      /gid 0/,
    );
  });
  await t.step("the daemon's own user", () => {
    configError(
      () => resolveRunAs({ user: "ada" }, FILES, { ...DAEMON, daemonUid: 1001 }),
      "user",
      /the daemon's own user \(uid 1001\)/,
    );
  });
});

const status = (eff: string, amb = "0000000000000000") =>
  `Name:\tdeno\nCapInh:\t0000000000000000\nCapPrm:\t${eff}\nCapEff:\t${eff}\n` +
  `CapBnd:\t000001ffffffffff\nCapAmb:\t${amb}\n`;

Deno.test("runAsPrivilegeProblem: root with its capabilities may, anyone else must hold them", async (t) => {
  await t.step("root with every capability", () => {
    assert.equal(runAsPrivilegeProblem(status("000001ffffffffff"), 0), undefined);
  });
  await t.step("root without CAP_SETUID and CAP_SETGID", () => {
    const p = runAsPrivilegeProblem(status("000001ffffffff3f"), 0);
    assert.match(p ?? "", /needs the daemon to be root with its capabilities, or to hold/);
    assert.match(p ?? "", /lacks CAP_SETGID, CAP_SETUID$/);
  });
  await t.step("an ordinary user", () => {
    const p = runAsPrivilegeProblem(status("0000000000000000"), 1000);
    assert.match(p ?? "", /lacks CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_KILL, CAP_SETGID, CAP_SETUID/);
    assert.match(p ?? "", /does not hold CAP_CHOWN, CAP_SETGID, CAP_SETUID as ambient/);
  });
  await t.step("a user holding them, ambient too", () => {
    const caps = (0x1n | 0x2n | 0x20n | 0x40n | 0x80n | 0x80000n).toString(16).padStart(16, "0");
    const amb = (0x1n | 0x40n | 0x80n).toString(16).padStart(16, "0");
    assert.equal(runAsPrivilegeProblem(status(caps, amb), 1000), undefined);
    assert.match(runAsPrivilegeProblem(status(caps), 1000) ?? "", /as ambient/);
  });
});

Deno.test("capabilitySets reads the hex sets of /proc/<pid>/status", () => {
  assert.deepEqual(capabilitySets(status("00000000000000c1", "0000000000000001")), {
    inh: 0n,
    prm: 0xc1n,
    eff: 0xc1n,
    amb: 1n,
  });
  assert.equal(capabilitySets("Name:\tx\n"), undefined);
});

Deno.test("setprivArgv drops every id, the groups and the capabilities before the program", () => {
  const user = resolveRunAs({ user: "ada" }, FILES, DAEMON);
  assert.deepEqual(setprivArgv(user, ["bash", "-i"]), [
    SETPRIV,
    "--reuid=1001",
    "--regid=1001",
    "--clear-groups",
    "--inh-caps=-all",
    "--ambient-caps=-all",
    "--",
    "bash",
    "-i",
  ]);
});

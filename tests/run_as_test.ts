/**
 * Black-box tests of `security.run_as` (docs/SECURITY.md, run_as): a real unprivileged user made
 * for the test (useradd, removed with userdel -r), a real root daemon, and everything checked
 * from inside sessions and jobs: who they run as, what they can no longer reach (the state dir
 * and its token, other sessions' scratch directories), and that ordinary work still runs. Also
 * the refusals: an unknown user, root, a daemon without CAP_SETUID, the local file tools.
 *
 * Needs root and useradd: elsewhere every test here is ignored (the names say so).
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  call,
  DENO_ARGS,
  homeWithConfig,
  operatorFetch,
  startDaemon,
  stdioClient,
  termada,
  termadaEnv,
} from "./_daemon.ts";
import { runAsSessionsDir } from "../src/paths/mod.ts";

const USERADD = "/usr/sbin/useradd";
const CAN_RUN = Deno.uid() === 0 && exists(USERADD);
const NEEDS = CAN_RUN ? "" : " (ignored: needs root and useradd)";

type Obj = Record<string, unknown>;

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

async function run(cmd: string, args: string[]): Promise<{ code: number; out: string }> {
  const o = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  return { code: o.code, out: dec.decode(o.stdout) + dec.decode(o.stderr) };
}

interface TestUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

/** A fresh unprivileged user with its own group and home; `remove()` deletes both. */
async function createUser(): Promise<TestUser & AsyncDisposable> {
  const name = `tmra${crypto.randomUUID().slice(0, 8)}`;
  const r = await run(USERADD, ["--create-home", "--user-group", "--shell", "/bin/bash", name]);
  assert.equal(r.code, 0, `useradd: ${r.out}`);
  const uid = Number((await run("id", ["-u", name])).out.trim());
  const gid = Number((await run("id", ["-g", name])).out.trim());
  return {
    name,
    uid,
    gid,
    home: `/home/${name}`,
    async [Symbol.asyncDispose]() {
      await run("userdel", ["-r", "-f", name]);
    },
  };
}

function errorOf(r: Obj): { code: string; message: string; hint?: string } | undefined {
  return r.error as { code: string; message: string; hint?: string } | undefined;
}

const shown = (r: unknown) => JSON.stringify(r).slice(0, 2000);

/** Runs one shell line in the session and returns its exit code and output. */
async function inside(
  c: Client,
  sessionId: string,
  line: string,
): Promise<{ code: number; out: string }> {
  const r = await call(c, "exec_run", {
    session_id: sessionId,
    command: [line],
    timeout_ms: 20_000,
  });
  assert.equal(r.status, "exited", `${line}\n${shown(r)}`);
  return { code: r.exit_code as number, out: String(r.output) };
}

function configFor(user: string, extra = "", policy = ""): string {
  return `log:\n  level: warn\nsecurity:\n${extra}  run_as:\n    user: ${user}\n` +
    `policies:\n  default:\n${policy}    vault:\n      allow: ["run-as-*"]\n`;
}

/** Removes the state home and the run_as sessions directory the daemon made for it. */
async function cleanup(home: string): Promise<void> {
  await Deno.remove(runAsSessionsDir(home), { recursive: true }).catch(() => {});
  await Deno.remove(home, { recursive: true });
}

Deno.test({
  name: `security.run_as: sessions and jobs run as that user, away from the state dir${NEEDS}`,
  ignore: !CAN_RUN,
  async fn(t) {
    await using user = await createUser();
    const home = await homeWithConfig(configFor(user.name));
    try {
      await using d = await startDaemon(home);
      assert.match(d.stderr(), new RegExp(`sessions run as "${user.name}"`));
      const token = Deno.readTextFileSync(`${home}/token`).trim();
      await using c = await stdioClient(home, ["--agent", "dev"]);
      const caps = await call(c, "capabilities", {});
      assert.equal((caps.boundary as Obj & { hiding: Obj }).hiding.how, "mounts", shown(caps));
      const s = await call(c, "session_create", {});
      assert.equal(errorOf(s), undefined, shown(s));
      const sid = s.session_id as string;

      await t.step("the shell is that user: uids, gid, no supplementary groups", async () => {
        assert.equal((await inside(c, sid, "id -u")).out.trim(), String(user.uid));
        assert.equal((await inside(c, sid, "id -G")).out.trim(), String(user.gid));
        const ids = await inside(
          c,
          sid,
          "grep -E '^(Uid|Gid|CapEff|CapPrm|CapAmb):' /proc/self/status",
        );
        assert.match(
          ids.out,
          new RegExp(`Uid:\\s+${user.uid}\\s+${user.uid}\\s+${user.uid}\\s+${user.uid}`),
        );
        assert.match(
          ids.out,
          new RegExp(`Gid:\\s+${user.gid}\\s+${user.gid}\\s+${user.gid}\\s+${user.gid}`),
        );
        for (const set of ["CapEff", "CapPrm", "CapAmb"]) {
          assert.match(ids.out, new RegExp(`${set}:\\s+0+\\s`), ids.out);
        }
      });

      await t.step("its environment and default cwd are that user's", async () => {
        const env = await inside(c, sid, 'echo "$HOME|$USER|$LOGNAME|$SHELL|$PWD"');
        assert.equal(
          env.out.trim(),
          `${user.home}|${user.name}|${user.name}|/bin/bash|${user.home}`,
        );
        const tty = await inside(c, sid, 'stat -c %u "$(tty)"');
        assert.equal(tty.out.trim(), String(user.uid), "the terminal is the user's");
      });

      await t.step("the state dir and its token are out of reach", async () => {
        const cat = await inside(c, sid, `cat ${home}/token`);
        assert.notEqual(cat.code, 0, cat.out);
        assert.match(cat.out, /Permission denied|No such file/, cat.out);
        assert.ok(!cat.out.includes(token), "the token was read");
        const ls = await inside(c, sid, `ls ${home}`);
        assert.notEqual(ls.code, 0, ls.out);
        assert.match(ls.out, /Permission denied/, ls.out);
        for (const f of ["termada.db", "audit", "config.yaml"]) {
          const r = await inside(c, sid, `cat ${home}/${f} >/dev/null`);
          assert.notEqual(r.code, 0, `${f}: ${r.out}`);
        }
      });

      await t.step("a cwd inside the state dir does not open it", async () => {
        const s2 = await call(c, "session_create", { cwd: home });
        if (errorOf(s2)) return; // refused: as good
        const id2 = s2.session_id as string;
        try {
          const r = await inside(c, id2, "cat token; ls .");
          assert.ok(!r.out.includes(token), "the token was read through the cwd");
          assert.doesNotMatch(r.out, /termada\.db/);
        } finally {
          await call(c, "session_close", { session_id: id2 });
        }
      });

      await t.step("another session's scratch directory is out of reach", async () => {
        const other = await call(c, "session_create", {});
        assert.equal(errorOf(other), undefined, shown(other));
        const oid = other.session_id as string;
        try {
          const root = runAsSessionsDir(home);
          // The daemon wrote it, the same user owns it: it is there, outside the session.
          const st = Deno.statSync(`${root}/${oid}/bashrc`);
          assert.equal(st.uid, user.uid);
          const r = await inside(c, sid, `cat ${root}/${oid}/bashrc`);
          assert.notEqual(r.code, 0, r.out);
          assert.match(r.out, /No such file|Permission denied/, r.out);
          assert.doesNotMatch(r.out, /Termada shell integration/);
          const ls = await inside(c, sid, `ls ${root}`);
          assert.notEqual(ls.code, 0, ls.out);
          assert.match(ls.out, /Permission denied/, ls.out);
          const own = await inside(c, sid, `head -1 ${root}/${sid}/bashrc`);
          assert.equal(own.code, 0, own.out);
        } finally {
          await call(c, "session_close", { session_id: oid });
        }
      });

      await t.step(
        "its own scratch directory is read-only to it (nothing to plant there)",
        async () => {
          const dir = `${runAsSessionsDir(home)}/${sid}`;
          const r = await inside(c, sid, `ln -s /etc/shadow ${dir}/cmd.sh; touch ${dir}/x`);
          assert.notEqual(r.code, 0, r.out);
          assert.match(r.out, /Permission denied/, r.out);
          assert.ok(!exists(`${dir}/cmd.sh`) && !exists(`${dir}/x`));
        },
      );

      await t.step("ordinary work runs normally", async () => {
        const r = await inside(c, sid, "cd ~ && echo made > f.txt && cat f.txt && rm f.txt");
        assert.equal(r.code, 0, r.out);
        assert.equal(r.out.trim(), "made");
      });

      await t.step(
        "a staged command (long, or holding vault values) runs as that user",
        async () => {
          // Over 2048 bytes: typed as `eval "$(<cmd.sh)"`; cmd.sh is written by the daemon.
          const long = `echo ${"x".repeat(3000)} | wc -c; id -u`;
          const r = await inside(c, sid, long);
          assert.equal(r.code, 0, r.out);
          assert.equal(r.out.trim().split(/\s+/).join(" "), `3001 ${user.uid}`);
          const id = `${home}/vault-key.txt`;
          for (const args of [["vault", "init", "--identity", id], ["unlock", "--identity", id]]) {
            const v = await termada(home, args);
            assert.equal(v.code, 0, v.stderr);
          }
          const set = await operatorFetch(d)("/vault/entries/run-as-secret", {
            method: "PUT",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ value_b64: btoa("run-as-vault-value-42") }),
          });
          assert.equal(set.status, 200, await set.text());
          const got = await call(c, "exec_run", {
            session_id: sid,
            command: ['printf "%s" "$V" | wc -c; echo "$V"; id -u'],
            env: { V: { vault: "run-as-secret" } },
          });
          assert.equal(got.exit_code, 0, shown(got));
          assert.equal(got.output, `21\n[REDACTED]\n${user.uid}\n`);
        },
      );

      await t.step("a background job runs as that user too", async () => {
        const r = await call(c, "exec_run", {
          command: ["sh", "-c", 'id -u; id -G; echo "$HOME"; pwd; cat "$0/token"', home],
          mode: "background",
          timeout_ms: 20_000,
        });
        assert.equal(r.status, "exited", shown(r));
        const lines = String(r.output).split(/\r?\n/);
        assert.equal(lines[0], String(user.uid), shown(r));
        assert.equal(lines[1], String(user.gid), shown(r));
        assert.equal(lines[2], user.home);
        assert.equal(lines[3], user.home);
        assert.ok(!String(r.output).includes(token));
        assert.notEqual(r.exit_code, 0);
        const st = await call(c, "exec_start", { command: ["id -u"], mode: "background" });
        assert.equal(errorOf(st), undefined, shown(st));
        const w = await call(c, "exec_wait", { job_id: st.job_id, timeout_ms: 20_000 });
        assert.equal(String(w.output).trim(), String(user.uid), shown(w));
        assert.equal(w.exit_code, 0);
      });

      await t.step("the local file tools are refused, naming the way round", async () => {
        for (const args of [{ path: "/etc/hostname" }, { path: "x.txt", session_id: sid }]) {
          const r = await call(c, "file_read", args);
          assert.equal(errorOf(r)?.code, "NOT_SUPPORTED", shown(r));
          assert.match(errorOf(r)?.hint ?? "", /commands in a session/);
        }
        const w = await call(c, "file_write", { path: `${user.home}/w.txt`, content: "x" });
        assert.equal(errorOf(w)?.code, "NOT_SUPPORTED", shown(w));
        assert.ok(!exists(`${user.home}/w.txt`));
      });
    } finally {
      await cleanup(home);
    }
  },
});

Deno.test({
  name: `security.run_as with exec_gate off: setpriv gives the same user${NEEDS}`,
  ignore: !CAN_RUN,
  async fn() {
    await using user = await createUser();
    const home = await homeWithConfig(configFor(user.name, "  exec_gate: off\n"));
    try {
      await using _d = await startDaemon(home);
      const token = Deno.readTextFileSync(`${home}/token`).trim();
      await using c = await stdioClient(home, ["--agent", "dev"]);
      const s = await call(c, "session_create", {});
      assert.equal(errorOf(s), undefined, shown(s));
      const sid = s.session_id as string;
      assert.equal((await inside(c, sid, "id -u")).out.trim(), String(user.uid));
      assert.equal((await inside(c, sid, "id -G")).out.trim(), String(user.gid));
      const ids = await inside(c, sid, "grep -E '^Uid:' /proc/self/status");
      assert.match(
        ids.out,
        new RegExp(`Uid:\\s+${user.uid}\\s+${user.uid}\\s+${user.uid}\\s+${user.uid}`),
      );
      assert.equal((await inside(c, sid, "echo $HOME")).out.trim(), user.home);
      const cat = await inside(c, sid, `cat ${home}/token`);
      assert.notEqual(cat.code, 0);
      assert.match(cat.out, /Permission denied/);
      assert.ok(!cat.out.includes(token));
      assert.equal((await inside(c, sid, "echo ok")).code, 0);
      const bg = await call(c, "exec_run", { command: ["id", "-u"], mode: "background" });
      assert.equal(String(bg.output).trim(), String(user.uid), shown(bg));
    } finally {
      await cleanup(home);
    }
  },
});

Deno.test({
  name:
    `security.run_as: every exec a rule could refuse is checked at the exec: a symlink in the user's own directory, a path in memory another process writes${NEEDS}`,
  ignore: !CAN_RUN || !exists("/usr/bin/python3"),
  async fn(t) {
    await using user = await createUser();
    const home = await homeWithConfig(configFor(user.name, "", '    deny: ["touch *"]\n'));
    try {
      await using _d = await startDaemon(home);
      await using c = await stdioClient(home, ["--agent", "dev"]);
      const s = await call(c, "session_create", { cwd: user.home });
      assert.equal(errorOf(s), undefined, shown(s));
      const sid = s.session_id as string;
      const fixture = new URL("./_fixtures/exec_gate/race_symlink.py", import.meta.url).pathname;
      // A link the user owns, in a directory it writes, flipped between true and touch while it
      // is exec'd over and over: the system's files behind it cannot be swapped, the link can.
      for (const [name, dir] of [["its home", "."], ["a directory below it", "sub"]] as const) {
        await t.step(`through a symlink in ${name}`, async () => {
          const line = `mkdir -p ${dir} && cd ${dir} && python3 ${fixture} . canary 3`;
          const r = await call(c, "exec_run", {
            session_id: sid,
            command: [line],
            timeout_ms: 30_000,
          });
          assert.equal(r.status, "exited", shown(r));
          assert.match(String(r.output), /tries=\d+ canary=False/, shown(r));
          assert.ok(!exists(`${user.home}/${dir}/canary`), "touch ran: the canary exists");
        });
      }
      // The path in a page another process writes: no thread and no shared address space, so
      // nothing about the exec'ing process itself says it could race (a red-team's way past an
      // exemption for single-threaded processes of an ordinary user).
      await t.step("through a path in a MAP_SHARED page another process flips", async () => {
        const shared = new URL("./_fixtures/exec_gate/race_shared.py", import.meta.url).pathname;
        const r = await call(c, "exec_run", {
          session_id: sid,
          command: [`mkdir -p ~/shm && cd ~/shm && python3 ${shared} . canary 3`],
          timeout_ms: 30_000,
        });
        assert.equal(r.status, "exited", shown(r));
        assert.match(String(r.output), /tries=\d+ canary=False/, shown(r));
        assert.ok(!exists(`${user.home}/shm/canary`), "touch ran: the canary exists");
      });
    } finally {
      await cleanup(home);
    }
  },
});

/** `termada serve` (optionally behind a command) to its end: it must refuse to start. */
async function refusedStart(
  home: string,
  prefix: string[] = [],
): Promise<{ code: number; stderr: string }> {
  const argv = [...prefix, Deno.execPath(), ...DENO_ARGS, "serve", "--bind", "127.0.0.1:0"];
  const o = await new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    env: termadaEnv(home),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: o.code, stderr: new TextDecoder().decode(o.stderr) };
}

Deno.test({
  name: `security.run_as refuses to start with a user it cannot use${NEEDS}`,
  ignore: !CAN_RUN,
  async fn(t) {
    await t.step("an unknown user: the field and the user are named", async () => {
      const home = await homeWithConfig(configFor("tmra-nobody-here"));
      try {
        const r = await refusedStart(home);
        assert.notEqual(r.code, 0, r.stderr);
        assert.match(r.stderr, /security\.run_as\.user/);
        assert.match(r.stderr, /no user "tmra-nobody-here" in \/etc\/passwd/);
      } finally {
        await Deno.remove(home, { recursive: true });
      }
    });
    await t.step("an unknown group", async () => {
      const home = await homeWithConfig(
        "security:\n  run_as:\n    user: nobody\n    group: tmra-no-group\n",
      );
      try {
        const r = await refusedStart(home);
        assert.notEqual(r.code, 0, r.stderr);
        assert.match(r.stderr, /security\.run_as\.group: no group "tmra-no-group"/);
      } finally {
        await Deno.remove(home, { recursive: true });
      }
    });
    await t.step("a key run_as does not know", async () => {
      const home = await homeWithConfig(
        "security:\n  run_as:\n    user: nobody\n    shell: /bin/sh\n",
      );
      try {
        const r = await refusedStart(home);
        assert.notEqual(r.code, 0, r.stderr);
        assert.match(r.stderr, /security\.run_as/);
        assert.match(r.stderr, /shell/);
      } finally {
        await Deno.remove(home, { recursive: true });
      }
    });
    await t.step("root, the daemon's own user", async () => {
      const home = await homeWithConfig(configFor("root"));
      try {
        const r = await refusedStart(home);
        assert.notEqual(r.code, 0, r.stderr);
        assert.match(r.stderr, /security\.run_as\.user: "root" is root/);
      } finally {
        await Deno.remove(home, { recursive: true });
      }
    });
    await t.step("a daemon without CAP_SETUID and CAP_SETGID says what it needs", async () => {
      await using user = await createUser();
      const home = await homeWithConfig(configFor(user.name));
      try {
        // Root, but with both capabilities out of its bounding set: it cannot become anyone.
        const r = await refusedStart(home, [
          "/usr/bin/setpriv",
          "--bounding-set=-setuid,-setgid",
          "--inh-caps=-all",
          "--",
        ]);
        assert.notEqual(r.code, 0, r.stderr);
        assert.match(r.stderr, /needs the daemon to be root with its capabilities, or to hold/);
        assert.match(r.stderr, /lacks CAP_SETGID, CAP_SETUID/);
        assert.ok(!exists(`${home}/termada.lock`) || !exists(runAsSessionsDir(home)));
      } finally {
        await cleanup(home);
      }
    });
  },
});

Deno.test({
  name: `a session started inside the state dir sees the cover, not the state (root)${
    Deno.uid() === 0 ? "" : " (ignored: needs root)"
  }`,
  ignore: Deno.uid() !== 0,
  async fn() {
    // Without run_as too: the launcher's cwd was entered before the mounts covered it.
    const home = await homeWithConfig("log:\n  level: warn\n");
    try {
      await using _d = await startDaemon(home);
      const token = Deno.readTextFileSync(`${home}/token`).trim();
      await using c = await stdioClient(home, ["--agent", "dev"]);
      const s = await call(c, "session_create", { cwd: home });
      assert.equal(errorOf(s), undefined, shown(s));
      const r = await inside(c, s.session_id as string, "ls; cat token");
      assert.ok(!r.out.includes(token), "the token was read through the cwd");
      assert.doesNotMatch(r.out, /termada\.db|config\.yaml/, r.out);
      const deeper = await call(c, "session_create", { cwd: `${home}/spool` });
      assert.equal(errorOf(deeper)?.code, "INVALID_ARGUMENT", shown(deeper));
      assert.match(errorOf(deeper)?.message ?? "", /is hidden from sessions/);
    } finally {
      await Deno.remove(home, { recursive: true });
    }
  },
});

Deno.test({
  name: `security.run_as with Landlock hiding instead of a mount namespace${NEEDS}`,
  ignore: !CAN_RUN,
  async fn() {
    await using user = await createUser();
    const home = await homeWithConfig(configFor(user.name));
    try {
      await using _d = await startDaemon(home, { env: { TERMADA_SIMULATE_MISSING: "mounts" } });
      const token = Deno.readTextFileSync(`${home}/token`).trim();
      await using c = await stdioClient(home, ["--agent", "dev"]);
      const caps = await call(c, "capabilities", {});
      assert.equal((caps.boundary as Obj & { hiding: Obj }).hiding.how, "landlock", shown(caps));
      const a = (await call(c, "session_create", { cwd: user.home })).session_id as string;
      const b = (await call(c, "session_create", { cwd: user.home })).session_id as string;
      assert.equal((await inside(c, a, "id -u")).out.trim(), String(user.uid));
      const cat = await inside(c, a, `cat ${home}/token`);
      assert.notEqual(cat.code, 0);
      assert.ok(!cat.out.includes(token));
      const root = runAsSessionsDir(home);
      assert.equal((await inside(c, a, `head -1 ${root}/${a}/bashrc`)).code, 0);
      const other = await inside(c, a, `cat ${root}/${b}/bashrc`);
      assert.notEqual(other.code, 0, other.out);
      assert.doesNotMatch(other.out, /Termada shell integration/);
      const bg = await call(c, "exec_run", { command: ["id", "-u"], mode: "background" });
      assert.equal(String(bg.output).trim(), String(user.uid), shown(bg));
    } finally {
      await cleanup(home);
    }
  },
});

Deno.test({
  name: `security.run_as keeps the exec gate: a copied denied program still does not run${NEEDS}`,
  ignore: !CAN_RUN,
  async fn() {
    await using user = await createUser();
    const home = await homeWithConfig(configFor(user.name, "", `    deny: ["touch *"]\n`));
    try {
      await using _d = await startDaemon(home);
      await using c = await stdioClient(home, ["--agent", "dev"]);
      const sid = (await call(c, "session_create", {})).session_id as string;
      const r = await inside(c, sid, "cp /usr/bin/touch ./t && ./t canary; echo rc=$?");
      assert.match(r.out, /rc=126/, r.out);
      assert.ok(!exists(`${user.home}/canary`), "the denied program ran");
      const ok = await inside(c, sid, "id -u");
      assert.equal(ok.out.trim(), String(user.uid));
    } finally {
      await cleanup(home);
    }
  },
});

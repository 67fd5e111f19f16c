/**
 * The exec gate on its own thread (gate_thread.ts, gate_worker.ts) against the gate on the
 * daemon's thread: the same decisions on both, a policy reload seen at a running session's next
 * exec, stop-all seen by the thread's fast path, and a thread that dies failing closed. Real
 * sessions, real bash, the real policy port (the CI machine has seccomp user notification; a
 * missing one is tested by injection in tests/exec_gate_test.ts).
 */
import assert from "node:assert/strict";
import { Config } from "../config/mod.ts";
import { testRuntime } from "../control/_test_util.ts";
import { policyPort } from "../daemon/policy_port.ts";
import { decideExec, loadShellParser } from "../policy/mod.ts";
import { preloadNative } from "../pty/mod.ts";
import { execNames } from "../shared/mod.ts";
import { LINUX, sys } from "../../ffi/mod.ts";
import { waitFor } from "./_test_util.ts";
import { fastAnswer } from "./fast_path.ts";
import { GateCounters } from "./gate.ts";
import { GateThread } from "./gate_thread.ts";

preloadNative();

const PATH = Deno.env.get("PATH") ?? "/usr/bin:/bin";

async function runtime(rules: Record<string, unknown>, gateThread: boolean) {
  await loadShellParser();
  const port = policyPort(Config.parse({ policies: { default: rules } }), {
    PATH,
    execGate: () => true,
  });
  const rt = await testRuntime({
    policy: port,
    engine: { record: false, sandbox: { mode: "auto", hide: [], gateThread } },
  });
  const active = rt.control.agents.boundary().exec_gate.active;
  return { rt, port, active };
}

type Obj = Record<string, unknown>;

async function sh(rt: Awaited<ReturnType<typeof testRuntime>>, session: string, line: string) {
  return await rt.engine.run("a", {
    session_id: session,
    command: [line],
    timeout_ms: 20_000,
  }) as Obj;
}

/** A session and a temp dir with a copy of touch in it (`copy`); the dir goes after `fn`. */
async function withCopiedTouch(
  rt: Awaited<ReturnType<typeof runtime>>["rt"],
  fn: (s: { id: string; dir: string; copy: string }) => Promise<void>,
): Promise<void> {
  const s = await rt.engine.createSession("a", {}) as Obj;
  const dir = await Deno.makeTempDir({ prefix: "termada-gt-" });
  try {
    const copy = `${dir}/tch`;
    Deno.copyFileSync("/usr/bin/touch", copy);
    Deno.chmodSync(copy, 0o755);
    await fn({ id: s.session_id as string, dir, copy });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

for (const thread of [true, false]) {
  const where = thread ? "on its own thread" : "on the daemon's thread";
  Deno.test(`exec gate ${where}: a copy of a denied program is stopped, other programs run`, async () => {
    const { rt, active } = await runtime({ deny: ["touch *"] }, thread);
    await using _ = rt;
    assert.ok(active, "the exec gate is active on this machine");
    await withCopiedTouch(rt, async ({ id, dir, copy }) => {
      const denied = await sh(rt, id, `${copy} ${dir}/canary; echo rc=$?`);
      assert.match(String(denied.output ?? ""), /rc=(126|1)\b/, JSON.stringify(denied));
      assert.throws(() => Deno.lstatSync(`${dir}/canary`), Deno.errors.NotFound);
      const blocked = denied.blocked as { rule?: string }[] | undefined;
      assert.equal(blocked?.[0]?.rule, "touch *", JSON.stringify(denied));
      // Ordinary work under the same rules: many execs, all allowed.
      const ok = await sh(rt, id, `for i in 1 2 3 4 5; do /bin/true; done; ls ${dir} | wc -l`);
      assert.equal(ok.exit_code, 0, JSON.stringify(ok));
      assert.match(String(ok.output), /\b1\b/);
      assert.equal(rt.control.sandbox.gateThreadState(), thread ? "thread" : "main");
      const st = rt.control.execGateStats();
      assert.ok(st.denied >= 1 && st.allowed >= 6, JSON.stringify(st));
    });
  });

  Deno.test(`exec gate ${where}: a policy reload reaches a running session's next exec`, async () => {
    const { rt, port, active } = await runtime({}, thread);
    await using _ = rt;
    assert.ok(active, "the exec gate is active on this machine");
    await withCopiedTouch(rt, async ({ id, dir, copy }) => {
      // No rules yet: the copy runs (answered before anything of it is read).
      const before = await sh(rt, id, `${copy} ${dir}/first; echo rc=$?`);
      assert.match(String(before.output), /rc=0/, JSON.stringify(before));
      port.reload(Config.parse({ policies: { default: { deny: ["touch *"] } } }));
      const after = await sh(rt, id, `${copy} ${dir}/second; echo rc=$?`);
      assert.doesNotMatch(String(after.output), /rc=0/, JSON.stringify(after));
      assert.throws(() => Deno.lstatSync(`${dir}/second`), Deno.errors.NotFound);
      // And back: the reload that removes the rule is seen too.
      port.reload(Config.parse({}));
      const again = await sh(rt, id, `${copy} ${dir}/third; echo rc=$?`);
      assert.match(String(again.output), /rc=0/, JSON.stringify(again));
    });
  });

  Deno.test(`exec gate ${where}: under stop-all no process of a session starts a program`, async () => {
    const { rt, active } = await runtime({}, thread);
    await using _ = rt;
    assert.ok(active, "the exec gate is active on this machine");
    const s = await rt.engine.createSession("a", {}) as Obj;
    const id = s.session_id as string;
    const dir = await Deno.makeTempDir({ prefix: "termada-gt-" });
    try {
      const log = `${dir}/log`;
      // A loop left running by a finished job: each round execs /bin/true and says whether
      // it ran. Started through `setsid` so that it is not the job's any more.
      const start = await sh(
        rt,
        id,
        `setsid bash -c 'while :; do if /bin/true; then echo ok; else echo no; fi; done' ` +
          `>> ${log} 2>/dev/null < /dev/null & echo started`,
      );
      assert.match(String(start.output), /started/);
      const lines = () => {
        try {
          return Deno.readTextFileSync(log).split("\n").filter(Boolean);
        } catch {
          return [];
        }
      };
      await waitFor("the loop to run", () => lines().includes("ok"));
      await rt.ops.stopAll({ kind: "operator" as const, id: "test" }, {
        barrier_ms: 60_000,
        grace_ms: 200,
      });
      const at = lines().length;
      await new Promise((r) => setTimeout(r, 300));
      // Whatever stop-all left alive, nothing it tried to exec since ran.
      const since = lines().slice(at + 2); // a round under way when the barrier rose
      assert.ok(!since.includes("ok"), `an exec ran under stop-all: ${since.slice(0, 5)}`);
      rt.ops.resumeAdmissions({ kind: "operator" as const, id: "test" });
    } finally {
      await rt.engine.closeSession("a", { session_id: id }).catch(() => {});
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("exec gate thread: when it dies its sessions fail closed, new ones are gated on the daemon's thread", async () => {
  const { rt, active } = await runtime({ deny: ["touch *"] }, true);
  await using _ = rt;
  assert.ok(active, "the exec gate is active on this machine");
  const dir = await Deno.makeTempDir({ prefix: "termada-gt-" });
  try {
    const s = await rt.engine.createSession("a", {}) as Obj;
    const id = s.session_id as string;
    const ok = await sh(rt, id, `/bin/true && echo ran`);
    assert.match(String(ok.output), /ran/);
    assert.equal(rt.control.sandbox.injectGateThreadFailure(), true);
    await waitFor("the thread's failure", () => rt.control.sandbox.gateThreadState() !== "thread");
    // The session the thread held can start nothing any more (its listener is closed).
    const after = await sh(rt, id, `/bin/true && echo ran; echo rc=$?`);
    assert.doesNotMatch(String(after.output), /\bran\b/, JSON.stringify(after));
    // A new session is gated on the daemon's thread, with the same rules.
    const s2 = await rt.engine.createSession("a", {}) as Obj;
    const id2 = s2.session_id as string;
    const copy = `${dir}/tch`;
    Deno.copyFileSync("/usr/bin/touch", copy);
    Deno.chmodSync(copy, 0o755);
    const denied = await sh(rt, id2, `${copy} ${dir}/canary; /bin/true && echo ran`);
    assert.match(String(denied.output), /\bran\b/, JSON.stringify(denied));
    assert.throws(() => Deno.lstatSync(`${dir}/canary`), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** Host-level cases with pipes standing in for listener fds (the thread only polls and closes). */
function pipe(): [number, number] {
  const fds = new Int32Array(2);
  if (sys().pipe2(fds, LINUX.O_CLOEXEC) !== 0) throw new Error("pipe2 failed");
  return [fds[0]!, fds[1]!];
}
const isOpen = (fd: number) => sys().fcntl(fd, 1, /* F_GETFD */ 0) >= 0;
const HOST = {
  decide: () => ({ allow: false }),
  fastPath: () => ({ allowAll: true as const }),
  note: () => {},
  onRace: () => {},
};
const OPTS = { trustFirst: false, cgroup: null, killable: false };

Deno.test("gate thread: a late close of one session never closes another's listener", async () => {
  const t = new GateThread<string>(
    HOST,
    new GateCounters(new SharedArrayBuffer(GateCounters.BYTES)),
  );
  const [aR, aW] = pipe();
  const [bR, bW] = pipe();
  try {
    const a = t.attach(aR, "A", OPTS);
    // A's processes are all gone: the thread closes A's listener itself (its slot is freed).
    sys().close(aW);
    await waitFor("A's listener to close", () => t.size === 0 && !isOpen(aR));
    const b = t.attach(bR, "B", OPTS); // takes A's slot again
    a.close(); // A's session closes later
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(isOpen(bR), true, "B's listener survives A's late close");
    b.close();
    await waitFor("B's listener to close", () => !isOpen(bR));
  } finally {
    sys().close(bW);
    await t.stop();
  }
});

Deno.test("gate thread: while it stops it takes no listener (the sandbox gates elsewhere)", async () => {
  const t = new GateThread<string>(
    HOST,
    new GateCounters(new SharedArrayBuffer(GateCounters.BYTES)),
  );
  const [r, w] = pipe();
  try {
    const stopping = t.stop();
    assert.equal(t.usable, false);
    assert.throws(() => t.attach(r, "late", OPTS));
    await stopping;
    assert.equal(isOpen(r), true, "a listener it never took stays open");
  } finally {
    sys().close(r);
    sys().close(w);
  }
});

Deno.test("an exec with no name at all is still matched by rules that start with a glob", () => {
  const ev = {
    pid: 1,
    path: "",
    resolved: "/proc/1/fd/3",
    argv: [],
    truncated: false,
    identity: undefined,
    first: false,
  };
  const idx = new Map<string, Set<string>>();
  assert.deepEqual(execNames(idx, "", undefined), [""]);
  // The thread forwards it (a `*` rule's literal start is empty)…
  assert.equal(fastAnswer({ prefixes: [""], idx }, ev), undefined);
  // …and the policy denies it.
  assert.equal(
    decideExec([{ names: execNames(idx, "", ""), args: [] }], {
      allow: [],
      deny: ["*"],
      confirm: [],
    }).action,
    "deny",
  );
});

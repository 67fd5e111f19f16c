import assert from "node:assert/strict";
import { LINUX } from "../../ffi/mod.ts";
import { preloadNative, procStat } from "../pty/mod.ts";
import { bash as spawnBash, readPids, waitFor } from "./_test_util.ts";
import { CgroupTree, detectCgroup } from "./cgroup.ts";
import { escalate, isSubreaper, processesOf, type ProcessRef } from "./reaper.ts";

preloadNative(); // libc stays loaded for the process, not for one test

/** Gone = no such process, a zombie, or the pid now belongs to another process. */
function gone(ref: ProcessRef): boolean {
  const st = procStat(ref.pid);
  return !st || st.state === "Z" || st.startTime !== ref.startTime;
}

function refOf(pid: number): ProcessRef {
  const st = procStat(pid);
  if (!st) throw new Error(`pid ${pid} is not running`);
  return { pid, startTime: st.startTime };
}

function bash(script: string, env: Record<string, string> = {}): Deno.ChildProcess {
  return spawnBash(script, { PATH: "/usr/bin:/bin", ...env });
}

/**
 * A test's processes: the bash it spawned and every process seen since. `end()` kills what is
 * left, reaps the bash, removes the temp dir and checks that nothing stayed behind.
 */
class Scene {
  readonly tmp = Deno.makeTempDirSync({ prefix: "termada_reaper_" });
  readonly file = `${this.tmp}/pids`;
  readonly seen = new Map<string, ProcessRef>();
  child: Deno.ChildProcess | undefined;

  start(script: string): Deno.ChildProcess {
    this.child = bash(script, { F: this.file });
    this.note([refOf(this.child.pid)]);
    return this.child;
  }

  /** Waits for `tags` to be written and returns their processes. */
  async tagged(...tags: string[]): Promise<Map<string, ProcessRef>> {
    await waitFor(`processes ${tags.join(", ")}`, () => {
      const got = readPids(this.file);
      return tags.every((t) => got.has(t));
    });
    const out = new Map<string, ProcessRef>();
    for (const [tag, pid] of readPids(this.file)) out.set(tag, refOf(pid));
    this.note(out.values());
    return out;
  }

  note(refs: Iterable<ProcessRef>): void {
    for (const r of refs) this.seen.set(`${r.pid}:${r.startTime}`, r);
  }

  /** The set function for escalate: the tree of the bash plus `extra`, every process noted. */
  set(extra: () => number[] = () => []): () => ProcessRef[] {
    return () => {
      const pid = this.child!.pid;
      const refs = processesOf(pid, [pid, ...extra()]);
      this.note(refs);
      return refs;
    };
  }

  async end(): Promise<void> {
    // Whatever descends from what we saw (a test may never have asked) is ours too.
    const live = [...this.seen.values()].filter((r) => !gone(r)).map((r) => r.pid);
    if (live.length > 0) this.note(processesOf(live[0]!, live));
    for (const r of this.seen.values()) {
      if (gone(r)) continue;
      try {
        Deno.kill(r.pid, "SIGKILL");
      } catch {
        // Exited meanwhile.
      }
    }
    if (this.child) await this.child.status;
    Deno.removeSync(this.tmp, { recursive: true });
    const stray = [...this.seen.values()];
    await waitFor("no stray processes", () => stray.every(gone));
  }
}

Deno.test("escalate ends a tree with setsid, nohup and double-forked children (no cgroup)", async () => {
  const scene = new Scene();
  try {
    const rec = (tag: string) => `echo ${tag} $$ >> "$F"`;
    scene.start(`${rec("parent")}
      setsid bash -c '${rec("setsid")}; exec sleep 100' &
      nohup bash -c '${rec("nohup")}; exec sleep 100' >/dev/null 2>&1 &
      ( (bash -c '${rec("double")}; exec sleep 100' &) & )
      bash -c '${rec("plain")}; sleep 100; :' &
      wait`);
    const procs = await scene.tagged("parent", "setsid", "nohup", "double", "plain");
    const double = procs.get("double")!;
    // The double fork's middle process exited: its child was reparented out of the tree.
    await waitFor(
      "the double fork to detach",
      () => procStat(double.pid)?.ppid !== scene.child!.pid,
    );
    assert.ok(!processesOf(scene.child!.pid).some((p) => p.pid === double.pid));
    // The daemon learned its pid otherwise (e.g. an exec notification): pass it as extra.
    const result = await escalate(scene.set(() => [double.pid]));
    assert.deepEqual(result.survivors, []);
    for (const [tag, ref] of procs) assert.ok(gone(ref), `${tag} should be gone`);
    // parent, 4 children (bash or sleep), and the sleep of "plain".
    assert.ok(result.signalled >= 6, `signalled ${result.signalled}`);
    assert.equal(result.steps.at(-1), `empty after ${result.steps.at(-2)!.split(" ")[0]}`);
    assert.ok(!result.steps.some((s) => s.startsWith("KILL")), result.steps.join(", "));
    assert.equal((await scene.child!.status).success, false);
  } finally {
    await scene.end();
  }
});

Deno.test("escalate stops as soon as the set is empty", async () => {
  const scene = new Scene();
  try {
    scene.start(`echo parent $$ >> "$F"; sleep 100; :`);
    await scene.tagged("parent");
    await waitFor("the sleep", () => processesOf(scene.child!.pid).length === 1);
    const t0 = performance.now();
    const result = await escalate(scene.set(), { graceMs: 5000, finalWaitMs: 5000 });
    const ms = performance.now() - t0;
    assert.deepEqual(result.survivors, []);
    assert.deepEqual(result.steps, ["INT 2", "empty after INT"]);
    assert.equal(result.signalled, 2);
    assert.ok(ms < 1000, `took ${ms} ms with 5000 ms grace`);
  } finally {
    await scene.end();
  }
});

Deno.test("escalate returns at once for an empty set", async () => {
  const result = await escalate(() => [], {});
  assert.deepEqual(result, { survivors: [], signalled: 0, steps: ["empty"] });
});

Deno.test("a process ignoring INT and TERM is killed by KILL", async () => {
  const scene = new Scene();
  try {
    scene.start(`trap "" INT TERM; echo stubborn $$ >> "$F"; while :; do sleep 0.05; done`);
    const stubborn = (await scene.tagged("stubborn")).get("stubborn")!;
    const result = await escalate(scene.set(), { graceMs: 100 });
    assert.deepEqual(result.survivors, []);
    assert.ok(gone(stubborn));
    assert.deepEqual(result.steps.map((s) => s.split(" ")[0]), ["INT", "TERM", "KILL", "empty"]);
    assert.equal((await scene.child!.status).signal, "SIGKILL");
  } finally {
    await scene.end();
  }
});

Deno.test("a process that re-forks on TERM still ends up dead", async () => {
  const scene = new Scene();
  try {
    // On TERM it starts a child that itself ignores TERM; both loop until SIGKILL.
    scene.start(
      `trap 'bash -c "trap \\"\\" TERM; echo forked \\$\\$ >> \\"\\$F\\"; exec sleep 100" &' TERM
      echo reforker $$ >> "$F"; while :; do sleep 0.05; done`,
    );
    await scene.tagged("reforker");
    const result = await escalate(scene.set(), { signals: ["TERM", "KILL"], graceMs: 300 });
    assert.deepEqual(result.survivors, []);
    // It did re-fork (the child recorded itself), and everything seen meanwhile is gone.
    assert.ok(readPids(scene.file).has("forked"));
    assert.ok(scene.seen.size >= 3, `saw ${scene.seen.size} processes`);
    for (const ref of scene.seen.values()) assert.ok(gone(ref), `pid ${ref.pid} should be gone`);
    assert.equal(result.steps[0]?.split(" ")[0], "TERM");
    assert.ok(result.steps.some((s) => s.startsWith("KILL")), result.steps.join(", "));
  } finally {
    await scene.end();
  }
});

Deno.test("stopped processes get CONT with TERM and act on it", async () => {
  const scene = new Scene();
  try {
    scene.start(`echo parent $$ >> "$F"; sleep 100; :`);
    const parent = (await scene.tagged("parent")).get("parent")!;
    Deno.kill(parent.pid, "SIGSTOP");
    await waitFor("the stop", () => procStat(parent.pid)?.state === "T");
    const result = await escalate(scene.set(), { signals: ["TERM"], finalWaitMs: 2000 });
    assert.deepEqual(result.survivors, []);
    assert.ok(gone(parent));
  } finally {
    await scene.end();
  }
});

Deno.test("escalate reports processes it may not signal", async () => {
  const scene = new Scene();
  try {
    scene.start(`echo parent $$ >> "$F"; exec sleep 100`);
    const parent = (await scene.tagged("parent")).get("parent")!;
    const result = await escalate(scene.set(), {
      signals: ["TERM", "KILL"],
      graceMs: 20,
      finalWaitMs: 50,
      kill: () => LINUX.EPERM,
    });
    assert.deepEqual(result.survivors, [
      { pid: parent.pid, comm: "sleep", state: "S", reason: "not permitted (EPERM)" },
    ]);
    assert.equal(result.signalled, 0);
    assert.equal(result.steps.at(-1), "1 survivors");
  } finally {
    await scene.end();
  }
});

Deno.test("escalate with a cgroup also reaches processes missing from the set", async () => {
  const got = detectCgroup();
  assert.ok(got.ok, got.ok ? "" : got.reason);
  const tree = new CgroupTree(got.root);
  const scene = new Scene();
  try {
    const cg = tree.create("reap-1");
    scene.start(`echo $$ > "$CG/cgroup.procs"
      ( (trap "" INT TERM; echo hidden $BASHPID >> "$F"; exec sleep 100) & )
      echo parent $$ >> "$F"; exec sleep 100`.replaceAll("$CG", cg.path));
    const procs = await scene.tagged("parent", "hidden");
    // The set knows nothing; the cgroup knows everything.
    const result = await escalate(() => [], { cgroup: cg, graceMs: 50 });
    assert.deepEqual(result.survivors, []);
    for (const [tag, ref] of procs) assert.ok(gone(ref), `${tag} should be gone`);
    assert.ok(result.steps.includes("cgroup.kill"), result.steps.join(", "));
    assert.equal(await cg.remove(), true);
  } finally {
    await scene.end();
    await tree.removeAll();
  }
});

Deno.test("processesOf follows the tree, adds extras and leaves out the dead", async () => {
  const scene = new Scene();
  try {
    scene.start(`echo parent $$ >> "$F"; bash -c 'echo kid $$ >> "$F"; sleep 100; :' & wait`);
    const procs = await scene.tagged("parent", "kid");
    const parent = procs.get("parent")!;
    const kid = procs.get("kid")!;
    await waitFor("the kid's sleep", () => processesOf(parent.pid).length === 2);
    const tree = processesOf(parent.pid);
    assert.ok(tree.some((p) => p.pid === kid.pid && p.startTime === kid.startTime));
    assert.ok(!tree.some((p) => p.pid === parent.pid), "the root itself is not included");
    // An extra's descendants come along; a dead extra and this process are left out.
    const dead = new Deno.Command("true").spawn();
    await dead.status;
    const viaExtra = processesOf(dead.pid, [kid.pid, dead.pid, Deno.pid]);
    assert.deepEqual(viaExtra.map((p) => p.pid).sort(), tree.map((p) => p.pid).sort());
  } finally {
    await scene.end();
  }
});

Deno.test("escalate rejects bad options", async () => {
  await assert.rejects(() => escalate(() => [], { signals: [] }), RangeError);
  await assert.rejects(
    () => escalate(() => [], { signals: ["HUP" as "INT"] }),
    RangeError,
  );
  await assert.rejects(() => escalate(() => [], { graceMs: -1 }), RangeError);
  await assert.rejects(() => escalate(() => [], { finalWaitMs: 1e9 }), RangeError);
  assert.throws(() => processesOf(1), RangeError);
  assert.throws(() => processesOf(0), RangeError);
});

Deno.test("a subreaper adopts setsid orphans, so escalate over its own tree ends them", async () => {
  // The test runner must not become a subreaper (it would collect zombies it never reaps),
  // so a child Deno process does it and reports back.
  assert.equal(isSubreaper(), false);
  const tmp = Deno.makeTempDirSync({ prefix: "termada_subreaper_" });
  const script = `${tmp}/child.ts`;
  const pidFile = `${tmp}/orphan`;
  Deno.writeTextFileSync(
    script,
    `import { becomeSubreaper, escalate, processesOf } from ${
      JSON.stringify(new URL("./reaper.ts", import.meta.url).href)
    };
    import { procStat } from ${JSON.stringify(new URL("../pty/mod.ts", import.meta.url).href)};
    const sub = becomeSubreaper();
    const b = new Deno.Command("bash", { args: ["-c",
      'setsid bash -c "echo \\\\$\\\\$ > ${pidFile}; exec sleep 100" & exit 0'] }).spawn();
    await b.status;
    let orphan = 0;
    for (let i = 0; i < 500 && !orphan; i++) {
      try { orphan = Number(Deno.readTextFileSync(${
      JSON.stringify(pidFile)
    })); } catch { /* not yet */ }
      if (!orphan) await new Promise((r) => setTimeout(r, 10));
    }
    const ppid = procStat(orphan)?.ppid;
    const seen = processesOf(Deno.pid).map((p) => p.pid);
    const r = await escalate(() => processesOf(Deno.pid), { graceMs: 200 });
    console.log(JSON.stringify({ sub, orphan, ppid, self: Deno.pid, seen, survivors: r.survivors }));
    `,
  );
  let orphan = 0;
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--no-config", "--allow-ffi", "--allow-read", "--allow-run=bash", script],
      stdin: "null",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, err);
    const r = JSON.parse(new TextDecoder().decode(out.stdout));
    orphan = r.orphan;
    assert.equal(r.sub, true);
    assert.ok(orphan > 0);
    assert.equal(r.ppid, r.self, "the orphan was reparented to the subreaper");
    assert.ok(r.seen.includes(orphan));
    assert.deepEqual(r.survivors, []);
  } finally {
    if (orphan > 0 && procStat(orphan) && procStat(orphan)!.state !== "Z") {
      Deno.kill(orphan, "SIGKILL");
    }
    Deno.removeSync(tmp, { recursive: true });
  }
  await waitFor(
    "the orphan to be gone",
    () => !procStat(orphan) || procStat(orphan)!.state === "Z",
  );
});

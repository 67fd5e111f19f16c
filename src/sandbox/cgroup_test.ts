import assert from "node:assert/strict";
import { preloadNative, procStat } from "../pty/mod.ts";
import { bash, readPids, waitFor } from "./_test_util.ts";
import {
  Cgroup,
  CgroupError,
  CgroupTree,
  detectCgroup,
  parseCgroup2Mounts,
  parseOwnCgroup2Path,
} from "./cgroup.ts";

preloadNative(); // libc stays loaded for the process, not for one test

/** Gone = no such process, a zombie, or the pid now belongs to another process. */
function gone(pid: number, startTime?: number): boolean {
  const st = procStat(pid);
  return !st || st.state === "Z" || (startTime !== undefined && st.startTime !== startTime);
}

/** Ends everything a test started: its cgroups, recorded pids, and the bash it spawned. */
async function cleanup(
  opts: { tree?: CgroupTree; pids?: number[]; child?: Deno.ChildProcess; tmp?: string },
): Promise<void> {
  for (const pid of opts.pids ?? []) {
    try {
      if (!gone(pid)) Deno.kill(pid, "SIGKILL");
    } catch {
      // Exited meanwhile.
    }
  }
  if (opts.tree) await opts.tree.removeAll();
  if (opts.child) {
    try {
      opts.child.kill("SIGKILL");
    } catch {
      // Already exited.
    }
    await opts.child.status;
  }
  if (opts.tmp) await Deno.remove(opts.tmp, { recursive: true });
  for (const pid of opts.pids ?? []) {
    await waitFor(`pid ${pid} to be gone after cleanup`, () => gone(pid));
  }
}

function mustDetect(base?: string): CgroupTree {
  const got = detectCgroup(base === undefined ? {} : { base });
  assert.ok(got.ok, got.ok ? "" : got.reason);
  return new CgroupTree(got.root);
}

Deno.test("detectCgroup creates this daemon's cgroup2 directory under its own cgroup", async () => {
  const got = detectCgroup();
  assert.ok(got.ok, got.ok ? "" : got.reason);
  const tree = new CgroupTree(got.root);
  try {
    assert.equal(got.source, "own-cgroup");
    assert.match(got.root, new RegExp(`/termada-${Deno.pid}$`));
    assert.ok(new Cgroup(got.root).exists());
    // Detecting again reuses the directory instead of failing.
    const again = detectCgroup();
    assert.deepEqual(again, got);
  } finally {
    assert.equal(await tree.removeAll(), true);
  }
  assert.equal(new Cgroup(got.root).exists(), false);
});

Deno.test("cgroup kill ends setsid, nohup, double-forked, signal-ignoring and re-forking children", async () => {
  const tree = mustDetect();
  const tmp = Deno.makeTempDirSync({ prefix: "termada_cg_" });
  const file = `${tmp}/pids`;
  let child: Deno.ChildProcess | undefined;
  let pids: number[] = [];
  try {
    const cg = tree.create("sess-1");
    const rec = (tag: string) => `echo ${tag} $$ >> "$F"`;
    child = bash(
      `echo $$ > "$CG/cgroup.procs"; ${rec("parent")}
      setsid bash -c '${rec("setsid")}; exec sleep 100' &
      nohup bash -c '${rec("nohup")}; exec sleep 100' >/dev/null 2>&1 &
      ( (bash -c '${rec("double")}; exec sleep 100' &) & )
      bash -c 'trap "" INT TERM; ${rec("ignore")}; while :; do sleep 0.05; done' &
      bash -c 'trap "bash -c \\"sleep 100\\" &" TERM; ${
        rec("refork")
      }; while :; do sleep 0.05; done' &
      wait`,
      { F: file, CG: cg.path, PATH: "/usr/bin:/bin" },
    );
    await waitFor("six processes to start", () => readPids(file).size >= 6);
    const tagged = readPids(file);
    pids = [...tagged.values()];
    const starts = new Map(pids.map((p) => [p, procStat(p)!.startTime]));
    const inCg = cg.procs();
    for (const p of pids) assert.ok(inCg.includes(p), `pid ${p} should be in the cgroup`);
    assert.equal(cg.populated(), true);
    // The re-forking process gets a TERM first: its new child lands in the cgroup too.
    const reforker = tagged.get("refork")!;
    const before = cg.procs().length;
    Deno.kill(reforker, "SIGTERM");
    await waitFor("the re-fork on TERM", () => cg.procs().length > before);

    cg.kill();
    await waitFor("every process to die", () => pids.every((p) => gone(p, starts.get(p))));
    await waitFor("the cgroup to empty", () => cg.procs().length === 0 && !cg.populated());
    assert.equal((await child.status).signal, "SIGKILL");
    assert.equal(await cg.remove(), true);
    assert.equal(cg.exists(), false);
  } finally {
    await cleanup({ tree, pids, child, tmp });
  }
});

Deno.test("nested cgroups: procs covers descendants, remove takes children first", async () => {
  const tree = mustDetect();
  let child: Deno.ChildProcess | undefined;
  try {
    const cg = tree.create("sess-nest");
    const inner = cg.child("inner");
    assert.equal(inner.path, `${cg.path}/inner`);
    child = bash(`echo $$ > "$CG/cgroup.procs"; exec sleep 100`, { CG: inner.path });
    const pid = child.pid;
    await waitFor("the child to join the inner cgroup", () => cg.procs().includes(pid));
    assert.deepEqual(inner.procs(), [pid]);
    assert.deepEqual(tree.list().map((c) => c.name), ["sess-nest"]);
    // Not empty yet: remove gives up after its timeout and leaves everything in place.
    assert.equal(await cg.remove({ timeoutMs: 50 }), false);
    assert.equal(inner.exists(), true);
    cg.kill();
    assert.equal((await child.status).signal, "SIGKILL");
    assert.equal(await cg.remove(), true);
    assert.equal(inner.exists(), false);
  } finally {
    await cleanup({ tree, child });
  }
});

Deno.test("two engines of one process share the root: one's shutdown ends only its own sessions", async () => {
  const a = mustDetect();
  const b = mustDetect();
  assert.equal(a.root, b.root);
  let childA: Deno.ChildProcess | undefined;
  let childB: Deno.ChildProcess | undefined;
  try {
    const cgA = a.create("sess-share-a");
    const cgB = b.create("sess-share-b");
    childA = bash(`echo $$ > "$CG/cgroup.procs"; exec sleep 100`, { CG: cgA.path });
    childB = bash(`echo $$ > "$CG/cgroup.procs"; exec sleep 100`, { CG: cgB.path });
    const pa = childA.pid;
    const pb = childB.pid;
    await waitFor(
      "both children in their cgroups",
      () => cgA.procs().includes(pa) && cgB.procs().includes(pb),
    );
    assert.equal(await a.removeAll(), true);
    assert.equal((await childA.status).signal, "SIGKILL");
    assert.equal(cgA.exists(), false);
    // The other engine's session and the root are untouched; it can still make sessions.
    assert.equal(cgB.exists(), true);
    assert.ok(cgB.procs().includes(pb));
    assert.equal(procStat(pb)?.state !== "Z", true);
    b.create("sess-share-c");
    assert.equal(await a.removeAll(), true, "a second removeAll of the same tree is harmless");
    assert.equal(cgB.exists(), true);
    // The last one takes everything, the root included.
    assert.equal(await b.removeAll(), true);
    assert.equal((await childB.status).signal, "SIGKILL");
    assert.equal(new Cgroup(b.root).exists(), false);
  } finally {
    await cleanup({ tree: b, child: childB });
    await cleanup({ tree: a, child: childA });
  }
});

Deno.test("addPid moves a running process; freeze stops it until thawed", async () => {
  const tree = mustDetect();
  let child: Deno.ChildProcess | undefined;
  try {
    const cg = tree.create("sess-freeze");
    child = bash("while :; do sleep 0.02; done", {});
    cg.addPid(child.pid);
    assert.ok(cg.procs().includes(child.pid));
    assert.equal(cg.freeze(true), true);
    await waitFor("the freeze", () => cg.frozen());
    assert.equal(cg.freeze(false), true);
    await waitFor("the thaw", () => !cg.frozen());
    // A frozen cgroup can still be killed.
    cg.freeze(true);
    await waitFor("the second freeze", () => cg.frozen());
    cg.kill();
    assert.equal((await child.status).signal, "SIGKILL");
    assert.equal(await cg.remove(), true);
  } finally {
    await cleanup({ tree, child });
  }
});

Deno.test("cgroup operations fail with typed errors", async (t) => {
  const tree = mustDetect();
  try {
    const cg = tree.create("sess-err");
    await t.step("bad names are programmer errors", () => {
      for (const bad of ["", "A", "a.b", "../x", "a/b", "x".repeat(65), "cgroup.procs"]) {
        assert.throws(() => tree.create(bad), RangeError, bad);
      }
    });
    await t.step("an existing name is a CgroupError with the path", () => {
      assert.throws(
        () => tree.create("sess-err"),
        (err: unknown) => {
          assert.ok(err instanceof CgroupError);
          assert.equal(err.path, cg.path);
          assert.equal(err.errno, 17); // EEXIST
          assert.equal(err.code, "INTERNAL");
          assert.match(err.message, /^Cannot create cgroup ".*sess-err": File exists$/);
          return true;
        },
      );
    });
    await t.step("moving a pid that does not exist", () => {
      assert.throws(
        () => cg.addPid(0x3fffffff),
        (err: unknown) =>
          err instanceof CgroupError && err.path === `${cg.path}/cgroup.procs` &&
          /Cannot move pid \d+ into cgroup/.test(err.message),
      );
      assert.throws(() => cg.addPid(0), RangeError);
    });
    await t.step("a removed cgroup reads as empty and its writes throw", async () => {
      assert.equal(await cg.remove(), true);
      assert.deepEqual(cg.procs(), []);
      assert.equal(cg.populated(), false);
      assert.throws(() => cg.kill(), CgroupError);
      assert.equal(await cg.remove(), true);
    });
  } finally {
    await tree.removeAll();
  }
});

Deno.test("detectCgroup refuses unusable bases and says why", async (t) => {
  const own = mustDetect();
  const mount = own.root.slice(0, own.root.lastIndexOf("/"));
  try {
    const cases: [string, string, RegExp][] = [
      ["a path that does not exist", "/nonexistent", /not inside a cgroup2 mount/],
      ["a directory under /proc", "/proc/self", /not inside a cgroup2 mount/],
      ["a missing directory in the mount", `${mount}/no_such_cgroup`, /No such file/],
      ["a file in the mount", `${mount}/cgroup.procs`, /Not a directory/],
    ];
    for (const [name, base, reason] of cases) {
      await t.step(name, () => {
        const got = detectCgroup({ base });
        assert.equal(got.ok, false);
        assert.match(got.ok ? "" : got.reason, reason);
      });
    }
    await t.step("a directory outside any cgroup2 mount is left untouched", () => {
      const tmp = Deno.makeTempDirSync();
      try {
        const got = detectCgroup({ base: tmp });
        assert.equal(got.ok, false);
        assert.deepEqual([...Deno.readDirSync(tmp)], []);
      } finally {
        Deno.removeSync(tmp);
      }
    });
  } finally {
    await own.removeAll();
  }
});

Deno.test("detectCgroup degrades on hosts without a usable cgroup2 tree", async (t) => {
  const v1Only = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";
  await t.step("cgroup v1 only", () => {
    const got = detectCgroup({ mountinfo: v1Only, selfCgroup: "4:memory:/\n" });
    assert.equal(got.ok, false);
    assert.match(got.ok ? "" : got.reason, /No cgroup2 hierarchy is mounted \(cgroup v1 only/);
  });
  const v2 = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
  await t.step("no 0:: line", () => {
    const got = detectCgroup({ mountinfo: v2, selfCgroup: "4:memory:/\n" });
    assert.match(got.ok ? "" : got.reason, /no cgroup2 membership/);
  });
  await t.step("our cgroup lies outside the cgroup namespace", () => {
    const got = detectCgroup({ mountinfo: v2, selfCgroup: "0::/../../x\n" });
    assert.match(got.ok ? "" : got.reason, /outside this cgroup namespace/);
  });
  await t.step("our cgroup is not under the mount (a subtree bind mount)", () => {
    const bind = "29 23 0:26 /other /mnt/cg rw - cgroup2 cgroup2 rw\n";
    const got = detectCgroup({ mountinfo: bind, selfCgroup: "0::/mine\n" });
    assert.match(got.ok ? "" : got.reason, /not visible under any cgroup2 mount/);
  });
});

Deno.test("mountinfo and /proc/self/cgroup parsing covers hybrid and systemd layouts", () => {
  const hybrid = [
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755",
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw",
  ].join("\n");
  assert.deepEqual(parseCgroup2Mounts(hybrid), [{
    root: "/",
    mountPoint: "/sys/fs/cgroup/unified",
  }]);
  const systemd = "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev shared:4 - cgroup2 cgroup2 rw\n" +
    "90 29 0:26 /a\\040b /mnt/my\\040cg rw master:4 - cgroup2 cgroup2 rw\n";
  assert.deepEqual(parseCgroup2Mounts(systemd), [
    { root: "/", mountPoint: "/sys/fs/cgroup" },
    { root: "/a b", mountPoint: "/mnt/my cg" },
  ]);
  const user = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/termada.scope\n";
  assert.equal(
    parseOwnCgroup2Path(user),
    "/user.slice/user-1000.slice/user@1000.service/app.slice/termada.scope",
  );
  assert.equal(parseOwnCgroup2Path("9:name=systemd:/\n0::/\n"), "/");
  assert.equal(parseOwnCgroup2Path("4:memory:/x\n"), undefined);
});

Deno.test("sweepStale kills and removes dirs of dead daemons and keeps live ones", async () => {
  // Everything happens under a base inside our own tree, so the sweep cannot touch other
  // daemons' directories on this machine.
  const own = mustDetect();
  let victim: Deno.ChildProcess | undefined;
  let keeper: Deno.ChildProcess | undefined;
  try {
    const base = own.create("base");
    const tree = mustDetect(base.path);
    assert.equal(tree.root, `${base.path}/termada-${Deno.pid}`);
    const parent = new CgroupTree(base.path);
    // A pid that just exited stands for a crashed daemon.
    const dead = new Deno.Command("true").spawn();
    await dead.status;
    assert.equal(procStat(dead.pid), undefined);
    const stale = new CgroupTree(parent.create(`termada-${dead.pid}`).path);
    const staleSession: Cgroup = stale.create("old-session");
    victim = bash(`echo $$ > "$CG/cgroup.procs"; exec sleep 100`, { CG: staleSession.path });
    const victimPid = victim.pid;
    await waitFor("the victim to join", () => staleSession.procs().includes(victimPid));
    // A live pid's directory is kept, and so is a name that is not ours.
    keeper = bash("exec sleep 100", {});
    const live = parent.create(`termada-${keeper.pid}`);
    const other = parent.create("other");

    assert.deepEqual(await tree.sweepStale(), [stale.root]);
    assert.equal((await victim.status).signal, "SIGKILL");
    assert.equal(new Cgroup(stale.root).exists(), false);
    assert.equal(live.exists(), true);
    assert.equal(other.exists(), true);
    assert.equal(new Cgroup(tree.root).exists(), true);
  } finally {
    if (victim) await cleanup({ child: victim });
    if (keeper) await cleanup({ child: keeper });
    assert.equal(await own.removeAll(), true);
  }
});

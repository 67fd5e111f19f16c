/**
 * Black-box: snapshots through a real daemon — an agent's snapshot_create and snapshot_list, a
 * policy's snapshot before a matching command (and the command refused when it cannot be taken),
 * the operator's restore (atomic, audited, undoable) and rm from the CLI, and the control plane
 * never copied or reachable.
 */
import assert from "node:assert/strict";
import { call, startDaemon, stdioClient, termada } from "./_daemon.ts";

interface Work {
  /** The agents' working directory. */
  work: string;
  /** TERMADA_HOME, inside `work` (a snapshot of `work` must leave it out). */
  home: string;
}

async function workWithHome(config: string): Promise<Work> {
  const work = await Deno.realPath(await Deno.makeTempDir({ prefix: "termada-snap-work-" }));
  const home = `${work}/state`;
  await Deno.mkdir(home, { mode: 0o700 });
  await Deno.writeTextFile(`${home}/config.yaml`, config);
  await Deno.mkdir(`${work}/proj/src`, { recursive: true });
  await Deno.writeTextFile(`${work}/proj/src/main.ts`, "console.log(1);\n");
  await Deno.writeTextFile(`${work}/proj/README.md`, "# proj\n");
  return { work, home };
}

const ops = (home: string, args: string[]) => termada(home, [...args, "--json"]);

async function jsonOf(home: string, args: string[]): Promise<Record<string, unknown>> {
  const r = await ops(home, args);
  assert.equal(r.code, 0, `termada ${args.join(" ")}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

Deno.test("an agent's snapshot is restored by the operator, atomically and undoably, all audited", async () => {
  const w = await workWithHome("");
  try {
    await using _d = await startDaemon(w.home);
    await using c = await stdioClient(w.home, ["--agent", "ci"]);
    const s = await call(c, "session_create", { cwd: `${w.work}/proj` });
    const snap = await call(c, "snapshot_create", { session_id: s.session_id, label: "before" });
    assert.equal(snap.dir, `${w.work}/proj`);
    assert.equal(snap.files, 2);
    const listed = await call(c, "snapshot_list", {});
    assert.deepEqual(
      (listed.snapshots as { snapshot_id: string }[]).map((x) => x.snapshot_id),
      [snap.snapshot_id],
    );

    // The agent breaks things; the operator puts them back.
    await call(c, "exec_run", {
      session: s.session_id,
      command: ["rm src/main.ts && echo new > NEW.txt && echo changed > README.md"],
    });
    const restored = await jsonOf(w.home, ["snapshot", "restore", String(snap.snapshot_id)]);
    assert.equal(restored.failed, 0);
    assert.equal(await Deno.readTextFile(`${w.work}/proj/src/main.ts`), "console.log(1);\n");
    assert.equal(await Deno.readTextFile(`${w.work}/proj/README.md`), "# proj\n");
    assert.equal(
      await Deno.readTextFile(`${w.work}/proj/NEW.txt`),
      "new\n",
      "kept: no --delete-extra",
    );

    // Undo: the restore's own snapshot brings the agent's state back exactly.
    const undo = await jsonOf(w.home, ["snapshot", "restore", String(restored.undo_snapshot_id)]);
    assert.equal(undo.failed, 0);
    await assert.rejects(Deno.stat(`${w.work}/proj/src/main.ts`));
    assert.equal(await Deno.readTextFile(`${w.work}/proj/README.md`), "changed\n");

    const audit = (await jsonOf(w.home, ["audit", "-n", "200"])) as unknown as {
      event: string;
    }[];
    const events = audit.map((r) => r.event);
    for (const e of ["snapshot.created", "snapshot.restore_requested", "snapshot.restored"]) {
      assert.ok(events.includes(e), `${e} in ${events.join(" ")}`);
    }
    const all = await ops(w.home, ["snapshot", "list"]);
    assert.ok(JSON.parse(all.stdout).length >= 3, "the agent's, and two undo snapshots");
    const rm = await termada(w.home, ["snapshot", "rm", String(snap.snapshot_id)]);
    assert.equal(rm.code, 0, rm.stderr);
    assert.equal(
      (await call(c, "snapshot_list", {}) as { snapshots: unknown[] }).snapshots.length,
      0,
    );
  } finally {
    await Deno.remove(w.work, { recursive: true });
  }
});

Deno.test("Termada's control plane is never copied into a snapshot, nor a snapshot's target", async () => {
  const w = await workWithHome("");
  try {
    await using _d = await startDaemon(w.home);
    await using c = await stdioClient(w.home, ["--agent", "ci"]);
    const r = await c.callTool({ name: "snapshot_create", arguments: { path: w.home } });
    assert.equal(r.isError, true);
    assert.equal(
      (r.structuredContent as { error: { code: string } }).error.code,
      "DENIED_BY_POLICY",
    );
    const whole = await call(c, "snapshot_create", { path: w.work });
    const shown = await jsonOf(w.home, ["snapshot", "show", String(whole.snapshot_id)]);
    const paths = (shown.entries as { path: string }[]).map((e) => e.path);
    assert.ok(paths.includes("proj/README.md"), paths.join(" "));
    assert.ok(!paths.some((p) => p === "state" || p.startsWith("state/")), paths.join(" "));
  } finally {
    await Deno.remove(w.work, { recursive: true });
  }
});

Deno.test("a policy snapshots before matching commands, and refuses them when it cannot", async () => {
  const w = await workWithHome(`policies:
  default:
    snapshot:
      commands: ["rm *"]
`);
  try {
    await using _d = await startDaemon(w.home);
    await using c = await stdioClient(w.home, ["--agent", "ci"]);
    const s = await call(c, "session_create", { cwd: `${w.work}/proj` });
    const plain = await call(c, "exec_run", { session: s.session_id, command: ["echo", "hi"] });
    assert.equal(plain.status, "exited");
    assert.equal(
      (await call(c, "snapshot_list", {}) as { snapshots: unknown[] }).snapshots.length,
      0,
    );

    const rm = await call(c, "exec_run", { session: s.session_id, command: ["rm -r src"] });
    assert.equal(rm.exit_code, 0, JSON.stringify(rm));
    const taken = (await call(c, "snapshot_list", {})).snapshots as {
      snapshot_id: string;
      reason: string;
    }[];
    assert.equal(taken.length, 1);
    assert.match(taken[0]!.reason, new RegExp(`before job ${rm.job_id}`));
    const back = await jsonOf(w.home, ["snapshot", "restore", taken[0]!.snapshot_id]);
    assert.equal(back.failed, 0);
    assert.equal(await Deno.readTextFile(`${w.work}/proj/src/main.ts`), "console.log(1);\n");
  } finally {
    await Deno.remove(w.work, { recursive: true });
  }
});

Deno.test("a command whose policy snapshot cannot be taken does not run (on_failure: refuse)", async () => {
  const w = await workWithHome(`policies:
  default:
    snapshot:
      commands: ["rm *"]
      max_files: 2
`);
  try {
    await using _d = await startDaemon(w.home);
    await using t = await stdioClient(w.home, ["--agent", "ci"]);
    const ts = await call(t, "session_create", { cwd: `${w.work}/proj` });
    const refused = await t.callTool({
      name: "exec_run",
      arguments: { session: ts.session_id, command: ["rm -r src"] },
    });
    assert.equal(refused.isError, true, JSON.stringify(refused));
    assert.match(
      (refused.structuredContent as { error: { message: string } }).error.message,
      /snapshot the policy takes before it failed/,
    );
    assert.equal(await Deno.readTextFile(`${w.work}/proj/src/main.ts`), "console.log(1);\n");
  } finally {
    await Deno.remove(w.work, { recursive: true });
  }
});

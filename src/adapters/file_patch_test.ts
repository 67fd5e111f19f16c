import assert from "node:assert/strict";
import { filePatchAdapter } from "./file_patch.ts";
import { AdapterRunner } from "./runner.ts";
import { allow, isCode, isReason, openStore, tempDir } from "./_test_util.ts";

const ctx = { agent: "a1", signal: new AbortController().signal };
const exec = { idempotencyKey: "k", signal: ctx.signal };

const MODIFY = `--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
`;

async function setup(dir: string) {
  const root = `${dir}/root`;
  await Deno.mkdir(root);
  await Deno.writeTextFile(`${root}/a.txt`, "one\ntwo\nthree\n");
  await Deno.writeTextFile(`${root}/b.txt`, "alpha\nbeta\n");
  return root;
}

Deno.test("file.patch applies, verifies and compensates through the runner", async () => {
  await using dir = await tempDir();
  const root = await setup(dir.path);
  using s = openStore(`${dir.path}/t.db`);
  const runner = new AdapterRunner(s.store, { adapters: [filePatchAdapter({ roots: [root] })] });
  const patch = MODIFY + `--- /dev/null
+++ b/sub/new.txt
@@ -0,0 +1,2 @@
+fresh
+file
--- a/b.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-alpha
-beta
`;
  const run = await runner.run("file.patch", { patch }, { agent: "a1", admit: allow });
  assert.equal(run.phase, "verified");
  assert.equal(run.verified, true);
  assert.equal(run.reversible, true);
  assert.equal(run.risk, "medium");
  assert.equal(run.summary, "3 files, +3 −3: a.txt, +sub/new.txt, −b.txt");
  assert.equal(await Deno.readTextFile(`${root}/a.txt`), "one\nTWO\nthree\n");
  assert.equal(await Deno.readTextFile(`${root}/sub/new.txt`), "fresh\nfile\n");
  await assert.rejects(Deno.stat(`${root}/b.txt`), Deno.errors.NotFound);

  const undone = await runner.compensate(run.id);
  assert.equal(undone.phase, "compensated");
  assert.equal(await Deno.readTextFile(`${root}/a.txt`), "one\ntwo\nthree\n");
  assert.equal(await Deno.readTextFile(`${root}/b.txt`), "alpha\nbeta\n");
  await assert.rejects(Deno.stat(`${root}/sub/new.txt`), Deno.errors.NotFound);
  await assert.rejects(runner.compensate(run.id), isReason("PHASE_CONFLICT"));
});

Deno.test("file.patch keeps the file's mode and leaves no temp files", async () => {
  await using dir = await tempDir();
  const root = await setup(dir.path);
  await Deno.chmod(`${root}/a.txt`, 0o600);
  const adapter = filePatchAdapter({ roots: [root] });
  const prepared = await adapter.prepare({ patch: MODIFY }, ctx);
  await adapter.execute(prepared.plan, exec);
  assert.equal((await Deno.stat(`${root}/a.txt`)).mode! & 0o777, 0o600);
  const names = [];
  for await (const e of Deno.readDir(root)) names.push(e.name);
  assert.deepEqual(names.sort(), ["a.txt", "b.txt"]);
});

Deno.test("file.patch execute is idempotent and refuses a file someone else changed", async () => {
  await using dir = await tempDir();
  const root = await setup(dir.path);
  const adapter = filePatchAdapter({ roots: [root] });
  const { plan } = await adapter.prepare({ patch: MODIFY }, ctx);
  assert.equal((await adapter.execute(plan, exec)).files[0]!.action, "written");
  assert.equal((await adapter.execute(plan, exec)).files[0]!.action, "already");
  assert.equal((await adapter.reconcile!(plan, exec)).status, "applied");

  const { plan: again } = await adapter.prepare({
    patch: MODIFY.replaceAll("two", "TWO").replace("+TWO", "+2"),
  }, ctx);
  await Deno.writeTextFile(`${root}/a.txt`, "someone else\n");
  await assert.rejects(adapter.execute(again, exec), isReason("RESOURCE_CHANGED"));
  assert.equal(await Deno.readTextFile(`${root}/a.txt`), "someone else\n");
  assert.equal((await adapter.reconcile!(again, exec)).status, "unknown");
  assert.equal((await adapter.verify(again, { files: [] }, exec)).holds, false);
  assert.equal((await adapter.compensate!(again, undefined, exec)).done, false);
});

Deno.test("file.patch refuses paths outside its roots", async (t) => {
  await using dir = await tempDir();
  const root = await setup(dir.path);
  await Deno.mkdir(`${dir.path}/outside`);
  await Deno.writeTextFile(`${dir.path}/outside/a.txt`, "one\ntwo\nthree\n");
  await Deno.symlink(`${dir.path}/outside`, `${root}/link`);
  await Deno.symlink(`${dir.path}/outside/a.txt`, `${root}/file_link.txt`);
  const adapter = filePatchAdapter({ roots: [root] });
  const cases: Record<string, string> = {
    "a .. segment": "../outside/a.txt",
    "an absolute path outside": `${dir.path}/outside/a.txt`,
    "a symlinked directory leading out": "link/a.txt",
    "a new file under a symlinked directory": "link/deeper/new.txt",
  };
  for (const [name, path] of Object.entries(cases)) {
    await t.step(name, async () => {
      await assert.rejects(
        adapter.prepare({ patch: MODIFY.replaceAll("a.txt", path) }, ctx),
        isReason("PATH_OUTSIDE_ROOT"),
      );
    });
  }
  await t.step("a symlink as the target", async () => {
    await assert.rejects(
      adapter.prepare({ patch: MODIFY.replaceAll("a.txt", "file_link.txt") }, ctx),
      isReason("PATH_OUTSIDE_ROOT"),
    );
  });
  await t.step("a root that is not allowed", async () => {
    await assert.rejects(
      adapter.prepare({ patch: MODIFY, root: `${dir.path}/outside` }, ctx),
      isReason("PATH_OUTSIDE_ROOT"),
    );
  });
  await t.step("an absolute path inside is fine", async () => {
    const p = await adapter.prepare({ patch: MODIFY.replaceAll("a.txt", `${root}/a.txt`) }, ctx);
    assert.equal(p.plan.files[0]!.path, `${await Deno.realPath(root)}/a.txt`);
  });
  assert.equal(await Deno.readTextFile(`${dir.path}/outside/a.txt`), "one\ntwo\nthree\n");
});

Deno.test("file.patch: a hunk that does not match changes nothing", async () => {
  await using dir = await tempDir();
  const root = await setup(dir.path);
  using s = openStore(`${dir.path}/t.db`);
  const runner = new AdapterRunner(s.store, { adapters: [filePatchAdapter({ roots: [root] })] });
  const patch = MODIFY + `@@ -10,1 +10,1 @@
-not there
+x
`;
  await assert.rejects(
    runner.run("file.patch", { patch }, { agent: "a1", admit: allow }),
    { message: 'Cannot apply patch to "a.txt": hunk 2 does not match' },
  );
  assert.equal(await Deno.readTextFile(`${root}/a.txt`), "one\ntwo\nthree\n");
  assert.equal(runner.list().length, 0, "a refused prepare stores no run");
});

Deno.test("file.patch: when the second file fails prepare, nothing is written", async () => {
  await using dir = await tempDir();
  const root = await setup(dir.path);
  using s = openStore(`${dir.path}/t.db`);
  const runner = new AdapterRunner(s.store, { adapters: [filePatchAdapter({ roots: [root] })] });
  const patch = MODIFY + `--- a/b.txt
+++ b/b.txt
@@ -1,2 +1,2 @@
 alpha
-gamma
+delta
`;
  await assert.rejects(
    runner.run("file.patch", { patch }, { agent: "a1", admit: allow }),
    (e) => isCode("CONFLICT")(e) && /"b\.txt": hunk 1/.test((e as Error).message),
  );
  assert.equal(await Deno.readTextFile(`${root}/a.txt`), "one\ntwo\nthree\n");
  assert.equal(await Deno.readTextFile(`${root}/b.txt`), "alpha\nbeta\n");
});

Deno.test("file.patch refuses bad input and creating a file that exists", async () => {
  await using dir = await tempDir();
  const root = await setup(dir.path);
  using s = openStore(`${dir.path}/t.db`);
  const runner = new AdapterRunner(s.store, { adapters: [filePatchAdapter({ roots: [root] })] });
  await assert.rejects(
    runner.run("file.patch", { patch: 42 }, { agent: "a1", admit: allow }),
    (e) => isCode("INVALID_ARGUMENT")(e) && (e as Error).message.includes('"patch"'),
  );
  await assert.rejects(
    runner.run("file.patch", { patch: "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+x\n" }, {
      agent: "a1",
      admit: allow,
    }),
    { message: 'Cannot create "a.txt": it already exists' },
  );
});

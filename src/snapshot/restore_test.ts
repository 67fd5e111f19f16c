import assert from "node:assert/strict";
import {
  createSnapshot,
  getSnapshot,
  listSnapshots,
  restoreSnapshot,
  SnapshotError,
} from "./mod.ts";
import { restoreWithHooks } from "./restore.ts";
import { bytes, listTree, objectsIn, type Spec, withDirs, writeTree } from "./_test_util.ts";

const SPEC: Spec = {
  "README.md": "# hi\n",
  "empty": "",
  "src/main.ts": "console.log(1)\n",
  "src/lib/util.ts": "export {}\n",
  "assets/logo.bin": bytes(1_500_000),
  "assets/small.bin": bytes(1000, 7),
  "keep": { dir: true },
  "link-to-readme": { link: "README.md" },
  "src/abs-link": { link: "/etc/hostname" },
};

async function seed(work: string): Promise<void> {
  await writeTree(work, SPEC);
  await Deno.chmod(`${work}/src/main.ts`, 0o755);
  await Deno.chmod(`${work}/assets`, 0o750);
  await Deno.utime(`${work}/README.md`, new Date(1_500_000_000_000), new Date(1_500_000_000_000));
}

/** Changes, deletions and additions of every kind. */
async function mutate(work: string): Promise<void> {
  await Deno.writeTextFile(`${work}/README.md`, "# changed\n");
  await Deno.remove(`${work}/src/lib`, { recursive: true });
  await Deno.remove(`${work}/assets/logo.bin`);
  await Deno.chmod(`${work}/src/main.ts`, 0o600);
  await Deno.remove(`${work}/link-to-readme`);
  await Deno.symlink("empty", `${work}/link-to-readme`);
  await writeTree(work, { "new.txt": "new", "newdir/x": "x" });
}

Deno.test("restore round trip: changed, deleted and new paths, with and without delete_extra", async () => {
  await withDirs(async ({ root, work }) => {
    await seed(work);
    const original = await listTree(work, true);
    const s = await createSnapshot(root, work);
    await mutate(work);
    const r1 = await restoreSnapshot(root, s.snapshot.id);
    assert.equal(r1.delete_extra, false);
    assert.deepEqual(r1.failures, []);
    assert.equal(r1.failed, 0);
    // README, main.ts (mode), link: restored; src/lib, util.ts, logo.bin: created.
    assert.equal(r1.restored, 3);
    assert.equal(r1.created, 3);
    assert.equal(r1.deleted, 0);
    assert.equal(r1.unchanged, s.snapshot.files + s.snapshot.dirs + s.snapshot.symlinks - 6);
    const extra = ["d newdir 755", "f new.txt 644", "f newdir/x 644"];
    const now = await listTree(work);
    assert.deepEqual(
      now.filter((l) => !extra.some((e) => l.startsWith(e))),
      withoutTimes(original),
    );
    assert.equal((await Deno.lstat(`${work}/link-to-readme`)).isSymlink, true);
    assert.equal(await Deno.readLink(`${work}/src/abs-link`), "/etc/hostname");
    assert.equal((await Deno.stat(`${work}/README.md`)).mtime?.getTime(), 1_500_000_000_000);

    const r2 = await restoreSnapshot(root, s.snapshot.id, { delete_extra: true });
    assert.equal(r2.deleted, 3);
    assert.equal(r2.restored + r2.created, 0);
    assert.deepEqual(await listTree(work, true), original);
  });
});

function withoutTimes(lines: string[]): string[] {
  return lines.map((l) => l.startsWith("l ") ? l : l.replace(/ -?\d+$/, ""));
}

Deno.test("restoring the undo snapshot returns the tree to its state before the restore", async () => {
  await withDirs(async ({ root, work }) => {
    await seed(work);
    const s = await createSnapshot(root, work);
    await mutate(work);
    const modified = await listTree(work, true);
    const r = await restoreSnapshot(root, s.snapshot.id);
    assert.notDeepEqual(await listTree(work), withoutTimes(modified));
    const undoInfo = (await listSnapshots(root)).find((i) => i.id === r.undo_snapshot_id)!;
    assert.equal(undoInfo.kind, "pre_restore");
    assert.equal(undoInfo.restore_of, s.snapshot.id);
    const u = await restoreSnapshot(root, r.undo_snapshot_id);
    assert.equal(u.delete_extra, true); // the default for pre_restore snapshots
    assert.deepEqual(u.failures, []);
    assert.deepEqual(await listTree(work, true), modified);
  });
});

Deno.test("restore into another target, missing or not, and refusals", async () => {
  await withDirs(async ({ root, work, base }) => {
    await seed(work);
    const s = await createSnapshot(root, work);
    const r = await restoreSnapshot(root, s.snapshot.id, { target: `${base}/copy/deep` });
    assert.equal(r.target, `${base}/copy/deep`);
    assert.deepEqual(await listTree(`${base}/copy/deep`, true), await listTree(work, true));
    const undo = await getSnapshot(root, r.undo_snapshot_id);
    assert.equal(undo.entries.length, 0);
    await Deno.writeTextFile(`${base}/file`, "x");
    await assert.rejects(
      restoreSnapshot(root, s.snapshot.id, { target: `${base}/file` }),
      SnapshotError,
    );
    await assert.rejects(
      restoreSnapshot(root, s.snapshot.id, { target: `${root}/objects` }),
      SnapshotError,
    );
    await assert.rejects(restoreSnapshot(root, "snap_0000000000000000"), /No snapshot/);
  });
});

Deno.test("a tampered manifest (../, absolute path, missing parent) is refused before anything changes", async (t) => {
  for (const bad of ["../escape", "/tmp/abs", "a/../../x", "nodir/x", "a//b"]) {
    await t.step(bad, async () => {
      await withDirs(async ({ root, work, base }) => {
        await writeTree(work, { "a": "1" });
        const s = await createSnapshot(root, work);
        const path = `${root}/manifests/${s.snapshot.id}.jsonl`;
        const text = await Deno.readTextFile(path);
        await Deno.writeTextFile(path, text.replace('"path":"a"', `"path":${JSON.stringify(bad)}`));
        await assert.rejects(restoreSnapshot(root, s.snapshot.id), (err: unknown) => {
          assert.ok(err instanceof SnapshotError);
          assert.equal(err.snapshotCode, "SNAPSHOT_CORRUPT");
          return true;
        });
        assert.equal((await listSnapshots(root)).length, 1); // no undo snapshot either
        await assert.rejects(Deno.lstat(`${base}/escape`), Deno.errors.NotFound);
      });
    });
  }
});

Deno.test("restore never writes through a symlinked parent directory", async (t) => {
  await t.step(
    "a link where the snapshot has a directory is replaced, its target untouched",
    async () => {
      await withDirs(async ({ root, work, base }) => {
        await writeTree(work, { "sub/f": "inside", "sub/g": "g" });
        const s = await createSnapshot(root, work);
        await Deno.mkdir(`${base}/outside`);
        await Deno.remove(`${work}/sub`, { recursive: true });
        await Deno.symlink(`${base}/outside`, `${work}/sub`);
        const r = await restoreSnapshot(root, s.snapshot.id);
        assert.deepEqual(r.failures, []);
        assert.deepEqual([...Deno.readDirSync(`${base}/outside`)], []);
        assert.equal((await Deno.lstat(`${work}/sub`)).isDirectory, true);
        assert.equal(await Deno.readTextFile(`${work}/sub/f`), "inside");
        await restoreSnapshot(root, r.undo_snapshot_id); // and undo brings the link back
        assert.equal(await Deno.readLink(`${work}/sub`), `${base}/outside`);
      });
    },
  );
  await t.step("a swap during the restore makes those paths fail, and only those", async () => {
    await withDirs(async ({ root, work, base }) => {
      await writeTree(work, { "sub/f": "inside", "top": "top" });
      const s = await createSnapshot(root, work);
      await writeTree(work, { "sub/f": "changed", "top": "changed" });
      await Deno.mkdir(`${base}/outside`);
      const r = await restoreWithHooks(root, s.snapshot.id, {}, {
        beforeEntry: async (path) => {
          if (path !== "sub/f") return;
          await Deno.rename(`${work}/sub`, `${base}/moved`);
          await Deno.symlink(`${base}/outside`, `${work}/sub`);
        },
      });
      assert.equal(r.failed, 2); // sub/f, and sub's own mode and mtime
      assert.deepEqual(r.failures.map((f) => f.path), ["sub/f", "sub"]);
      assert.match(r.failures[0]!.error, /not a real directory/);
      assert.deepEqual([...Deno.readDirSync(`${base}/outside`)], []);
      assert.equal(await Deno.readTextFile(`${work}/top`), "top");
    });
  });
});

Deno.test("a corrupted or missing object fails that file only, and says so", async () => {
  await withDirs(async ({ root, work }) => {
    await writeTree(work, { "a": "aaa", "b": "bbb", "c": "ccc" });
    const s = await createSnapshot(root, work);
    const m = await getSnapshot(root, s.snapshot.id);
    const sha = (p: string) => {
      const e = m.entries.find((x) => x.path === p);
      assert.ok(e?.type === "file");
      return e.sha256;
    };
    await Deno.writeTextFile(`${root}/objects/${sha("a").slice(0, 2)}/${sha("a")}`, "evil");
    await Deno.remove(`${root}/objects/${sha("c").slice(0, 2)}/${sha("c")}`);
    await writeTree(work, { "a": "A2", "b": "B2", "c": "C2" });
    const r = await restoreSnapshot(root, s.snapshot.id);
    assert.equal(r.failed, 2);
    assert.match(r.failures.find((f) => f.path === "a")!.error, /corrupt/);
    assert.match(r.failures.find((f) => f.path === "c")!.error, /missing/);
    assert.equal(await Deno.readTextFile(`${work}/a`), "A2");
    assert.equal(await Deno.readTextFile(`${work}/b`), "bbb");
    assert.equal(await Deno.readTextFile(`${work}/c`), "C2");
    assert.deepEqual([...Deno.readDirSync(work)].map((e) => e.name).sort(), ["a", "b", "c"]);
  });
});

Deno.test("type changes: a directory where a file was, a file where a directory was", async () => {
  await withDirs(async ({ root, work }) => {
    await writeTree(work, { "x": "file x", "d/inner": "i" });
    const original = await listTree(work, true);
    const s = await createSnapshot(root, work);
    await Deno.remove(`${work}/x`);
    await writeTree(work, { "x/child": "c" });
    await Deno.remove(`${work}/d`, { recursive: true });
    await Deno.writeTextFile(`${work}/d`, "now a file");
    const r1 = await restoreSnapshot(root, s.snapshot.id);
    assert.deepEqual(r1.failures.map((f) => f.path), ["x"]); // a non-empty directory in the way
    assert.equal(await Deno.readTextFile(`${work}/d/inner`), "i");
    const r2 = await restoreSnapshot(root, s.snapshot.id, { delete_extra: true });
    assert.deepEqual(r2.failures, []);
    assert.deepEqual(await listTree(work, true), original);
  });
});

Deno.test("delete_extra never touches excluded paths; read-only directories are restored", async () => {
  await withDirs(async ({ root, work }) => {
    await writeTree(work, { "ro/f": "f", "a": "a", "node_modules/m.js": "m" });
    await Deno.chmod(`${work}/ro`, 0o555);
    const s = await createSnapshot(root, work);
    await Deno.chmod(`${work}/ro`, 0o755);
    await writeTree(work, { "ro/f": "changed", "ro/extra": "e", "pkg/node_modules/n.js": "n" });
    await Deno.writeTextFile(`${work}/node_modules/m.js`, "m2");
    const r = await restoreSnapshot(root, s.snapshot.id, { delete_extra: true });
    // pkg itself is extra but holds an excluded directory: it stays, reported.
    assert.deepEqual(r.failures.map((f) => f.path), ["pkg"]);
    assert.equal(await Deno.readTextFile(`${work}/node_modules/m.js`), "m2");
    assert.equal(await Deno.readTextFile(`${work}/pkg/node_modules/n.js`), "n");
    assert.equal(await Deno.readTextFile(`${work}/ro/f`), "f");
    assert.equal((await Deno.stat(`${work}/ro`)).mode! & 0o777, 0o555);
    await assert.rejects(Deno.lstat(`${work}/ro/extra`), Deno.errors.NotFound);
  });
});

Deno.test("a restore that changes nothing writes no object and reports all unchanged", async () => {
  await withDirs(async ({ root, work }) => {
    await seed(work);
    const s = await createSnapshot(root, work);
    const objects = await objectsIn(root);
    const r = await restoreSnapshot(root, s.snapshot.id, { delete_extra: true });
    assert.equal(r.unchanged, s.snapshot.files + s.snapshot.dirs + s.snapshot.symlinks);
    assert.equal(r.restored + r.created + r.deleted + r.failed, 0);
    assert.deepEqual(await objectsIn(root), objects);
  });
});

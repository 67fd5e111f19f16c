import assert from "node:assert/strict";
import {
  createSnapshot,
  gc,
  getSnapshot,
  listSnapshots,
  removeSnapshot,
  SNAPSHOT_ID_PATTERN,
  SnapshotError,
} from "./mod.ts";
import { createLocked } from "./store.ts";
import { Layout } from "./_paths.ts";
import { SnapshotLimits } from "./schema.ts";
import { systemClock } from "../shared/mod.ts";
import { bytes, filesBelow, objectsIn, steppingClock, withDirs, writeTree } from "./_test_util.ts";

async function rejectsWith(p: Promise<unknown>, code: string, key?: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof SnapshotError, String(err));
    assert.equal(err.snapshotCode, code);
    if (key !== undefined) assert.equal(err.details?.key, key);
    return true;
  });
}

Deno.test("createSnapshot records files, dirs, symlinks, modes and mtimes; getSnapshot reads it", async () => {
  await withDirs(async ({ root, work }) => {
    await writeTree(work, {
      "a.txt": "hello",
      "empty": "",
      "bin/blob": bytes(300_000),
      "deep/er/still/f.txt": "x",
      "emptydir": { dir: true },
      "link": { link: "a.txt" },
      "dangling": { link: "../../nowhere" },
    });
    await Deno.chmod(`${work}/a.txt`, 0o751);
    await Deno.utime(`${work}/a.txt`, new Date(1_600_000_000_000), new Date(1_600_000_000_000));
    const r = await createSnapshot(root, work, { label: "first", created_by: "test" });
    assert.match(r.snapshot.id, SNAPSHOT_ID_PATTERN);
    assert.equal(r.snapshot.dir, work);
    assert.equal(r.snapshot.files, 4);
    assert.equal(r.snapshot.symlinks, 2);
    assert.equal(r.snapshot.dirs, 5); // bin, deep, deep/er, deep/er/still, emptydir
    assert.equal(r.snapshot.bytes, 5 + 300_000 + 1);
    assert.deepEqual(r.skipped, []);
    const m = await getSnapshot(root, r.snapshot.id);
    assert.deepEqual(m.info, r.snapshot);
    const a = m.entries.find((e) => e.path === "a.txt");
    assert.ok(a?.type === "file");
    assert.equal(a.mode, 0o751);
    assert.equal(a.mtime_ms, 1_600_000_000_000);
    assert.equal(a.sha256, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
    assert.deepEqual(m.entries.find((e) => e.path === "dangling"), {
      path: "dangling",
      type: "symlink",
      target: "../../nowhere",
      mtime_ms: m.entries.find((e) => e.path === "dangling")!.mtime_ms,
    });
    assert.deepEqual(m.entries.map((e) => e.path), [
      "a.txt",
      "bin",
      "bin/blob",
      "dangling",
      "deep",
      "deep/er",
      "deep/er/still",
      "deep/er/still/f.txt",
      "empty",
      "emptydir",
      "link",
    ]);
    assert.equal((await objectsIn(root)).length, 4);
    assert.equal((await Deno.stat(root)).mode! & 0o777, 0o700);
  });
});

Deno.test("listSnapshots is newest first and filters by directory", async () => {
  await withDirs(async ({ root, work, base }) => {
    const clock = steppingClock();
    await writeTree(work, { "f": "1" });
    await Deno.mkdir(`${base}/other`);
    const s1 = await createSnapshot(root, work, { clock, label: "one" });
    const s2 = await createSnapshot(root, `${base}/other`, { clock });
    const s3 = await createSnapshot(root, work, { clock, label: "three" });
    const all = await listSnapshots(root);
    assert.deepEqual(all.map((i) => i.id), [s3, s2, s1].map((s) => s.snapshot.id));
    assert.deepEqual(all.map((i) => i.label), ["three", undefined, "one"]);
    const mine = await listSnapshots(root, { dir: `${work}/../work` });
    assert.deepEqual(mine.map((i) => i.id), [s3.snapshot.id, s1.snapshot.id]);
    assert.deepEqual(await listSnapshots(`${base}/no-store`), []);
  });
});

Deno.test("identical content is stored once, across files and snapshots", async () => {
  await withDirs(async ({ root, work }) => {
    await writeTree(work, {
      "a": "same",
      "b/c": "same",
      "big1": bytes(2_000_000),
      "big2": bytes(2_000_000),
    });
    await createSnapshot(root, work);
    assert.equal((await objectsIn(root)).length, 2);
    await Deno.writeTextFile(`${work}/d`, "new");
    await createSnapshot(root, work);
    assert.equal((await objectsIn(root)).length, 3);
    assert.deepEqual(await filesBelow(`${root}/objects/tmp`), []);
  });
});

Deno.test("excludes: node_modules and .git by default, include_git, custom patterns", async (t) => {
  const spec = {
    "src/a.ts": "a",
    "node_modules/x/index.js": "x",
    "pkg/node_modules/y.js": "y",
    ".git/HEAD": "ref",
    "build/out/o.bin": "o",
    "src/build/out/keep": "k",
    "app.log": "l",
    "logs/z.log": "z",
  };
  const paths = async (opts: Parameters<typeof createSnapshot>[2]) => {
    let out: string[] = [];
    await withDirs(async ({ root, work }) => {
      await writeTree(work, spec);
      const r = await createSnapshot(root, work, opts);
      out = (await getSnapshot(root, r.snapshot.id)).entries
        .filter((e) => e.type === "file").map((e) => e.path);
    });
    return out;
  };
  await t.step("defaults", async () => {
    assert.deepEqual(await paths({}), [
      "app.log",
      "build/out/o.bin",
      "logs/z.log",
      "src/a.ts",
      "src/build/out/keep",
    ]);
  });
  await t.step("include_git", async () => {
    assert.ok((await paths({ include_git: true })).includes(".git/HEAD"));
  });
  await t.step("excludes replace the defaults; floating and anchored globs", async () => {
    assert.deepEqual(await paths({ excludes: ["*.log", "build/out"] }), [
      "node_modules/x/index.js",
      "pkg/node_modules/y.js",
      "src/a.ts",
      "src/build/out/keep",
    ]);
  });
  await t.step("bounded and validated", async () => {
    await withDirs(async ({ root, work }) => {
      const many = Array.from({ length: 65 }, (_, i) => `p${i}`);
      await rejectsWith(
        createSnapshot(root, work, { excludes: many }),
        "INVALID_ARGUMENT",
        "excludes",
      );
      await rejectsWith(createSnapshot(root, work, { excludes: ["../x"] }), "INVALID_ARGUMENT");
      await rejectsWith(createSnapshot(root, work, { excludes: ["/abs"] }), "INVALID_ARGUMENT");
      await rejectsWith(
        createSnapshot(root, work, { excludes: ["x".repeat(257)] }),
        "INVALID_ARGUMENT",
      );
      await rejectsWith(
        createSnapshot(root, work, { label: "l".repeat(201) }),
        "INVALID_ARGUMENT",
        "label",
      );
      await rejectsWith(
        createSnapshot(root, work, { limits: { max_files: 100_001 } }),
        "INVALID_ARGUMENT",
        "limits.max_files",
      );
      await rejectsWith(createSnapshot(root, `${work}/missing`), "INVALID_ARGUMENT", "dir");
    });
  });
});

Deno.test("every limit fails with SNAPSHOT_TOO_LARGE and leaves nothing behind", async (t) => {
  const cases: [string, Record<string, number>][] = [
    ["max_files", { max_files: 5 }],
    ["max_bytes", { max_bytes: 10_000 }],
    ["max_file_bytes", { max_file_bytes: 4_000 }],
  ];
  for (const [key, limits] of cases) {
    await t.step(key, async () => {
      await withDirs(async ({ root, work }) => {
        const spec: Record<string, Uint8Array> = {};
        for (let i = 0; i < 6; i++) spec[`d/f${i}`] = bytes(3_000 + (i === 5 ? 2_000 : 0), i);
        await writeTree(work, spec);
        await assert.rejects(createSnapshot(root, work, { limits }), (err: unknown) => {
          assert.ok(err instanceof SnapshotError);
          assert.equal(err.code, "QUOTA_EXCEEDED");
          assert.equal(err.retriable, false);
          assert.equal(err.details?.state, "SNAPSHOT_TOO_LARGE");
          assert.equal(err.details?.key, key);
          assert.equal(err.details?.limit, Object.values(limits)[0]);
          return true;
        });
        assert.deepEqual(await objectsIn(root), []);
        assert.deepEqual(await filesBelow(`${root}/manifests`), []);
        assert.deepEqual(await filesBelow(`${root}/objects/tmp`), []);
      });
    });
  }
  await t.step("an abort after objects were stored removes only its own objects", async () => {
    await withDirs(async ({ root, work }) => {
      await writeTree(work, { "old": "kept" });
      await createSnapshot(root, work);
      const before = await objectsIn(root);
      await writeTree(work, { "new1": "n1", "new2": bytes(1_500_000) });
      const layout = new Layout(root);
      await assert.rejects(
        createLocked(layout, work, {
          excludes: [".git"],
          include_git: false,
          limits: SnapshotLimits.parse({}),
          keep: 10,
          kind: "manual",
          clock: systemClock,
          beforeManifest: () => Promise.reject(new Error("disk full")),
        }),
        /disk full/,
      );
      assert.deepEqual(await objectsIn(root), before);
      assert.equal((await listSnapshots(root)).length, 1);
    });
  });
});

Deno.test("sockets and fifos are skipped with a reason; the store inside the tree is skipped", async () => {
  await withDirs(async ({ work }) => {
    await writeTree(work, { "f": "1" });
    const root = `${work}/.state/snapshots`;
    const fifo = await new Deno.Command("mkfifo", { args: [`${work}/pipe`] }).output();
    assert.ok(fifo.success);
    // A socket file that outlives its listener (Deno removes its own on close).
    const sock = await new Deno.Command("python3", {
      args: [
        "-c",
        "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])",
        `${work}/sock`,
      ],
    }).output();
    assert.ok(sock.success);
    await createSnapshot(root, work); // the store now exists inside the tree
    const r = await createSnapshot(root, work);
    assert.deepEqual(r.skipped, [
      { path: ".state/snapshots", skipped: "snapshot_store" },
      { path: "pipe", skipped: "fifo" },
      { path: "sock", skipped: "socket" },
    ]);
    assert.equal(r.snapshot.skipped, 3);
    assert.equal(r.snapshot.files, 1);
  });
});

Deno.test("removeSnapshot frees the objects no other snapshot shares; gc removes orphans", async () => {
  await withDirs(async ({ root, work }) => {
    await writeTree(work, { "shared": "s", "only1": "1" });
    const s1 = await createSnapshot(root, work);
    await Deno.remove(`${work}/only1`);
    await writeTree(work, { "only2": "22" });
    const s2 = await createSnapshot(root, work);
    assert.equal((await objectsIn(root)).length, 3);
    const r = await removeSnapshot(root, s1.snapshot.id);
    assert.deepEqual(r, { id: s1.snapshot.id, removed_objects: 1, freed_bytes: 1 });
    assert.equal((await objectsIn(root)).length, 2);
    await rejectsWith(getSnapshot(root, s1.snapshot.id), "SNAPSHOT_NOT_FOUND");
    await rejectsWith(removeSnapshot(root, s1.snapshot.id), "SNAPSHOT_NOT_FOUND");
    await rejectsWith(removeSnapshot(root, "../../etc/passwd"), "SNAPSHOT_NOT_FOUND");
    // An orphan object and a stale temp file, as a crash would leave them.
    const orphan = "ab".padEnd(64, "0");
    await Deno.mkdir(`${root}/objects/ab`, { recursive: true });
    await Deno.writeTextFile(`${root}/objects/ab/${orphan}`, "orphan");
    await Deno.writeTextFile(`${root}/objects/tmp/.termada-tmp-0123456789abcdef`, "partial");
    const g = await gc(root);
    assert.deepEqual(g, {
      removed_objects: 1,
      freed_bytes: 6,
      kept_objects: 2,
      corrupt_manifests: [],
    });
    assert.deepEqual(await filesBelow(`${root}/objects/tmp`), []);
    await removeSnapshot(root, s2.snapshot.id);
    assert.deepEqual(await objectsIn(root), []);
  });
});

Deno.test("gc keeps every object a corrupt manifest may name, and reports it", async () => {
  await withDirs(async ({ root, work }) => {
    await writeTree(work, { "a": "a" });
    const s = await createSnapshot(root, work);
    const path = `${root}/manifests/${s.snapshot.id}.jsonl`;
    await Deno.writeTextFile(path, (await Deno.readTextFile(path)).slice(10));
    assert.deepEqual(await listSnapshots(root), []);
    await rejectsWith(getSnapshot(root, s.snapshot.id), "SNAPSHOT_CORRUPT");
    const g = await gc(root);
    assert.deepEqual(g.corrupt_manifests, [s.snapshot.id]);
    assert.equal(g.kept_objects, 1);
    await removeSnapshot(root, s.snapshot.id); // still removable
    assert.deepEqual(await objectsIn(root), []);
  });
});

Deno.test("keep prunes the oldest snapshots and their unshared objects", async () => {
  await withDirs(async ({ root, work }) => {
    const clock = steppingClock();
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      await Deno.writeTextFile(`${work}/f`, `v${i}`);
      const r = await createSnapshot(root, work, { clock, keep: 2 });
      ids.push(r.snapshot.id);
      assert.deepEqual(r.pruned, i < 2 ? [] : [ids[i - 2]]);
    }
    assert.deepEqual((await listSnapshots(root)).map((s) => s.id), [ids[3], ids[2]]);
    assert.equal((await objectsIn(root)).length, 2);
  });
});

Deno.test("concurrent operations on one store are serialised", async () => {
  await withDirs(async ({ root, work }) => {
    await writeTree(work, { "a": "1", "b": bytes(100_000) });
    const results = await Promise.all([
      createSnapshot(root, work),
      createSnapshot(root, work),
      gc(root),
      createSnapshot(root, work),
    ]);
    assert.equal((await listSnapshots(root)).length, 3);
    assert.equal((await objectsIn(root)).length, 2);
    for (const r of results.slice(0, 2)) assert.ok("snapshot" in r);
  });
});

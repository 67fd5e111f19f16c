import assert from "node:assert/strict";
import { binaryVersion, replaceBinary } from "./replace.ts";

const enc = new TextEncoder();
const script = (v: string) => enc.encode(`#!/bin/sh\n[ "$1" = version ] && echo "termada ${v}"\n`);

async function withDir(f: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "termada-replace-" });
  try {
    await f(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("replaceBinary swaps the file in one rename, executable, through a symlink", async () => {
  await withDir(async (dir) => {
    await Deno.writeFile(`${dir}/termada`, script("1.0.0"), { mode: 0o700 });
    await Deno.symlink(`${dir}/termada`, `${dir}/link`);
    let checked = "";
    const replaced = await replaceBinary(`${dir}/link`, script("2.0.0"), {
      check: async (p) => void (checked = await binaryVersion(p)),
    });
    assert.equal(checked, "2.0.0");
    assert.equal(replaced, await Deno.realPath(`${dir}/termada`));
    assert.equal(await binaryVersion(`${dir}/link`), "2.0.0");
    assert.ok((await Deno.lstat(`${dir}/link`)).isSymlink);
    assert.equal((await Deno.stat(`${dir}/termada`)).mode! & 0o777, 0o755);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name).sort(), ["link", "termada"]);
  });
});

Deno.test("a failed check leaves the target byte-identical and no temp file", async () => {
  await withDir(async (dir) => {
    const old = script("1.0.0");
    await Deno.writeFile(`${dir}/termada`, old, { mode: 0o755 });
    await assert.rejects(
      replaceBinary(`${dir}/termada`, enc.encode("#!/bin/sh\nexit 3\n"), {
        check: async (p) => void await binaryVersion(p),
      }),
      /The new binary's "version" exited with 3/,
    );
    assert.deepEqual(await Deno.readFile(`${dir}/termada`), old);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["termada"]);
    await assert.rejects(replaceBinary(`${dir}/missing`, old), /Cannot replace ".*missing"/);
  });
});

Deno.test("binaryVersion wants `termada <version>` from a program that runs", async () => {
  await withDir(async (dir) => {
    await Deno.writeFile(`${dir}/t`, enc.encode("#!/bin/sh\necho hello\n"), { mode: 0o755 });
    await assert.rejects(binaryVersion(`${dir}/t`), /printed no version: "hello"/);
    await assert.rejects(binaryVersion(`${dir}/none`), /does not run/);
  });
});

import assert from "node:assert/strict";
import { createTar, extractMember, gunzip, gzip, type TarInput } from "./tar.ts";

const BIN = new TextEncoder().encode("#!/bin/sh\necho termada 1.0.0\n");

function tar(entries: TarInput[]): Uint8Array {
  return createTar(entries);
}

Deno.test("extractMember takes the one named file out of a ustar archive", async () => {
  const big = new Uint8Array(70_000).map((_, i) => i % 251);
  const archive = await gzip(tar([{ name: "LICENSE", data: BIN }, { name: "termada", data: big }]));
  const out = extractMember(await gunzip(archive, 1 << 20), "termada", 1 << 20);
  assert.deepEqual(out, big);
  assert.deepEqual(
    extractMember(tar([{ name: "termada.exe", data: BIN }]), "termada.exe", 100),
    BIN,
  );
});

Deno.test("the archive matches what GNU tar reads", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeFile(`${dir}/a.tar.gz`, await gzip(tar([{ name: "termada", data: BIN }])));
    const list = await new Deno.Command("tar", { args: ["-tvzf", `${dir}/a.tar.gz`] }).output();
    assert.ok(list.success, new TextDecoder().decode(list.stderr));
    assert.match(new TextDecoder().decode(list.stdout), /^-rwxr-xr-x .* termada\n$/);
    const made = await new Deno.Command("tar", {
      args: ["-czf", `${dir}/b.tar.gz`, "-C", dir, "a.tar.gz"],
    }).output();
    assert.ok(made.success);
    const back = extractMember(
      await gunzip(await Deno.readFile(`${dir}/b.tar.gz`), 1 << 20),
      "a.tar.gz",
      1 << 20,
    );
    assert.deepEqual(back, await Deno.readFile(`${dir}/a.tar.gz`));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("extractMember refuses hostile or unexpected archives", async (t) => {
  const cases: [string, TarInput[], RegExp][] = [
    ["a parent path", [{ name: "../termada", data: BIN }], /member with a path: "\.\.\/termada"/],
    ["a subdirectory", [{ name: "bin/termada", data: BIN }], /member with a path/],
    ["an absolute path", [{ name: "/termada", data: BIN }], /member with a path/],
    ["a dot-dot member", [{ name: "..", type: "dir" }], /member with a path/],
    [
      "a symlink",
      [{ name: "termada", type: "symlink", linkname: "/bin/sh" }],
      /"termada" is a symlink/,
    ],
    [
      "a hard link",
      [{ name: "termada", type: "hardlink", linkname: "/etc/passwd" }],
      /is a hard link/,
    ],
    ["a directory", [{ name: "termada", type: "dir" }], /of type "5"/],
    [
      "the name twice",
      [{ name: "termada", data: BIN }, { name: "termada", data: BIN }],
      /more than once/,
    ],
    ["no such member", [{ name: "other", data: BIN }], /holds no file "termada"/],
    ["an oversized member", [{ name: "termada", data: new Uint8Array(101) }], /over 100 bytes/],
  ];
  for (const [what, entries, error] of cases) {
    await t.step(
      what,
      () => assert.throws(() => extractMember(tar(entries), "termada", 100), error),
    );
  }
  await t.step("a pax header", () => {
    const a = tar([{ name: "PaxHeader", data: BIN }, { name: "termada", data: BIN }]);
    a[156] = "x".charCodeAt(0);
    fixChecksum(a, 0);
    assert.throws(() => extractMember(a, "termada", 100), /extended header \(type "x"\)/);
  });
  await t.step("a bad header checksum", () => {
    const a = tar([{ name: "termada", data: BIN }]);
    a[0] = "T".charCodeAt(0);
    assert.throws(() => extractMember(a, "termada", 100), /bad checksum/);
  });
  await t.step("a cut-off archive", () => {
    const a = tar([{ name: "termada", data: new Uint8Array(2000) }]);
    assert.throws(() => extractMember(a.subarray(0, 1024), "termada", 4000), /cut short/);
    assert.throws(() => extractMember(a.subarray(0, 512 * 5), "termada", 4000), /end-of-archive/);
  });
  await t.step("not gzip", async () => {
    await assert.rejects(gunzip(BIN, 1000), /not valid gzip/);
  });
  await t.step("a gzip bomb", async () => {
    const bomb = await gzip(new Uint8Array(1 << 20));
    await assert.rejects(gunzip(bomb, 1 << 16), /unpacks to more than 65536 bytes/);
  });
});

/** Recomputes the header checksum of the block at `off` after a test edited it. */
function fixChecksum(a: Uint8Array, off: number): void {
  let sum = 0;
  for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 0x20 : a[off + i]!;
  a.set(new TextEncoder().encode(sum.toString(8).padStart(6, "0") + "\0 "), off + 148);
}

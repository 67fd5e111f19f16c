import assert from "node:assert/strict";
import { fixture, parsed } from "./_testing.ts";

Deno.test("df -k (real) gives bytes from 1K blocks", () => {
  const { parsed: p, warnings } = parsed("filesystem_list", ["df -k"], fixture("df_k.txt"));
  assert.equal(warnings, undefined);
  assert.equal(p.block_size, 1024);
  assert.equal(p.approximate, false);
  const root = p.filesystems.find((f) => f.mounted_on === "/")!;
  assert.deepEqual([root.filesystem, root.size, root.use_percent], [
    "/dev/vda",
    264212084 * 1024,
    24,
  ]);
  assert.equal(parsed("filesystem_list", ["df"], fixture("df.txt")).parsed.filesystems.length, 5);
});

Deno.test("df -h (real) gives approximate bytes", () => {
  const { parsed: p } = parsed("filesystem_list", ["df -h"], fixture("df_h.txt"));
  assert.equal(p.approximate, true);
  const root = p.filesystems.find((f) => f.mounted_on === "/")!;
  assert.equal(root.size, 252 * 1024 ** 3);
  assert.equal(p.filesystems.find((f) => f.filesystem === "model_tools_unavailable")!.size, 4096);
});

Deno.test("df on macOS (hand-made): Gi units, inode columns, spaces in filesystem and mount point", () => {
  const { parsed: p, warnings } = parsed(
    "filesystem_list",
    ["df -h"],
    fixture("df_macos.handmade.txt"),
  );
  assert.equal(warnings, undefined);
  const home = p.filesystems.find((f) => f.filesystem === "map auto_home")!;
  assert.equal(home.mounted_on, "/System/Volumes/Data/home");
  const passport = p.filesystems.find((f) => f.mounted_on === "/Volumes/My Passport")!;
  assert.deepEqual([passport.use_percent, passport.inodes_used], [67, 123456]);
});

Deno.test("df -T and a wrapped filesystem name", () => {
  const out = "Filesystem     Type  1K-blocks  Used Available Use% Mounted on\n" +
    "/dev/mapper/very-long-volume-group-name\n" +
    "               ext4    1000   500       500  50% /mnt/my data\n";
  const { parsed: p } = parsed("filesystem_list", ["df -T"], out);
  assert.deepEqual(p.filesystems, [{
    filesystem: "/dev/mapper/very-long-volume-group-name",
    type: "ext4",
    size: 1024000,
    used: 512000,
    available: 512000,
    use_percent: 50,
    mounted_on: "/mnt/my data",
  }]);
});

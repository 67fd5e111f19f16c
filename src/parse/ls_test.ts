import assert from "node:assert/strict";
import { fixture, parsed } from "./_testing.ts";
import { parseMode } from "./ls.ts";

Deno.test("ls -la of /etc and /dev (real, LC_ALL=C) gives two sections with typed entries", () => {
  const { parsed: p, warnings } = parsed(
    "directory_listing",
    ["ls -la /etc /dev"],
    fixture("ls_la_etc_dev.txt"),
  );
  assert.equal(warnings, undefined);
  assert.deepEqual(p.sections.map((s) => s.path), ["/dev", "/etc"]);
  const dev = p.sections[0]!;
  assert.equal(dev.total, "4");
  assert.equal(dev.total_blocks, 4);
  const nul = dev.entries.find((e) => e.name === "null")!;
  assert.deepEqual([nul.type, nul.major, nul.minor, nul.size, nul.mode_octal], [
    "char",
    1,
    3,
    undefined,
    "0666",
  ]);
  const loop0 = dev.entries.find((e) => e.name === "loop0")!;
  assert.equal(loop0.type, "block");
  const fd = dev.entries.find((e) => e.name === "fd")!;
  assert.deepEqual([fd.type, fd.link_target], ["symlink", "/proc/self/fd"]);
  const shm = dev.entries.find((e) => e.name === "shm")!;
  assert.equal(shm.mode, "drwxrwxrwt");
  assert.equal(shm.mode_octal, "1777");
  const etc = p.sections[1]!;
  const osr = etc.entries.find((e) => e.name === "os-release")!;
  assert.deepEqual([osr.link_target, osr.mtime, osr.mtime_year_inferred], [
    "../usr/lib/os-release",
    "2025-05-09",
    undefined,
  ]);
});

Deno.test("ls -la resolves the year of recent dates against now and flags it", () => {
  const { parsed: p } = parsed(
    "directory_listing",
    ["ls", "-la", "d"],
    fixture("ls_la_special.txt"),
  );
  const byName = new Map(p.sections[0]!.entries.map((e) => [e.name, e]));
  assert.deepEqual([byName.get("plain")!.mtime, byName.get("plain")!.mtime_year_inferred], [
    "2026-11-30T12:34",
    true,
  ]);
  assert.equal(byName.get("plain")!.mtime_text, "Nov 30 12:34");
  assert.equal(byName.get("future")!.mtime, "2027-06-01");
  assert.equal(byName.get("old")!.mtime, "2019-03-04");
  // a date "ahead" of now belongs to last year
  const jan = parsed("directory_listing", ["ls -l"], "-rw-r--r-- 1 a b 0 Dec 30 10:00 x\n");
  assert.equal(jan.parsed.sections[0]!.entries[0]!.mtime, "2025-12-30T10:00");
});

Deno.test("ls -la keeps names with spaces, fifos, sockets, dangling symlinks", () => {
  const { parsed: p } = parsed("directory_listing", ["ls -la d"], fixture("ls_la_special.txt"));
  const byName = new Map(p.sections[0]!.entries.map((e) => [e.name, e]));
  assert.equal(byName.get("file with spaces.txt")!.type, "file");
  assert.equal(byName.get("link to spaces")!.link_target, "file with spaces.txt");
  assert.equal(byName.get("dangling")!.link_target, "/nonexistent");
  assert.equal(byName.get("pipe")!.type, "fifo");
  assert.equal(byName.get("sock")!.type, "socket");
  assert.equal(byName.get("sub dir")!.type, "dir");
});

Deno.test("ls on a terminal: colours removed, shell-escape quoting undone", () => {
  const { parsed: p, warnings } = parsed(
    "directory_listing",
    ["ls -la d"],
    fixture("ls_la_tty_color.txt"),
  );
  assert.deepEqual(warnings?.map((w) => w.message), [
    "ANSI escape sequences were removed before parsing",
  ]);
  const names = p.sections[0]!.entries.map((e) => e.name);
  assert.ok(names.includes("it's"));
  assert.ok(names.includes("new\nline"));
  assert.ok(names.includes("file with spaces.txt"));
  assert.ok(names.includes("future") && names.includes("."));
  const link = p.sections[0]!.entries.find((e) => e.name === "link to spaces")!;
  assert.equal(link.link_target, "file with spaces.txt");
});

Deno.test("ls -laR reads every directory section", () => {
  const { parsed: p } = parsed("directory_listing", ["ls -laR d"], fixture("ls_laR_special.txt"));
  assert.deepEqual(p.sections.map((s) => s.path), ["d", "d/sub dir"]);
  assert.equal(p.sections[1]!.entries.find((e) => e.name === "x")!.size, 3);
});

Deno.test("ls -ln gives numeric ids; ls -lai gives inodes; full-iso keeps seconds and offset", () => {
  const n = parsed("directory_listing", ["ls -ln d"], fixture("ls_ln_special.txt")).parsed;
  const e = n.sections[0]!.entries[0]!;
  assert.deepEqual([e.uid, e.gid, e.owner], [0, 0, "0"]);
  const i = parsed("directory_listing", ["ls -lai d"], fixture("ls_lai_special.txt")).parsed;
  assert.ok(i.sections[0]!.entries.every((x) => typeof x.inode === "number" && x.inode > 0));
  const iso = parsed(
    "directory_listing",
    ["ls -la --time-style=full-iso d"],
    fixture("ls_la_full_iso.txt"),
  );
  const old = iso.parsed.sections[0]!.entries.find((x) => x.name === "old")!;
  assert.equal(old.mtime, "2019-03-04T05:06:00.000000000+00:00");
  assert.equal(old.mtime_year_inferred, undefined);
});

Deno.test("ls: busybox and macOS formats (@, +, . after the mode)", () => {
  const bb = parsed("directory_listing", ["ls -l"], fixture("ls_l_busybox.handmade.txt")).parsed;
  const su = bb.sections[0]!.entries.find((e) => e.name === "su")!;
  assert.deepEqual([su.mode_octal, su.size], ["4755", 812344]);
  assert.equal(bb.sections[0]!.entries.find((e) => e.name === "null")!.minor, 3);
  const mac = parsed("directory_listing", ["ls -l"], fixture("ls_l_macos.handmade.txt")).parsed;
  const m = new Map(mac.sections[0]!.entries.map((e) => [e.name, e]));
  assert.equal(m.get(".DS_Store")!.xattr, true);
  assert.equal(m.get("Desktop")!.acl, true);
  assert.equal(m.get("selinux-style.txt")!.selinux, true);
  assert.equal(m.get("python3")!.link_target, "../Cellar/python@3.11/bin/python3");
});

Deno.test("ls -lh sizes become approximate bytes and keep their text", () => {
  const out =
    "total 8.0K\n-rw-r--r-- 1 root root 1.5K Dec  1 10:00 a b\n-rw-r--r-- 1 root root 12M Dec  1 10:00 c\n";
  const p = parsed("directory_listing", ["ls -lh"], out).parsed;
  const [a, c] = p.sections[0]!.entries;
  assert.deepEqual([a!.name, a!.size, a!.size_text], ["a b", 1536, "1.5K"]);
  assert.equal(c!.size, 12 * 1024 * 1024);
  assert.equal(p.sections[0]!.total_blocks, 8192);
});

Deno.test("ls: error lines are errors, unknown lines are counted, not dropped", () => {
  const out =
    "ls: cannot access 'nope': No such file or directory\n-rw-r--r-- 1 a b 1 Dec  1 10:00 x\nrandom junk\n";
  const r = parsed("directory_listing", ["ls -l nope x"], out);
  assert.deepEqual(r.parsed.errors, ["ls: cannot access 'nope': No such file or directory"]);
  assert.deepEqual(r.warnings?.[0], {
    message: "1 line could not be parsed",
    lines: [3],
    count: 1,
  });
});

Deno.test("parseMode reads setuid, setgid, sticky and their capital forms", () => {
  assert.equal(parseMode("-rwsr-sr-t")!.bits, 0o7755);
  assert.equal(parseMode("-rwSr-Sr-T")!.bits, 0o7644);
  assert.equal(parseMode("drwxr-xr-x+")!.marker, "+");
  assert.equal(parseMode("?rwxr-xr-x"), undefined);
  assert.equal(parseMode("-rwxr-xr-xZ"), undefined);
});

Deno.test("ls --time-style=iso and -g/-o (no owner or group columns)", () => {
  const iso = "-rw-r--r-- 1 a b 5 2019-03-04  old\n-rw-r--r-- 1 a b 5 11-30 12:34 new one\n";
  const [old, recent] =
    parsed("directory_listing", ["ls -l --time-style=iso"], iso).parsed.sections[0]!.entries;
  assert.deepEqual([old!.mtime, old!.name], ["2019-03-04", "old"]);
  assert.deepEqual([recent!.mtime, recent!.mtime_year_inferred, recent!.name], [
    "2026-11-30T12:34",
    true,
    "new one",
  ]);
  const g = parsed("directory_listing", ["ls -lg"], "-rw-r--r-- 1 staff 5 Dec  1 10:00 x\n").parsed;
  assert.deepEqual([g.sections[0]!.entries[0]!.owner, g.sections[0]!.entries[0]!.group], [
    undefined,
    "staff",
  ]);
  const o = parsed("directory_listing", ["ls -lo"], "-rw-r--r-- 1 alice 5 Dec  1 10:00 x\n").parsed;
  assert.deepEqual([o.sections[0]!.entries[0]!.owner, o.sections[0]!.entries[0]!.group], [
    "alice",
    undefined,
  ]);
});

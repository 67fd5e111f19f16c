import assert from "node:assert/strict";
import { fixture, parsed } from "./_testing.ts";

Deno.test("du (real) sizes are 1K blocks turned into bytes", () => {
  const { parsed: p } = parsed("disk_usage", ["du /etc/apt"], fixture("du_etc_apt.txt"));
  assert.equal(p.unit, 1024);
  const apt = p.entries.find((e) => e.path === "/etc/apt")!;
  assert.equal(apt.size, Number(apt.size_text) * 1024);
});

Deno.test("du -sh and du -h (real) give approximate bytes", () => {
  const { parsed: p } = parsed("disk_usage", ["du -sh /etc /usr/share/doc"], fixture("du_sh.txt"));
  assert.equal(p.approximate, true);
  assert.deepEqual(p.entries.map((e) => e.path), ["/etc", "/usr/share/doc"]);
  assert.equal(p.entries[1]!.size, 128 * 1024 * 1024);
  assert.equal(
    parsed("disk_usage", ["du -h /etc/apt"], fixture("du_h_etc_apt.txt")).parsed.entries.length,
    7,
  );
});

Deno.test("du -cb: bytes, the total line, paths with spaces", () => {
  const { parsed: p } = parsed(
    "disk_usage",
    ["du", "-cb", "a b", "c"],
    "12\ta b\n30\tc\n42\ttotal\n",
  );
  assert.deepEqual(p.entries.map((e) => [e.size, e.path, e.total]), [[12, "a b", undefined], [
    30,
    "c",
    undefined,
  ], [42, "total", true]]);
  assert.equal(p.unit, 1);
});

Deno.test("du: permission errors are flagged lines", () => {
  const r = parsed(
    "disk_usage",
    ["du -s /root"],
    "du: cannot read directory '/root/x': Permission denied\n4\t/root\n",
  );
  assert.equal(r.warnings?.[0]?.count, 1);
});

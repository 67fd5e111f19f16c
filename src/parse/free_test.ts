import assert from "node:assert/strict";
import { fixture, parsed } from "./_testing.ts";

Deno.test("free (real) gives Mem and Swap in bytes (KiB × 1024)", () => {
  const { parsed: p } = parsed("memory_usage", ["free"], fixture("free.txt"));
  assert.equal(p.unit, 1024);
  assert.equal(p.mem!.total, 24683584 * 1024);
  assert.equal(p.mem!.buff_cache, 1463504 * 1024);
  assert.deepEqual(p.swap, { total: 0, used: 0, free: 0 });
});

Deno.test("free -h and free -m (real) convert their units", () => {
  const h = parsed("memory_usage", ["free -h"], fixture("free_h.txt")).parsed;
  assert.equal(h.approximate, true);
  assert.equal(h.unit, undefined);
  assert.equal(h.mem!.total, 23 * 1024 ** 3);
  const m = parsed("memory_usage", ["free -m"], fixture("free_m.txt")).parsed;
  assert.equal(m.mem!.total, 24105 * 1024 * 1024);
});

Deno.test("free from procps 3.3 (hand-made): buffers, cached and the -/+ line", () => {
  const { parsed: p } = parsed("memory_usage", ["free"], fixture("free_procps33_old.handmade.txt"));
  assert.equal(p.mem!.buffers, 313548 * 1024);
  assert.equal(p.mem!.cache, 5174604 * 1024);
  assert.deepEqual(p.buffers_cache, { used: 2267616 * 1024, free: 5900232 * 1024 });
});

Deno.test("free -b -t: bytes and the Total row", () => {
  const out = "               total        used        free      shared  buff/cache   available\n" +
    "Mem:            100          50          50           0           0          50\n" +
    "Swap:            10           0          10\nTotal:          110          50          60\n";
  const { parsed: p } = parsed("memory_usage", ["free -b -t"], out);
  assert.deepEqual([p.unit, p.approximate, p.total?.total], [1, false, 110]);
});

import assert from "node:assert/strict";
import { preloadNative } from "../pty/mod.ts";
import { inTarget, readExecArgs } from "./gate.ts";

preloadNative();

Deno.test("inTarget binds the names that mean 'myself' to the target, not the daemon", () => {
  assert.equal(inTarget(42, "/proc/self/fd/3"), "/proc/42/fd/3");
  assert.equal(inTarget(42, "/proc/thread-self/exe"), "/proc/42/exe");
  assert.equal(inTarget(42, "/dev/fd/4"), "/proc/42/fd/4");
  assert.equal(inTarget(42, "/dev/stdin"), "/proc/42/fd/0");
  assert.equal(inTarget(42, "/usr/bin/true"), "/proc/42/root/usr/bin/true");
  assert.equal(inTarget(42, "./x"), "/proc/42/cwd/./x");
});

/** Strings laid out in our own memory where the test says, and an argv array pointing at them. */
function layout(strings: { text: string; at?: number }[], arena: Uint8Array<ArrayBuffer>) {
  const base = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(arena)));
  const ptrs = new BigUint64Array(strings.length + 1);
  let next = 0;
  const enc = new TextEncoder();
  strings.forEach(({ text, at }, i) => {
    const off = at ?? next;
    const bytes = enc.encode(text);
    arena.set(bytes, off);
    arena[off + bytes.length] = 0;
    ptrs[i] = base + BigInt(off);
    next = off + bytes.length + 1;
  });
  return { ptrs, addr: BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(ptrs))), base };
}

Deno.test("the gate reads path and argv the same through process_vm_readv and /proc/<pid>/mem", async (t) => {
  const cases: [string, { text: string; at?: number }[]][] = [
    ["a short argv", [{ text: "/bin/echo" }, { text: "hello" }, { text: "" }, { text: "wörld" }]],
    [
      "more strings than one batch, some longer than a slot",
      Array.from(
        { length: 150 },
        (_, i) => ({ text: `arg${i}-` + "x".repeat(i % 7 === 0 ? 300 : i) }),
      ),
    ],
    ["a string longer than a page", [{ text: "prog" }, { text: "y".repeat(9000) }]],
    [
      "strings that cross a page boundary",
      [{ text: "prog" }, { text: "crossing-the-boundary", at: 0 }, {
        text: "z".repeat(600),
        at: 0,
      }],
    ],
    [
      "more pointers than one read of the array",
      Array.from({ length: 700 }, (_, i) => ({ text: `${i}` })),
    ],
    ["more strings than the gate reads", Array.from({ length: 4200 }, () => ({ text: "a" }))],
  ];
  for (const [name, strings] of cases) {
    await t.step(name, () => {
      const arena = new Uint8Array(4 * 65536);
      const base = Number(BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(arena))) & 4095n);
      // Place the `at: 0` strings so that they start 7 bytes before a page ends.
      let page = 8192;
      const placed = strings.map((s) => {
        if (s.at !== 0) return s;
        page += 8192;
        return { ...s, at: page - base - 7 };
      });
      // The others go after everything placed.
      let next = page + 8192;
      const all = placed.map((s) => {
        if (s.at !== undefined) return s;
        const at = next;
        next += new TextEncoder().encode(s.text).length + 1;
        return { ...s, at };
      });
      const { addr, ptrs } = layout(all, arena);
      const path = ptrs[0]!;
      const viaVm = readExecArgs(Deno.pid, path, addr);
      const viaMem = readExecArgs(Deno.pid, path, addr, { via: "proc-mem" });
      assert.deepEqual(viaVm, viaMem);
      const texts = strings.map((s) => s.text);
      assert.equal(viaVm.path, texts[0]);
      if (texts.length > 4096) {
        assert.equal(viaVm.truncated, true);
        assert.deepEqual(viaVm.argv, texts.slice(0, 4096));
      } else {
        assert.equal(viaVm.truncated, false);
        assert.deepEqual(viaVm.argv, texts);
      }
      void ptrs;
    });
  }
});

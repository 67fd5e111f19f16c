import assert from "node:assert/strict";
import { EventBus } from "../shared/mod.ts";
import { preloadNative } from "../pty/mod.ts";
import { startReclaimer } from "./reclaim.ts";

preloadNative(); // libc stays loaded for the process, not for one test

Deno.test("an idle reclaim gives a dead heap back to the system", async () => {
  const reclaimer = startReclaimer(new EventBus());
  try {
    let junk: { a: number; b: string }[] = [];
    for (let i = 0; i < 1_500_000; i++) junk.push({ a: i, b: `item ${i}` });
    assert.equal(junk.length, 1_500_000);
    junk = [];
    const { before, after } = await reclaimer.reclaim();
    // ~150 MB of objects died: one full GC and malloc_trim hand most of it back.
    assert.ok(
      before - after > 50 * 1024 * 1024,
      `RSS ${Math.round(before / 1048576)} → ${Math.round(after / 1048576)} MiB`,
    );
  } finally {
    reclaimer.stop();
  }
});

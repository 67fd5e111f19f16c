/** For memory tests: a full GC, and how many of some weakly held objects it leaves alive. */
import { runtimeGc } from "./gc.ts";

/** Runs a full GC after the current task (a WeakRef's target is kept until its task ends). */
export async function fullGc(): Promise<void> {
  const gc = await runtimeGc();
  if (!gc) throw new Error("this runtime does not hand out its GC: a memory test cannot run");
  await new Promise((r) => setTimeout(r, 0));
  gc();
}

/** How many of `refs` are still reachable after a full GC. */
export async function aliveAfterGc(refs: WeakRef<object>[]): Promise<number> {
  await fullGc();
  return refs.filter((w) => w.deref() !== undefined).length;
}

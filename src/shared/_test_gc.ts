/**
 * For memory tests: V8's full GC at run time (no command-line flag: `node:v8` exposes it, then
 * `node:vm` hands it over), and how many of some weakly held objects a collection leaves alive.
 */

/** Runs a full GC after the current task (a WeakRef's target is kept until its task ends). */
export async function fullGc(): Promise<void> {
  const [{ default: v8 }, { default: vm }] = await Promise.all([
    import("node:v8"),
    import("node:vm"),
  ]);
  v8.setFlagsFromString("--expose-gc");
  const gc = vm.runInNewContext("gc") as () => void;
  await new Promise((r) => setTimeout(r, 0));
  gc();
}

/** How many of `refs` are still reachable after a full GC. */
export async function aliveAfterGc(refs: WeakRef<object>[]): Promise<number> {
  await fullGc();
  return refs.filter((w) => w.deref() !== undefined).length;
}

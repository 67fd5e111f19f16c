/**
 * V8's full GC at run time, with no command-line flag: `node:v8` turns `--expose-gc` on, then
 * `node:vm` hands the function over. Both modules are loaded on the first call only, so they stay
 * off a process's start. Null where the runtime refuses.
 */
let gc: (() => void) | null | undefined;

export async function runtimeGc(): Promise<(() => void) | null> {
  if (gc !== undefined) return gc;
  try {
    const [{ default: v8 }, { default: vm }] = await Promise.all([
      import("node:v8"),
      import("node:vm"),
    ]);
    v8.setFlagsFromString("--expose-gc");
    const fn = vm.runInNewContext("gc") as unknown;
    gc = typeof fn === "function" ? fn as () => void : null;
  } catch {
    gc = null;
  }
  return gc;
}

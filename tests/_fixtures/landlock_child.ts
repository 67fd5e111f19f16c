/**
 * Child process for src/sandbox/landlock_test.ts: applies Landlock to itself (it cannot be
 * undone, so never in the test process), then tries each operation of the spec given as argv[0]
 * and prints one JSON line `{ result, error, ops }` (`error` when applyLandlock threw).
 *
 * Only synchronous APIs run after the restriction: they execute on the main thread, the one
 * Landlock restricted (Deno's async file ops run on other threads, which are not).
 */
import { applyLandlock, LandlockError } from "../../src/sandbox/landlock.ts";
import { openLibc } from "../../ffi/mod.ts";

export type Op =
  | { op: "read"; path: string }
  | { op: "write"; path: string; data: string }
  | { op: "create"; path: string }
  | { op: "mkdir"; path: string }
  | { op: "list"; path: string }
  | { op: "rename"; from: string; to: string }
  | { op: "link"; from: string; to: string }
  | { op: "symlink"; target: string; path: string }
  | { op: "run"; argv: string[] }
  | { op: "killParent" }
  | { op: "killChild" };

export interface Spec {
  hide: string[];
  abi?: number;
  listAncestors?: boolean;
  ops: Op[];
}

/** `value`: file content, sorted names, or "exit <code>: <stderr>" for a command. */
export type Outcome = { ok: true; value?: string } | { ok: false; code: string };

const libc = openLibc();

/** kill(2) through libc: signal 0 only checks permission; returns the errno name or "". */
function kill(pid: number, sig: number): string {
  if (libc.kill(pid, sig) === 0) return "";
  const p = libc.__errno_location();
  const errno = p === null ? -1 : new Deno.UnsafePointerView(p).getInt32();
  return errno === 1 ? "EPERM" : errno === 3 ? "ESRCH" : `errno ${errno}`;
}

async function perform(op: Op): Promise<string | undefined> {
  switch (op.op) {
    case "read":
      return Deno.readTextFileSync(op.path);
    case "write":
      Deno.writeTextFileSync(op.path, op.data);
      return;
    case "create":
      Deno.writeTextFileSync(op.path, "new", { createNew: true });
      return;
    case "mkdir":
      Deno.mkdirSync(op.path);
      return;
    case "list":
      return [...Deno.readDirSync(op.path)].map((e) => e.name).sort().join(",");
    case "rename":
      Deno.renameSync(op.from, op.to);
      return;
    case "link":
      Deno.linkSync(op.from, op.to);
      return;
    case "symlink":
      Deno.symlinkSync(op.target, op.path);
      return;
    case "run": {
      const [cmd, ...args] = op.argv;
      const out = new Deno.Command(cmd!, { args, stdout: "null", stderr: "piped" }).outputSync();
      return `exit ${out.code}: ${new TextDecoder().decode(out.stderr).trim()}`;
    }
    case "killParent": {
      const err = kill(Deno.ppid, 0);
      if (err !== "") throw Object.assign(new Error(err), { code: err });
      return;
    }
    case "killChild": {
      const child = new Deno.Command("/usr/bin/sleep", { args: ["30"] }).spawn();
      const err = kill(child.pid, 15);
      if (err !== "") child.kill("SIGKILL");
      await child.status;
      if (err !== "") throw Object.assign(new Error(err), { code: err });
      return;
    }
  }
}

function print(value: unknown): void {
  const bytes = new TextEncoder().encode(JSON.stringify(value) + "\n");
  for (let done = 0; done < bytes.length;) done += Deno.stdout.writeSync(bytes.subarray(done));
}

const spec: Spec = JSON.parse(Deno.args[0]!);
let result;
let error;
try {
  result = applyLandlock(spec);
} catch (err) {
  // The ops still run: they show whether a failed call restricted anything.
  const e = err as Error;
  const extra = err instanceof LandlockError ? { step: err.step, errno: err.errno } : {};
  error = { name: e.name, message: e.message, ...extra };
}
const ops: Outcome[] = [];
for (const op of spec.ops) {
  try {
    const value = await perform(op);
    ops.push(value === undefined ? { ok: true } : { ok: true, value });
  } catch (err) {
    const e = err as Error & { code?: string };
    ops.push({ ok: false, code: e.code ?? e.name });
  }
}
print({ result, error, ops });

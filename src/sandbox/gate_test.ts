import assert from "node:assert/strict";
import { preloadNative, readProcFile } from "../pty/mod.ts";
import {
  type ExecEvent,
  inTarget,
  mayRace,
  readExecArgs,
  WALK_CACHE_ENTRIES,
  WalkCache,
} from "./gate.ts";

preloadNative();

function event(pid: number, path: string): ExecEvent {
  return {
    pid,
    path,
    resolved: inTarget(pid, path),
    argv: [path],
    truncated: false,
    identity: undefined,
    first: false,
  };
}

async function withProcess(
  args: string[],
  fn: (pid: number) => void | Promise<void>,
): Promise<void> {
  const child = new Deno.Command(args[0]!, { args: args.slice(1), stdout: "null", stderr: "null" })
    .spawn();
  try {
    // The child must have exec'd its final program before it is looked at.
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline) {
      const st = readProcFile(`/proc/${child.pid}/status`) ?? "";
      if (/Name:\s*sleep/.test(st)) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    await fn(child.pid);
  } finally {
    child.kill("SIGKILL");
    await child.status;
  }
}

Deno.test("inTarget binds the names that mean 'myself' to the target, not the daemon", () => {
  assert.equal(inTarget(42, "/proc/self/fd/3"), "/proc/42/fd/3");
  assert.equal(inTarget(42, "/proc/thread-self/exe"), "/proc/42/exe");
  assert.equal(inTarget(42, "/dev/fd/4"), "/proc/42/fd/4");
  assert.equal(inTarget(42, "/dev/stdin"), "/proc/42/fd/0");
  assert.equal(inTarget(42, "/usr/bin/true"), "/proc/42/root/usr/bin/true");
  assert.equal(inTarget(42, "./x"), "/proc/42/cwd/./x");
});

Deno.test("mayRace: root can swap anything; an ordinary user only what it can write", async () => {
  // This process's own uid (root in CI): every exec may race.
  await withProcess(["sleep", "30"], (pid) => {
    if (Deno.uid() === 0) assert.equal(mayRace(pid, event(pid, "/usr/bin/true")), true);
  });
  if (Deno.uid() !== 0) return;
  // As nobody: the system's binaries cannot be swapped, a world-writable directory can.
  await withProcess(
    ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "30"],
    (pid) => {
      assert.equal(mayRace(pid, event(pid, "/usr/bin/true")), false);
      assert.equal(mayRace(pid, event(pid, "/tmp/anything")), true, "/tmp is writable by all");
    },
  );
});

Deno.test("a session's walk cache keeps only walks that found no race, per mount namespace and user", async () => {
  if (Deno.uid() !== 0) return; // needs another user to run the target as
  const nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "30"];
  const walks = new WalkCache();
  let first = "";
  await withProcess(nobody, (pid) => {
    assert.equal(mayRace(pid, event(pid, "/usr/bin/true"), walks), false);
    assert.equal(walks.size, 1, "a walk that found nothing to change is kept");
    assert.equal(mayRace(pid, event(pid, "/usr/bin/true"), walks), false, "and answers again");
    assert.equal(mayRace(pid, event(pid, "/tmp/anything"), walks), true);
    assert.equal(walks.size, 1, "a race is not kept: it is verified anyway");
    first = walks.key(pid, 65534, 65534, "/usr/bin/true")!;
    assert.ok(walks.fixed(first));
  });
  // Another mount namespace (where /usr/bin could be another mount) has another key.
  await withProcess(["unshare", "-m", ...nobody], (pid) => {
    const key = walks.key(pid, 65534, 65534, "/usr/bin/true")!;
    assert.notEqual(key, first);
    assert.equal(walks.fixed(key), false);
  });
  // Another user has another key: what one may not write, another may.
  await withProcess(nobody, (pid) => {
    assert.notEqual(walks.key(pid, 1000, 1000, "/usr/bin/true"), first);
  });
  // Bounded: a full cache starts over.
  for (let i = 0; i < WALK_CACHE_ENTRIES + 5; i++) walks.remember(`k${i}`);
  assert.ok(walks.size <= WALK_CACHE_ENTRIES);
});

Deno.test("mayRace follows the path as the kernel walks it: a link the user can swap is a race", async () => {
  if (Deno.uid() !== 0) return; // needs another user to run the target as
  const dir = await Deno.makeTempDir({ prefix: "termada-walk-" });
  Deno.chmodSync(dir, 0o755); // root's, not writable by nobody: only /tmp above it is
  Deno.symlinkSync("/usr/bin/true", `${dir}/link`);
  Deno.symlinkSync("/usr/bin", `${dir}/bin`);
  Deno.symlinkSync("../../usr/bin/true", `${dir}/rel`);
  const child = new Deno.Command("setpriv", {
    args: ["--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "30"],
    cwd: dir,
    stdout: "null",
    stderr: "null",
  }).spawn();
  try {
    const deadline = Date.now() + 5000;
    while (
      Date.now() < deadline &&
      !/Name:\s*sleep/.test(readProcFile(`/proc/${child.pid}/status`) ?? "")
    ) {
      await new Promise((r) => setTimeout(r, 10));
    }
    const race = (path: string) => mayRace(child.pid, event(child.pid, path));
    // The files behind are the system's, but every link lives below /tmp, which nobody may write.
    assert.equal(race(`${dir}/link`), true, "a link to /usr/bin/true in a writable tree");
    assert.equal(race(`${dir}/bin/true`), true, "a directory link in a writable tree");
    // Relative, the walk starts at the cwd itself (root's): renaming what is above it changes
    // nothing, so root's link there is as fixed as the cwd.
    assert.equal(race("link"), false, "relative, from a cwd the user cannot write");
    assert.equal(race(`${dir}/rel`), true, "a relative link");
    // Links the user cannot change: /bin is root's link to usr/bin on merged-/usr systems.
    assert.equal(race("/bin/true"), false);
    assert.equal(race("/usr/bin/../bin/true"), false, ".. walks back into root's directories");
    // What cannot be followed is a race: a missing file, a link loop.
    assert.equal(race("/usr/bin/termada-no-such-program"), true);
    Deno.symlinkSync(`${dir}/loop`, `${dir}/loop`);
    assert.equal(race(`${dir}/loop`), true);
  } finally {
    child.kill("SIGKILL");
    await child.status;
    await Deno.remove(dir, { recursive: true });
  }
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

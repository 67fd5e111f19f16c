import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { dirname, join } from "node:path";
import { TermadaError } from "../shared/errors.ts";
import { type ErrorCode } from "../shared/errors.ts";
import { FILE_LIMITS, type FileBackend, localFiles, sftpFiles, sftpHome } from "./files.ts";
import { loadSsh2, type SFTPWrapper, type SshClient } from "./ssh2.ts";
import { sshdAvailable, TestSshd } from "./_test_sshd.ts";

const { Client } = await loadSsh2();

const enc = new TextEncoder();
const dec = new TextDecoder();
const IS_ROOT = Deno.uid() === 0;

/** What the contract needs beyond the backend: a way to make its final rename fail. */
interface Fixture {
  files: FileBackend;
  /** Writes with the backend, its rename forced to fail; resolves to what it threw. */
  writeWithFailingRename(path: string, data: Uint8Array): Promise<unknown>;
}

function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

function randomBytes(n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(b.subarray(i, i + 65536));
  return b;
}

function isCode(code: ErrorCode, re?: RegExp): (e: unknown) => boolean {
  return (e) => {
    assert.ok(e instanceof TermadaError, `not a TermadaError: ${e}`);
    assert.equal(e.code, code, e.message);
    if (re) assert.match(e.message, re);
    return true;
  };
}

/** `p`, or a failure after `ms` (so a blocking open shows as a failed test, not a hung run). */
async function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function modeOf(path: string): number {
  return Deno.statSync(path).mode! & 0o7777;
}

function entries(dir: string): string[] {
  return Array.from(Deno.readDirSync(dir), (e) => e.name).sort();
}

async function mkfifo(path: string): Promise<void> {
  const out = await new Deno.Command("mkfifo", { args: [path] }).output();
  assert.equal(out.code, 0, "mkfifo failed");
}

/** The same behaviour list for every backend; each step works in its own fresh directory. */
async function fileContract(t: Deno.TestContext, fx: Fixture): Promise<void> {
  const { files } = fx;
  const root = await Deno.makeTempDir({ prefix: `termada-files-${files.kind}-` });
  let n = 0;
  const fresh = () => {
    const d = join(root, String(n++));
    Deno.mkdirSync(d);
    return d;
  };
  try {
    await t.step("resolves relative paths against cwd and normalises them lexically", async () => {
      assert.equal(files.resolve("/srv/app", "src/../lib/x.ts"), "/srv/app/lib/x.ts");
      assert.equal(files.resolve("/srv/app", "/etc/./../etc/hosts"), "/etc/hosts");
      assert.equal(files.resolve("/srv/app", "../../../../x"), "/x");
      assert.equal(files.resolve("/srv/app/", "./a/"), "/srv/app/a");
      assert.equal(files.resolve("/srv", "."), "/srv");
      const dir = fresh();
      Deno.writeTextFileSync(join(dir, "f.txt"), "hello");
      const path = files.resolve(join(dir, "sub"), "../f.txt");
      assert.equal(path, join(dir, "f.txt"));
      const r = await files.read(path, { offset: 0, maxBytes: 10 });
      assert.equal(dec.decode(r.bytes), "hello");
      assert.equal(r.path, path);
    });

    await t.step("refuses empty paths, NUL bytes and paths over 4096 characters", async () => {
      const dir = fresh();
      assert.throws(() => files.resolve(dir, ""), isCode("INVALID_ARGUMENT", /empty/));
      assert.throws(() => files.resolve(dir, "a\0b"), isCode("INVALID_ARGUMENT", /NUL/));
      assert.throws(
        () => files.resolve("/", "a".repeat(FILE_LIMITS.pathChars + 1)),
        isCode("INVALID_ARGUMENT", /4096/),
      );
      assert.equal(files.resolve("/", "a".repeat(4095)).length, 4096);
      await assert.rejects(
        files.read(`${dir}/a\0b`, { offset: 0, maxBytes: 1 }),
        isCode("INVALID_ARGUMENT", /NUL/),
      );
      await assert.rejects(
        files.write(`${dir}/a\0b`, enc.encode("x"), {}),
        isCode("INVALID_ARGUMENT", /NUL/),
      );
      assert.deepEqual(entries(dir), []);
    });

    await t.step("reads a whole file with the SHA-256 of its content", async () => {
      const dir = fresh();
      const data = randomBytes(700 * 1024 + 3);
      Deno.writeFileSync(join(dir, "blob"), data);
      const r = await files.read(join(dir, "blob"), {
        offset: 0,
        maxBytes: FILE_LIMITS.readPageBytes,
      });
      assert.equal(r.size, data.length);
      assert.equal(r.eof, true);
      assert.deepEqual(r.bytes, data);
      assert.equal(r.sha256, sha256(data));
      assert.ok(r.mtime && !Number.isNaN(Date.parse(r.mtime)));
      Deno.writeFileSync(join(dir, "empty"), new Uint8Array(0));
      const e = await files.read(join(dir, "empty"), { offset: 0, maxBytes: 1 });
      assert.deepEqual(
        { size: e.size, eof: e.eof, n: e.bytes.length, sha: e.sha256 },
        { size: 0, eof: true, n: 0, sha: sha256(new Uint8Array(0)) },
      );
    });

    await t.step("pages through a file by offset, also past its end", async () => {
      const dir = fresh();
      const p = join(dir, "digits");
      Deno.writeTextFileSync(p, "0123456789");
      const page = async (offset: number, maxBytes: number) => {
        const r = await files.read(p, { offset, maxBytes });
        return { text: dec.decode(r.bytes), eof: r.eof, size: r.size, sha: r.sha256 !== undefined };
      };
      assert.deepEqual(await page(0, 4), { text: "0123", eof: false, size: 10, sha: false });
      assert.deepEqual(await page(4, 4), { text: "4567", eof: false, size: 10, sha: false });
      assert.deepEqual(await page(8, 4), { text: "89", eof: true, size: 10, sha: false });
      assert.deepEqual(await page(6, 4), { text: "6789", eof: true, size: 10, sha: false });
      assert.deepEqual(await page(10, 4), { text: "", eof: true, size: 10, sha: false });
      assert.deepEqual(await page(1000, 4), { text: "", eof: true, size: 10, sha: false });
      assert.deepEqual(await page(0, 10), { text: "0123456789", eof: true, size: 10, sha: true });
    });

    await t.step("returns at most maxBytes and refuses bounds outside 1..1 MiB", async () => {
      const dir = fresh();
      const p = join(dir, "big");
      const data = randomBytes(3 * FILE_LIMITS.readPageBytes + 5);
      Deno.writeFileSync(p, data);
      const max = FILE_LIMITS.readPageBytes;
      const r = await files.read(p, { offset: 2 * max, maxBytes: max });
      assert.equal(r.bytes.length, max);
      assert.deepEqual(r.bytes, data.subarray(2 * max, 3 * max));
      assert.equal(r.eof, false);
      const last = await files.read(p, { offset: 3 * max, maxBytes: max });
      assert.deepEqual([last.bytes.length, last.eof], [5, true]);
      for (const o of [{ offset: 0, maxBytes: 0 }, { offset: 0, maxBytes: max + 1 }]) {
        await assert.rejects(files.read(p, o), isCode("INVALID_ARGUMENT", /max_bytes/));
      }
      for (const o of [{ offset: -1, maxBytes: 1 }, { offset: 1.5, maxBytes: 1 }]) {
        await assert.rejects(files.read(p, o), isCode("INVALID_ARGUMENT", /offset/));
      }
    });

    await t.step("writes a new file with mode 0644 and reports its SHA-256", async () => {
      const dir = fresh();
      const p = join(dir, "new.txt");
      const data = enc.encode("new content\n");
      const w = await files.write(p, data, {});
      assert.deepEqual(
        { path: w.path, size: w.size, sha256: w.sha256, created: w.created, mode: w.mode },
        { path: p, size: data.length, sha256: sha256(data), created: true, mode: 0o644 },
      );
      assert.equal(w.synced, true);
      assert.deepEqual(Deno.readFileSync(p), data);
      assert.equal(modeOf(p), 0o644);
      assert.deepEqual(entries(dir), ["new.txt"]);
      const empty = await files.write(join(dir, "empty"), new Uint8Array(0), {});
      assert.deepEqual([empty.size, empty.sha256], [0, sha256(new Uint8Array(0))]);
    });

    await t.step("overwriting keeps the existing mode", async () => {
      const dir = fresh();
      const p = join(dir, "secret");
      Deno.writeTextFileSync(p, "old");
      Deno.chmodSync(p, 0o600);
      const w = await files.write(p, enc.encode("newer"), {});
      assert.deepEqual([w.created, w.mode], [false, 0o600]);
      assert.equal(modeOf(p), 0o600);
      assert.equal(Deno.readTextFileSync(p), "newer");
    });

    await t.step("an explicit mode wins, and modes outside 0..0o7777 are refused", async () => {
      const dir = fresh();
      const p = join(dir, "run.sh");
      assert.equal((await files.write(p, enc.encode("#!/bin/sh\n"), { mode: 0o755 })).mode, 0o755);
      assert.equal(modeOf(p), 0o755);
      assert.equal((await files.write(p, enc.encode("#!/bin/sh\n"), { mode: 0o640 })).mode, 0o640);
      assert.equal(modeOf(p), 0o640);
      for (const mode of [0o10000, -1, 1.5]) {
        await assert.rejects(files.write(p, enc.encode("x"), { mode }), isCode("INVALID_ARGUMENT"));
      }
      assert.equal(Deno.readTextFileSync(p), "#!/bin/sh\n");
    });

    await t.step("writes exactly 16 MiB and refuses one byte more", async () => {
      const dir = fresh();
      const p = join(dir, "max");
      const data = randomBytes(FILE_LIMITS.writeBytes);
      const w = await files.write(p, data, {});
      assert.equal(w.sha256, sha256(data));
      assert.deepEqual(Deno.readFileSync(p), data);
      await assert.rejects(
        files.write(join(dir, "over"), new Uint8Array(FILE_LIMITS.writeBytes + 1), {}),
        isCode("INVALID_ARGUMENT", /16777217 bytes exceed/),
      );
      assert.deepEqual(entries(dir), ["max"]);
    });

    await t.step("a concurrent reader sees the old or the new content, never a part", async () => {
      const dir = fresh();
      const p = join(dir, "swap");
      const size = 8 << 20;
      const old = new Uint8Array(size).fill(0x61);
      Deno.writeFileSync(p, old);
      let stop = false;
      const seen: number[] = [];
      const reader = (async () => {
        while (!stop) {
          const b = await Deno.readFile(p);
          assert.equal(b.length, size, "a partial file was visible");
          const v = b[0]!;
          assert.ok(v === 0x61 || v === 0x62);
          assert.equal(b.indexOf(v === 0x61 ? 0x62 : 0x61), -1, "mixed content was visible");
          assert.equal(b.indexOf(0), -1, "zero bytes were visible");
          seen.push(v);
        }
      })();
      try {
        await files.write(p, new Uint8Array(size).fill(0x62), {});
        await files.write(p, old, {});
        await files.write(p, new Uint8Array(size).fill(0x62), {});
      } finally {
        stop = true;
        await reader;
      }
      assert.ok(seen.length > 0);
      assert.equal(Deno.readFileSync(p)[size - 1], 0x62);
    });

    await t.step("a failed rename leaves the target untouched and no temp file", async () => {
      const dir = fresh();
      const p = join(dir, "keep.txt");
      Deno.writeTextFileSync(p, "original");
      Deno.chmodSync(p, 0o640);
      const err = await fx.writeWithFailingRename(p, enc.encode("replacement"));
      // Both injected failures are unexpected I/O errors: INTERNAL, with the path named.
      assert.equal((err as { code?: string }).code, "INTERNAL", String(err));
      assert.match((err as { message: string }).message, /^Cannot write ".*keep\.txt"/);
      assert.equal(Deno.readTextFileSync(p), "original");
      assert.equal(modeOf(p), 0o640);
      assert.deepEqual(entries(dir), ["keep.txt"]);
    });

    await t.step("a missing file or parent directory is NOT_FOUND", async () => {
      const dir = fresh();
      await assert.rejects(
        files.read(join(dir, "nope"), { offset: 0, maxBytes: 1 }),
        isCode("NOT_FOUND", /no such file/),
      );
      await assert.rejects(
        files.read(join(dir, "nope/x"), { offset: 0, maxBytes: 1 }),
        isCode("NOT_FOUND"),
      );
      await assert.rejects(
        files.write(join(dir, "nope/deeper/x"), enc.encode("x"), {}),
        isCode("NOT_FOUND", new RegExp(`directory "${join(dir, "nope/deeper")}" does not exist`)),
      );
      Deno.writeTextFileSync(join(dir, "file"), "");
      await assert.rejects(
        files.write(join(dir, "file/x"), enc.encode("x"), {}),
        isCode("INVALID_ARGUMENT", /not a directory/),
      );
      assert.deepEqual(entries(dir), ["file"]);
    });

    await t.step("directories are neither read nor replaced", async () => {
      const dir = fresh();
      Deno.mkdirSync(join(dir, "sub"));
      Deno.writeTextFileSync(join(dir, "sub", "inner"), "kept");
      await assert.rejects(
        files.read(join(dir, "sub"), { offset: 0, maxBytes: 1 }),
        isCode("INVALID_ARGUMENT", /not a regular file \(a directory\)/),
      );
      await assert.rejects(
        files.write(files.resolve(dir, "sub/"), enc.encode("x"), {}),
        isCode("INVALID_ARGUMENT", /a directory/),
      );
      await assert.rejects(files.write("/", enc.encode("x"), {}), isCode("INVALID_ARGUMENT"));
      assert.deepEqual(entries(join(dir, "sub")), ["inner"]);
    });

    await t.step("FIFOs are refused without blocking, for read and write", async () => {
      const dir = fresh();
      const p = join(dir, "pipe");
      await mkfifo(p);
      await within(
        5_000,
        assert.rejects(
          files.read(p, { offset: 0, maxBytes: 10 }),
          isCode("INVALID_ARGUMENT", /not a regular file \(a FIFO\)/),
        ),
      );
      await within(
        5_000,
        assert.rejects(files.write(p, enc.encode("x"), {}), isCode("INVALID_ARGUMENT", /FIFO/)),
      );
      assert.equal(Deno.lstatSync(p).isFifo, true);
      assert.deepEqual(entries(dir), ["pipe"]);
    });

    await t.step("devices are refused", async () => {
      await assert.rejects(
        files.read("/dev/null", { offset: 0, maxBytes: 10 }),
        isCode("INVALID_ARGUMENT", /a character device/),
      );
    });

    await t.step("symlinks are followed to read and refused to write", async () => {
      const dir = fresh();
      const target = join(dir, "real");
      const link = join(dir, "link");
      Deno.writeTextFileSync(target, "through the link");
      Deno.symlinkSync(target, link);
      const r = await files.read(link, { offset: 0, maxBytes: 100 });
      assert.deepEqual([r.path, dec.decode(r.bytes)], [link, "through the link"]);
      await assert.rejects(
        files.write(link, enc.encode("x"), {}),
        isCode("INVALID_ARGUMENT", new RegExp(`symbolic link to "${target}"`)),
      );
      assert.equal(Deno.lstatSync(link).isSymlink, true);
      assert.equal(Deno.readTextFileSync(target), "through the link");
      assert.deepEqual(entries(dir), ["link", "real"]);
    });

    await t.step({
      name: "overwriting as root keeps the file's owner and group",
      ignore: !IS_ROOT,
      fn: async () => {
        const dir = fresh();
        const p = join(dir, "owned");
        Deno.writeTextFileSync(p, "old");
        Deno.chownSync(p, 4242, 4343);
        await files.write(p, enc.encode("new"), {});
        const st = Deno.statSync(p);
        assert.deepEqual([st.uid, st.gid], [4242, 4343]);
      },
    });

    await t.step({
      // Root may read and write anything here (and chattr is not available), so this only runs
      // as an ordinary user.
      name: "permission denied is INVALID_ARGUMENT with a hint",
      ignore: IS_ROOT,
      fn: async () => {
        const dir = fresh();
        const p = join(dir, "locked");
        Deno.writeTextFileSync(p, "x");
        Deno.chmodSync(p, 0o000);
        Deno.chmodSync(dir, 0o500);
        try {
          await assert.rejects(
            files.read(p, { offset: 0, maxBytes: 1 }),
            (e) => isCode("INVALID_ARGUMENT", /permission denied/)(e) && !!(e as TermadaError).hint,
          );
          await assert.rejects(
            files.write(join(dir, "new"), enc.encode("x"), {}),
            isCode("INVALID_ARGUMENT", /permission denied/),
          );
        } finally {
          Deno.chmodSync(dir, 0o755);
        }
      },
    });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

// ---------------------------------------------------------------------------------------------
// Local

/**
 * A real failed rename for the local backend: the write runs in a child Deno that may write the
 * directory but not the target (`--deny-write`), so the temp file is created and the rename is
 * refused.
 */
async function localWriteWithDeniedRename(path: string, data: Uint8Array): Promise<unknown> {
  const script = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    Deno.writeTextFileSync(
      script,
      `import { localFiles } from ${JSON.stringify(new URL("./files.ts", import.meta.url).href)};
const data = new Uint8Array(await new Response(Deno.stdin.readable).arrayBuffer());
try {
  await localFiles().write(Deno.args[0], data, {});
  console.log(JSON.stringify({ ok: true }));
} catch (e) {
  console.log(JSON.stringify({ code: e.code, message: e.message }));
}
`,
    );
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--no-prompt",
        "--no-config",
        "--no-lock",
        "--allow-read",
        "--allow-sys",
        `--allow-write=${dirname(path)}`,
        `--deny-write=${path}`,
        script,
        path,
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const w = child.stdin.getWriter();
    await w.write(data);
    await w.close();
    const out = await child.output();
    assert.equal(out.code, 0, dec.decode(out.stderr));
    const res = JSON.parse(dec.decode(out.stdout));
    assert.equal(res.ok, undefined, "the rename was expected to fail");
    return res;
  } finally {
    await Deno.remove(script);
  }
}

Deno.test("local files keep the file contract", async (t) => {
  await fileContract(t, {
    files: localFiles(),
    writeWithFailingRename: localWriteWithDeniedRename,
  });
});

Deno.test("local resolve needs an absolute cwd", () => {
  assert.throws(() => localFiles().resolve("relative", "x"), TypeError);
  assert.throws(() => localFiles().resolve("", "x"), TypeError);
});

// ---------------------------------------------------------------------------------------------
// SFTP

interface SftpConn extends AsyncDisposable {
  client: SshClient;
  sftp: SFTPWrapper;
}

async function connectSftp(sshd: TestSshd): Promise<SftpConn> {
  const client = new Client();
  let closed = false;
  const gone = new Promise<void>((resolve) =>
    client.once("close", () => {
      closed = true;
      resolve();
    })
  );
  const dispose = async () => {
    if (!closed) client.end();
    await gone;
  };
  try {
    await new Promise<void>((resolve, reject) => {
      client.once("ready", () => resolve()).once("error", reject);
      // Test-only: the host key of this throwaway sshd is not checked.
      client.connect({ ...sshd.connectOptions, hostVerifier: (_key, verify) => verify(true) });
    });
    const sftp = await new Promise<SFTPWrapper>((resolve, reject) =>
      client.sftp((err, s) => (err ? reject(err) : resolve(s)))
    );
    // A dropped connection emits "error" on the client; the tests look at results instead.
    client.on("error", () => {});
    return { client, sftp, [Symbol.asyncDispose]: dispose };
  } catch (err) {
    await dispose();
    throw err;
  }
}

/** `sftp` with some methods replaced (fakes by injection: the backend only sees this object). */
function withOverrides(sftp: SFTPWrapper, overrides: Record<string, unknown>): SFTPWrapper {
  return new Proxy(sftp, {
    get(target, prop) {
      if (typeof prop === "string" && prop in overrides) return overrides[prop];
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

function failWith(code: number, message: string) {
  return (...args: unknown[]) => {
    const cb = args[args.length - 1] as (err: Error) => void;
    setTimeout(() => cb(Object.assign(new Error(message), { code })), 0);
    return true;
  };
}

const unsupported = () => {
  throw new Error("Server does not support this extended request");
};

Deno.test({
  name: "sftp files keep the file contract",
  ignore: !sshdAvailable(),
  fn: async (t) => {
    await using sshd = await TestSshd.start();
    await using conn = await connectSftp(sshd);
    const files = sftpFiles(conn.sftp, { timeoutMs: 10_000 });
    const failing = sftpFiles(
      withOverrides(conn.sftp, { ext_openssh_rename: failWith(4, "Failure") }),
      { timeoutMs: 10_000 },
    );
    await fileContract(t, {
      files,
      writeWithFailingRename: (path, data) =>
        failing.write(path, data, {}).then(() => assert.fail("the write succeeded"), (e) => e),
    });
  },
});

Deno.test({
  name: "sftp resolves a relative cwd against the login directory",
  ignore: !sshdAvailable(),
  fn: async () => {
    await using sshd = await TestSshd.start();
    await using conn = await connectSftp(sshd);
    const home = await sftpHome(conn.sftp);
    assert.equal(home, Deno.env.get("HOME") ?? home);
    assert.match(home, /^\//);
    const files = sftpFiles(conn.sftp, { home });
    assert.equal(files.resolve("", "a/../b"), join(home, "b"));
    assert.equal(files.resolve("proj", "x"), join(home, "proj/x"));
    assert.equal(files.resolve("proj", "/etc/hosts"), "/etc/hosts");
    assert.throws(() => sftpFiles(conn.sftp).resolve("", "x"), TypeError);
  },
});

Deno.test({
  name: "sftp: a connection dropped mid-read fails with SERVER_UNREACHABLE, later calls at once",
  ignore: !sshdAvailable(),
  // ssh2 may leave the decipher of a connection cut mid-packet to the garbage collector (its own
  // resource, not one of ours).
  sanitizeResources: false,
  fn: async () => {
    await using sshd = await TestSshd.start();
    await using conn = await connectSftp(sshd);
    const dir = await Deno.makeTempDir({ prefix: "termada-files-drop-" });
    try {
      const p = join(dir, "big");
      const pages = 8;
      Deno.writeFileSync(p, randomBytes(pages * FILE_LIMITS.readPageBytes));
      const files = sftpFiles(conn.sftp, { timeoutMs: 5_000 });
      let reads = 0;
      const loop = (async () => {
        for (;;) {
          const offset = (reads++ % pages) * FILE_LIMITS.readPageBytes;
          await files.read(p, { offset, maxBytes: FILE_LIMITS.readPageBytes });
        }
      })();
      // Caught from the start: the loop may fail before the drop below has returned.
      const failed: Promise<unknown> = loop.catch((e) => e);
      await files.read(p, { offset: 0, maxBytes: 1 });
      await sshd.dropConnections();
      assert.ok(isCode("SERVER_UNREACHABLE")(await within(10_000, failed)));
      const t0 = performance.now();
      await assert.rejects(
        files.read(p, { offset: 0, maxBytes: 1 }),
        (e) => isCode("SERVER_UNREACHABLE")(e) && (e as TermadaError).retriable,
      );
      await assert.rejects(
        files.write(join(dir, "x"), enc.encode("x"), {}),
        isCode("SERVER_UNREACHABLE"),
      );
      assert.ok(performance.now() - t0 < 1_000, "calls on a closed channel must not wait");
      assert.deepEqual(entries(dir), ["big"]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "sftp: a request the server never answers times out with SERVER_UNREACHABLE",
  ignore: !sshdAvailable(),
  fn: async () => {
    await using sshd = await TestSshd.start();
    await using conn = await connectSftp(sshd);
    const silent = withOverrides(conn.sftp, { stat: () => true, lstat: () => true });
    const files = sftpFiles(silent, { timeoutMs: 100 });
    const t0 = performance.now();
    await assert.rejects(
      files.read("/etc/hostname", { offset: 0, maxBytes: 1 }),
      isCode("SERVER_UNREACHABLE", /did not answer within 100 ms/),
    );
    await assert.rejects(
      files.write("/tmp/never", enc.encode("x"), {}),
      isCode("SERVER_UNREACHABLE"),
    );
    assert.ok(performance.now() - t0 < 2_000);
  },
});

Deno.test({
  name: "sftp without posix-rename refuses to replace a file but still creates new ones",
  ignore: !sshdAvailable(),
  fn: async () => {
    await using sshd = await TestSshd.start();
    await using conn = await connectSftp(sshd);
    const dir = await Deno.makeTempDir({ prefix: "termada-files-norename-" });
    try {
      const files = sftpFiles(withOverrides(conn.sftp, { ext_openssh_rename: unsupported }));
      const p = join(dir, "exists");
      Deno.writeTextFileSync(p, "original");
      await assert.rejects(
        files.write(p, enc.encode("new"), {}),
        isCode("NOT_SUPPORTED", /posix-rename@openssh\.com/),
      );
      assert.equal(Deno.readTextFileSync(p), "original");
      const w = await files.write(join(dir, "fresh"), enc.encode("new"), {});
      assert.equal(w.created, true);
      assert.equal(Deno.readTextFileSync(join(dir, "fresh")), "new");
      assert.deepEqual(entries(dir), ["exists", "fresh"]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "sftp without fsync@openssh.com writes and reports synced: false",
  ignore: !sshdAvailable(),
  fn: async () => {
    await using sshd = await TestSshd.start();
    await using conn = await connectSftp(sshd);
    const dir = await Deno.makeTempDir({ prefix: "termada-files-nofsync-" });
    try {
      const files = sftpFiles(withOverrides(conn.sftp, { ext_openssh_fsync: unsupported }));
      const w = await files.write(join(dir, "f"), enc.encode("data"), {});
      assert.equal(w.synced, false);
      assert.equal(Deno.readTextFileSync(join(dir, "f")), "data");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

/**
 * Reading and writing one file for `file_read` / `file_write`: on this machine (`localFiles`) or
 * over SFTP on a server (`sftpFiles`). This is mechanism only: the caller resolves the path with
 * `resolve`, decides (policy, approval) on that absolute path, audits the size and SHA-256 it gets
 * back, and only then calls `read` or `write` with the same path. Nothing here decides whether a
 * path may be touched.
 *
 * Both backends keep one contract (see files_test.ts):
 * - Paths are absolute and normalised lexically (`..` resolved without I/O, trailing `/`
 *   dropped); symlinks are not resolved, so the path policy saw is the path reported back.
 * - Only regular files are read or replaced: directories, FIFOs, sockets and devices are refused
 *   before any open, so a FIFO never blocks a read. Between that check and the open there is a
 *   window (TOCTOU) in which the path could be swapped for a FIFO; the open would then block
 *   (Deno has no O_NONBLOCK open). After the open the handle is checked again (local: same inode).
 * - Reads follow symlinks (the path asked is reported, not the target). Writes refuse a symlink
 *   at the final component: replacing it would break the link, writing through it would change
 *   a file policy never saw. The error names the target so the caller can ask for that path.
 * - Writes are atomic: a temp file `.<name>.termada-<random>.tmp` (mode 0600) in the same
 *   directory, flushed, given its final mode (and, best effort, the replaced file's owner), then
 *   renamed over the target. On any failure the temp file is removed and the target is untouched.
 *   Replacing a file gives it a new inode: hard links to the old one keep the old content.
 *   SFTP cannot flush a directory, and when the connection drops mid-write the temp file cannot
 *   be removed (it stays, recognisable by its name; the target is still untouched).
 * - Symlinks in parent directories are followed by the OS, as for any path: a policy on the
 *   lexical path does not see where such a link leads.
 * - Errors are `TermadaError`s: NOT_FOUND (no such file, missing parent directory),
 *   INVALID_ARGUMENT (bad path or bounds, not a regular file, symlink on write, and permission
 *   denied — with a hint, as the agent can only pick another path or mode), SERVER_UNREACHABLE
 *   (SFTP: connection lost or no answer within the timeout), NOT_SUPPORTED (SFTP server without
 *   posix-rename when a file must be replaced), INTERNAL (anything else).
 */
import { posix } from "node:path";
import { Buffer } from "node:buffer";
import { TermadaError } from "../shared/mod.ts";
import type { SFTPWrapper, Stats } from "./ssh2.ts";

export const FILE_LIMITS = {
  readPageBytes: 1 << 20,
  writeBytes: 16 << 20,
  pathChars: 4096,
} as const;

export interface FileBackend {
  readonly kind: "local" | "sftp";
  /**
   * Absolute, normalised path for `path` relative to `cwd` (posix join + lexical normalise, no
   * I/O). Local: `cwd` must be absolute. SFTP: a relative `cwd` is taken from the login
   * directory (the `home` option of `sftpFiles`, see `sftpHome`).
   */
  resolve(cwd: string, path: string): string;
  /** The path with every symlink resolved (it must exist); throws otherwise. */
  realpath(path: string): Promise<string>;
  read(path: string, o: { offset: number; maxBytes: number }): Promise<FileRead>;
  write(path: string, data: Uint8Array, o: { mode?: number }): Promise<FileWritten>;
}

export interface FileRead {
  /** The path asked (not a symlink's target). */
  path: string;
  /** The file's size when it was opened (at least offset + bytes read when bytes were read: a pseudo file reports 0; past the end, the file's own size). */
  size: number;
  offset: number;
  bytes: Uint8Array;
  /** The read reached the end of the file. */
  eof: boolean;
  /** SHA-256 (hex) of the whole file: only when this read covered it (offset 0 and eof). */
  sha256?: string;
  /** Last modification (ISO 8601); SFTP gives whole seconds. */
  mtime?: string;
}

export interface FileWritten {
  path: string;
  size: number;
  /** SHA-256 (hex) of the bytes written. */
  sha256: string;
  /** No file existed at the path before. */
  created: boolean;
  /** The mode the file now has (permission bits, 0..0o7777). */
  mode: number;
  /**
   * The data was flushed to stable storage before the rename (and, locally, the directory after
   * it). False when the SFTP server lacks `fsync@openssh.com` or the local directory flush failed;
   * the write itself still happened atomically.
   */
  synced: boolean;
}

/** The local filesystem, as the daemon's own user. */
export function localFiles(): FileBackend {
  return new LocalFiles();
}

export interface SftpFilesOptions {
  /** Every SFTP request fails with SERVER_UNREACHABLE after this long (default 30 s). */
  timeoutMs?: number;
  /** The login directory (absolute), for relative session cwds; see `sftpHome`. */
  home?: string;
}

/** Files on the SFTP channel's server, as the SSH user. The caller owns and closes `sftp`. */
export function sftpFiles(sftp: SFTPWrapper, options: SftpFilesOptions = {}): FileBackend {
  return new SftpFiles(sftp, options);
}

/** The login directory of the SFTP user (`realpath(".")`), for `sftpFiles({ home })`. */
export async function sftpHome(
  sftp: SFTPWrapper,
  options: { timeoutMs?: number } = {},
): Promise<string> {
  const s = new SftpFiles(sftp, options);
  return await s.realpath(".");
}

// ---------------------------------------------------------------------------------------------
// Shared rules

const DEFAULT_TIMEOUT_MS = 30_000;
const NEW_FILE_MODE = 0o644;
const TEMP_MODE = 0o600;
/**
 * SFTP requests are SFTP_CHUNK bytes (under OpenSSH's 255 KiB read/write limit, so ssh2 never
 * splits them into sequential requests); a read page sends all of its chunks at once, a write
 * keeps SFTP_WINDOW of them in flight.
 */
const SFTP_CHUNK = 128 * 1024;
const SFTP_WINDOW = 8;

type Action = "read" | "write";

/** A path for messages: JSON-quoted (NUL and control characters escaped), cut when long. */
function q(path: string): string {
  return JSON.stringify(path.length > 200 ? `${path.slice(0, 200)}…` : path);
}

function checkPath(path: string): void {
  if (typeof path !== "string") throw new TypeError("path must be a string");
  if (path.length === 0) throw invalid("Invalid path: it is empty");
  if (path.includes("\0")) throw invalid(`Invalid path ${q(path)}: it contains a NUL byte`);
  if (path.length > FILE_LIMITS.pathChars) {
    throw invalid(
      `Invalid path ${q(path)}: it is longer than ${FILE_LIMITS.pathChars} characters`,
    );
  }
}

/** Lexical posix resolution; `base` must be absolute. Trailing slashes are dropped. */
function joinNormalize(base: string, path: string): string {
  checkPath(path);
  let out = posix.normalize(path.startsWith("/") ? path : posix.join(base, path));
  while (out.length > 1 && out.endsWith("/")) out = out.slice(0, -1);
  if (out.length > FILE_LIMITS.pathChars) checkPath(out);
  return out;
}

/** What read/write take: an absolute path as `resolve` returns it. */
function checkResolved(path: string): void {
  checkPath(path);
  if (!path.startsWith("/")) {
    throw new TypeError(`Path ${q(path)} is not absolute: resolve it first`);
  }
}

function checkReadOptions(path: string, o: { offset: number; maxBytes: number }): void {
  if (!Number.isSafeInteger(o.offset) || o.offset < 0) {
    throw invalid(`Cannot read ${q(path)}: offset ${o.offset} is not a whole number >= 0`);
  }
  if (
    !Number.isSafeInteger(o.maxBytes) || o.maxBytes < 1 || o.maxBytes > FILE_LIMITS.readPageBytes
  ) {
    throw invalid(
      `Cannot read ${
        q(path)
      }: max_bytes ${o.maxBytes} is not between 1 and ${FILE_LIMITS.readPageBytes}`,
    );
  }
}

function checkWriteOptions(path: string, data: Uint8Array, mode: number | undefined): void {
  if (!(data instanceof Uint8Array)) throw new TypeError("data must be a Uint8Array");
  if (data.byteLength > FILE_LIMITS.writeBytes) {
    throw invalid(
      `Cannot write ${
        q(path)
      }: ${data.byteLength} bytes exceed the limit of ${FILE_LIMITS.writeBytes}`,
      "Split the content or write it with a command",
    );
  }
  if (mode !== undefined && (!Number.isInteger(mode) || mode < 0 || mode > 0o1777)) {
    throw invalid(
      `Cannot write ${q(path)}: mode ${mode} is not between 0 and 0o1777`,
      "setuid and setgid bits are never set by file_write",
    );
  }
  const name = posix.basename(path);
  if (path === "/" || name === "." || name === "..") {
    throw invalid(`Cannot write ${q(path)}: it is not a file name`);
  }
}

/** `.<name>.termada-<random>.tmp` beside the target; the name part is cut to stay < NAME_MAX. */
function tempPath(path: string): string {
  let name = posix.basename(path);
  const enc = new TextEncoder();
  while (enc.encode(name).byteLength > 200) name = Array.from(name).slice(0, -1).join("");
  const rand = Array.from(
    crypto.getRandomValues(new Uint8Array(6)),
    (b) => b.toString(16).padStart(2, "0"),
  )
    .join("");
  return posix.join(posix.dirname(path), `.${name}.termada-${rand}.tmp`);
}

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

function invalid(message: string, hint?: string, cause?: unknown): TermadaError {
  return new TermadaError("INVALID_ARGUMENT", message, { hint, cause });
}

function notRegular(action: Action, path: string, what: string): TermadaError {
  return invalid(
    `Cannot ${action} ${q(path)}: not a regular file (${what})`,
    "file_read and file_write handle regular files only; use a command for anything else",
  );
}

function symlinkRefused(path: string, target: string | undefined): TermadaError {
  return invalid(
    `Cannot write ${q(path)}: it is a symbolic link${
      target === undefined ? "" : ` to ${q(target)}`
    }`,
    "Write the link's target path instead; the link itself is never replaced",
  );
}

function missingParent(path: string, cause: unknown): TermadaError {
  return new TermadaError(
    "NOT_FOUND",
    `Cannot write ${q(path)}: directory ${q(posix.dirname(path))} does not exist`,
    { hint: "Create the directory first; file_write does not create directories", cause },
  );
}

function parentNotDirectory(path: string): TermadaError {
  return invalid(`Cannot write ${q(path)}: ${q(posix.dirname(path))} is not a directory`);
}

function fileNotFound(action: Action, path: string, cause: unknown): TermadaError {
  return new TermadaError("NOT_FOUND", `Cannot ${action} ${q(path)}: no such file`, { cause });
}

function permissionDenied(action: Action, path: string, who: string, cause: unknown): TermadaError {
  return invalid(
    `Cannot ${action} ${q(path)}: permission denied`,
    `Termada ${action}s files as ${who}; choose a path that user may ${action}`,
    cause,
  );
}

// ---------------------------------------------------------------------------------------------
// Local

function localKind(i: Deno.FileInfo): string {
  if (i.isDirectory) return "a directory";
  if (i.isSymlink) return "a symbolic link";
  if (i.isFifo) return "a FIFO";
  if (i.isSocket) return "a socket";
  if (i.isCharDevice) return "a character device";
  if (i.isBlockDevice) return "a block device";
  return "of an unknown kind";
}

function errno(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** The one place a local OS error becomes a TermadaError. */
function localError(err: unknown, action: Action, path: string): TermadaError {
  if (err instanceof TermadaError) return err;
  if (err instanceof Deno.errors.NotFound) return fileNotFound(action, path, err);
  if (err instanceof Deno.errors.PermissionDenied) {
    return permissionDenied(action, path, "the daemon's user", err);
  }
  if (err instanceof Deno.errors.IsADirectory) return notRegular(action, path, "a directory");
  if (err instanceof Deno.errors.NotADirectory) {
    return invalid(`Cannot ${action} ${q(path)}: a parent is not a directory`, undefined, err);
  }
  if (err instanceof Deno.errors.FilesystemLoop) {
    return invalid(
      `Cannot ${action} ${q(path)}: too many levels of symbolic links`,
      undefined,
      err,
    );
  }
  if (errno(err) === "ENAMETOOLONG") {
    return invalid(`Cannot ${action} ${q(path)}: a name in it is too long`, undefined, err);
  }
  const message = err instanceof Error ? err.message : String(err);
  return new TermadaError("INTERNAL", `Cannot ${action} ${q(path)}: ${message}`, { cause: err });
}

/** One page read at `offset` (`want` asked): end of file, and the file's hash when whole. */
async function pageOf(
  path: string,
  size: number,
  offset: number,
  bytes: Uint8Array,
  want: number,
  mtime: Date | undefined,
): Promise<FileRead> {
  const n = bytes.byteLength;
  const eof = n < want || (size > 0 && offset + n >= size) || want === 0;
  return {
    path,
    // A pseudo file reports 0: what was read is its size so far. Past the end nothing was read,
    // and the size is the file's, not the offset asked.
    size: n > 0 ? Math.max(size, offset + n) : size,
    offset,
    bytes,
    eof,
    ...(offset === 0 && eof ? { sha256: await sha256Hex(bytes) } : {}),
    ...(mtime ? { mtime: mtime.toISOString() } : {}),
  };
}

async function writtenOf(
  path: string,
  data: Uint8Array,
  created: boolean,
  mode: number,
  synced: boolean,
): Promise<FileWritten> {
  return { path, size: data.byteLength, sha256: await sha256Hex(data), created, mode, synced };
}

class LocalFiles implements FileBackend {
  readonly kind = "local" as const;

  realpath(path: string): Promise<string> {
    return Deno.realPath(path);
  }

  resolve(cwd: string, path: string): string {
    if (!cwd.startsWith("/")) throw new TypeError(`cwd ${q(cwd)} is not absolute`);
    return joinNormalize(cwd, path);
  }

  async read(path: string, o: { offset: number; maxBytes: number }): Promise<FileRead> {
    checkResolved(path);
    checkReadOptions(path, o);
    try {
      // Refuse FIFOs and devices before open: opening a FIFO would block until a writer comes.
      const before = await Deno.stat(path);
      if (!before.isFile) throw notRegular("read", path, localKind(before));
      using file = await Deno.open(path, { read: true });
      const st = await file.stat();
      if (!st.isFile || st.ino !== before.ino || st.dev !== before.dev) {
        throw invalid(`Cannot read ${q(path)}: it was replaced while being opened`, "Try again");
      }
      // Pseudo files (procfs) report size 0: read up to the page size from them.
      const left = st.size > o.offset ? st.size - o.offset : 0;
      const want = st.size === 0 ? o.maxBytes : Math.min(o.maxBytes, left);
      const buf = new Uint8Array(want);
      let n = 0;
      if (want > 0) {
        await file.seek(o.offset, Deno.SeekMode.Start);
        while (n < want) {
          const r = await file.read(buf.subarray(n));
          if (r === null) break;
          n += r;
        }
      }
      const bytes = n === want ? buf : buf.slice(0, n);
      return await pageOf(path, st.size, o.offset, bytes, want, st.mtime ?? undefined);
    } catch (err) {
      throw localError(err, "read", path);
    }
  }

  async write(path: string, data: Uint8Array, o: { mode?: number }): Promise<FileWritten> {
    checkResolved(path);
    checkWriteOptions(path, data, o.mode);
    const dir = posix.dirname(path);
    let existing: Deno.FileInfo | undefined;
    try {
      existing = await Deno.lstat(path);
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw localError(err, "write", path);
    }
    if (existing !== undefined && !existing.isFile) {
      if (existing.isSymlink) {
        throw symlinkRefused(path, await Deno.readLink(path).catch(() => undefined));
      }
      throw notRegular("write", path, localKind(existing));
    }
    try {
      const d = await Deno.stat(dir);
      if (!d.isDirectory) throw parentNotDirectory(path);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) throw missingParent(path, err);
      if (err instanceof Deno.errors.NotADirectory) throw parentNotDirectory(path);
      throw localError(err, "write", path);
    }
    // An overwrite keeps the mode but never setuid/setgid: new content must not run privileged.
    const mode = o.mode ?? (existing ? existing.mode! & 0o1777 : NEW_FILE_MODE);
    const tmp = tempPath(path);
    let created = false;
    try {
      {
        // createNew = O_EXCL: never follows or reuses something already at the temp path.
        using file = await Deno.open(tmp, { write: true, createNew: true, mode: TEMP_MODE });
        created = true;
        for (let n = 0; n < data.byteLength;) n += await file.write(data.subarray(n));
        await Deno.chmod(tmp, mode);
        if (existing && Deno.uid() === 0 && (existing.uid !== 0 || existing.gid !== 0)) {
          // Root replacing someone's file keeps its owner (best effort: a failure leaves root's).
          await Deno.chown(tmp, existing.uid, existing.gid).catch(() => undefined);
        }
        // sync (not syncData) so the mode is durable with the data before the rename.
        await file.sync();
      }
      await Deno.rename(tmp, path);
      created = false;
    } catch (err) {
      if (created) {
        // The temp file is ours; the target was never touched.
        await Deno.remove(tmp).catch(() => undefined);
      }
      throw localError(err, "write", path);
    }
    return await writtenOf(path, data, existing === undefined, mode, await syncDir(dir));
  }
}

/** fsync a directory so the rename is durable; false when that failed (EINVAL: not supported). */
async function syncDir(dir: string): Promise<boolean> {
  try {
    using d = await Deno.open(dir, { read: true });
    await d.syncData();
    return true;
  } catch (err) {
    // Some filesystems refuse fsync on directories (EINVAL); the rename has happened either way,
    // so this is reported as not synced rather than as a failed write.
    return errno(err) === "EINVAL";
  }
}

// ---------------------------------------------------------------------------------------------
// SFTP

/** An SFTP file handle (opaque bytes from the server). */
type Handle = Buffer;

/** SFTP v3 status codes (draft-ietf-secsh-filexfer-02 §7). */
const FX = {
  EOF: 1,
  NO_SUCH_FILE: 2,
  PERMISSION_DENIED: 3,
  FAILURE: 4,
  BAD_MESSAGE: 5,
  NO_CONNECTION: 6,
  CONNECTION_LOST: 7,
  OP_UNSUPPORTED: 8,
} as const;

/** Whether an SFTP channel has ended; shared by every backend on it (one listener per channel). */
const CHANNELS = new WeakMap<SFTPWrapper, { closed: boolean }>();

function channelState(sftp: SFTPWrapper): { closed: boolean } {
  let s = CHANNELS.get(sftp);
  if (s === undefined) {
    const state = { closed: false };
    const mark = () => {
      state.closed = true;
    };
    // ssh2 silently drops requests sent on an ended channel (they would never be answered), so
    // the end is tracked here to fail them at once.
    sftp.once("close", mark);
    sftp.once("end", mark);
    CHANNELS.set(sftp, state);
    s = state;
  }
  return s;
}

function sftpKind(s: Stats): string {
  if (s.isDirectory()) return "a directory";
  if (s.isSymbolicLink()) return "a symbolic link";
  if (s.isFIFO()) return "a FIFO";
  if (s.isSocket()) return "a socket";
  if (s.isCharacterDevice()) return "a character device";
  if (s.isBlockDevice()) return "a block device";
  return "of an unknown kind";
}

function fxCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "number" ? code : undefined;
}

/** ssh2 throws this (synchronously) for an extension the server did not announce. */
function isUnsupported(err: unknown): boolean {
  return err instanceof Error && /does not support/i.test(err.message);
}

class Unsupported extends Error {}

/** The one place an SFTP error becomes a TermadaError. */
function sftpError(err: unknown, action: Action, path: string): TermadaError {
  if (err instanceof TermadaError) return err;
  const message = err instanceof Error ? err.message : String(err);
  switch (fxCode(err)) {
    case FX.NO_SUCH_FILE:
      return fileNotFound(action, path, err);
    case FX.PERMISSION_DENIED:
      return permissionDenied(action, path, "the SSH user", err);
    case FX.BAD_MESSAGE:
      return invalid(
        `Cannot ${action} ${q(path)}: the server refused it (${message})`,
        undefined,
        err,
      );
    case FX.NO_CONNECTION:
    case FX.CONNECTION_LOST:
      return unreachable(action, path, "the connection was lost", err);
    case FX.OP_UNSUPPORTED:
      return new TermadaError(
        "NOT_SUPPORTED",
        `Cannot ${action} ${q(path)}: the SFTP server does not support it`,
        { cause: err },
      );
  }
  return new TermadaError("INTERNAL", `Cannot ${action} ${q(path)}: ${message}`, { cause: err });
}

function unreachable(action: Action, path: string, why: string, cause?: unknown): TermadaError {
  return new TermadaError("SERVER_UNREACHABLE", `Cannot ${action} ${q(path)}: ${why}`, {
    cause,
    hint: "Retry once the server is reachable again",
  });
}

class SftpFiles implements FileBackend {
  readonly kind = "sftp" as const;
  readonly #sftp: SFTPWrapper;
  readonly #timeoutMs: number;
  readonly #home: string | undefined;
  readonly #state: { closed: boolean };

  constructor(sftp: SFTPWrapper, options: SftpFilesOptions) {
    const t = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(t > 0)) throw new RangeError("timeoutMs must be > 0");
    if (options.home !== undefined && !options.home.startsWith("/")) {
      throw new TypeError(`home ${q(options.home)} is not absolute`);
    }
    this.#sftp = sftp;
    this.#timeoutMs = t;
    this.#home = options.home;
    this.#state = channelState(sftp);
  }

  resolve(cwd: string, path: string): string {
    if (cwd.startsWith("/")) return joinNormalize(cwd, path);
    if (path.startsWith("/")) return joinNormalize("/", path);
    if (this.#home === undefined) {
      throw new TypeError(`cwd ${q(cwd)} is relative: pass the login directory as sftpFiles' home`);
    }
    return joinNormalize(posix.join(this.#home, cwd), path);
  }

  async realpath(path: string): Promise<string> {
    return await this.#call<string>("read", path, (cb) => this.#sftp.realpath(path, cb))
      .catch((err) => {
        throw sftpError(err, "read", path);
      });
  }

  async read(path: string, o: { offset: number; maxBytes: number }): Promise<FileRead> {
    checkResolved(path);
    checkReadOptions(path, o);
    const sftp = this.#sftp;
    try {
      // stat before open: sftp-server's open(2) on a FIFO would block the server until a writer.
      const before = await this.#call<Stats>("read", path, (cb) => sftp.stat(path, cb));
      if (!before.isFile()) throw notRegular("read", path, sftpKind(before));
      const handle = await this.#call<Handle>("read", path, (cb) => sftp.open(path, "r", cb));
      try {
        const st = await this.#call<Stats>("read", path, (cb) => sftp.fstat(handle, cb));
        if (!st.isFile()) {
          throw invalid(`Cannot read ${q(path)}: it was replaced while being opened`, "Try again");
        }
        const left = st.size > o.offset ? st.size - o.offset : 0;
        const want = st.size === 0 ? o.maxBytes : Math.min(o.maxBytes, left);
        const bytes = want === 0
          ? new Uint8Array(0)
          : await this.#readAt(path, handle, o.offset, want);
        const mtime = typeof st.mtime === "number" ? new Date(st.mtime * 1000) : undefined;
        return await pageOf(path, st.size, o.offset, bytes, want, mtime);
      } finally {
        await this.#close(handle);
      }
    } catch (err) {
      throw sftpError(err, "read", path);
    }
  }

  /** Up to `len` bytes at `pos`, in SFTP_CHUNK requests all in flight; short only at EOF. */
  async #readAt(path: string, handle: Handle, pos: number, len: number): Promise<Uint8Array> {
    // Not allocUnsafe: small ones come from a shared pool, and the page's .buffer is returned.
    const buf = Buffer.allocUnsafeSlow(len);
    const chunks: Promise<number>[] = [];
    for (let off = 0; off < len; off += SFTP_CHUNK) {
      chunks.push(this.#readFully(path, handle, buf, off, Math.min(SFTP_CHUNK, len - off), pos));
    }
    // allSettled: no read may still be filling `buf` when this returns or throws.
    const settled = await Promise.allSettled(chunks);
    const got: number[] = [];
    for (const r of settled) {
      if (r.status === "rejected") throw r.reason;
      got.push(r.value);
    }
    let n = 0;
    for (let i = 0; i < got.length; i++) {
      n += got[i]!;
      if (got[i]! < Math.min(SFTP_CHUNK, len - i * SFTP_CHUNK)) break; // EOF inside this chunk
    }
    return new Uint8Array(buf.buffer, buf.byteOffset, n);
  }

  /** Fills buf[off, off+len) from file offset base+off; a server may answer reads short. */
  async #readFully(
    path: string,
    handle: Handle,
    buf: Buffer,
    off: number,
    len: number,
    base: number,
  ): Promise<number> {
    let n = 0;
    while (n < len) {
      const r = await this.#call<number>(
        "read",
        path,
        (cb) =>
          this.#sftp.read(handle, buf, off + n, len - n, base + off + n, (err, bytesRead) => {
            // ssh2 reports EOF as (no error, 0 bytes) for positioned reads.
            cb(err, bytesRead ?? 0);
          }),
      );
      if (r === 0) break;
      n += r;
    }
    return n;
  }

  async write(path: string, data: Uint8Array, o: { mode?: number }): Promise<FileWritten> {
    checkResolved(path);
    checkWriteOptions(path, data, o.mode);
    const sftp = this.#sftp;
    const dir = posix.dirname(path);
    // Both asked at once (one round trip); the target's answer is looked at first.
    const [target, parent] = await Promise.allSettled([
      this.#call<Stats>("write", path, (cb) => sftp.lstat(path, cb)),
      this.#call<Stats>("write", path, (cb) => sftp.stat(dir, cb)),
    ]);
    let existing: Stats | undefined;
    if (target.status === "fulfilled") existing = target.value;
    else if (fxCode(target.reason) !== FX.NO_SUCH_FILE) {
      throw sftpError(target.reason, "write", path);
    }
    if (existing !== undefined && !existing.isFile()) {
      if (existing.isSymbolicLink()) {
        const target = await this.#call<string>("write", path, (cb) => sftp.readlink(path, cb))
          .catch(() => undefined);
        throw symlinkRefused(path, target);
      }
      throw notRegular("write", path, sftpKind(existing));
    }
    if (parent.status === "rejected") {
      if (fxCode(parent.reason) === FX.NO_SUCH_FILE) throw missingParent(path, parent.reason);
      throw sftpError(parent.reason, "write", path);
    }
    if (!parent.value.isDirectory()) throw parentNotDirectory(path);
    const mode = o.mode ?? (existing ? existing.mode & 0o1777 : NEW_FILE_MODE);
    const tmp = tempPath(path);
    let handle: Handle | undefined;
    let tmpExists = false;
    let synced = false;
    try {
      // "wx" = CREAT|EXCL: never reuses something already at the temp path.
      handle = await this.#call<Handle>(
        "write",
        path,
        (cb) => sftp.open(tmp, "wx", TEMP_MODE, cb),
      );
      tmpExists = true;
      await this.#writeAll(path, handle, data);
      const h = handle;
      await this.#call<void>("write", path, (cb) => sftp.fchmod(h, mode, cb));
      if (existing && (existing.uid !== undefined && existing.gid !== undefined)) {
        // Keeps the replaced file's owner and group; works when the SSH user may (root, or the
        // same owner with a group it belongs to); otherwise the file is the SSH user's.
        const { uid, gid } = existing;
        await this.#call<void>("write", path, (cb) => sftp.fsetstat(h, { uid, gid }, cb))
          .catch((err) => {
            if (err instanceof TermadaError) throw err;
          });
      }
      synced = await this.#call<boolean>("write", path, (cb) => {
        try {
          sftp.ext_openssh_fsync(h, (err) => cb(err, true));
        } catch (err) {
          if (!isUnsupported(err)) throw err;
          cb(undefined, false); // fsync@openssh.com not offered: reported as synced: false
        }
      });
      handle = undefined;
      await this.#call<void>("write", path, (cb) => sftp.close(h, cb));
      await this.#rename(tmp, path, existing === undefined);
      tmpExists = false;
    } catch (err) {
      if (handle !== undefined) await this.#close(handle);
      if (tmpExists) {
        // Ours to remove; fails too when the connection is gone (the temp file then stays,
        // recognisable by its name, and the target is still untouched).
        await this.#call<void>("write", path, (cb) => sftp.unlink(tmp, cb)).catch(() => undefined);
      }
      if (err instanceof Unsupported) {
        throw new TermadaError(
          "NOT_SUPPORTED",
          `Cannot write ${
            q(path)
          }: the SFTP server cannot replace files atomically (no posix-rename@openssh.com)`,
          { hint: "Write to a new path, or replace the file with a command", cause: err },
        );
      }
      throw sftpError(err, "write", path);
    }
    return await writtenOf(path, data, existing === undefined, mode, synced);
  }

  /** Atomic replace (posix-rename@openssh.com); plain SFTP rename only for a new target. */
  async #rename(from: string, to: string, isNew: boolean): Promise<void> {
    const sftp = this.#sftp;
    await this.#call<void>("write", to, (cb) => {
      try {
        sftp.ext_openssh_rename(from, to, cb);
      } catch (err) {
        if (!isUnsupported(err)) throw err;
        // SFTP v3 rename refuses an existing target, so it is atomic and safe for a new file.
        if (isNew) sftp.rename(from, to, cb);
        else cb(new Unsupported(String(err)));
      }
    });
  }

  /** Sends data in SFTP_CHUNK writes, SFTP_WINDOW of them in flight. */
  async #writeAll(path: string, handle: Handle, data: Uint8Array): Promise<void> {
    const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    let next = 0;
    const worker = async () => {
      while (next < buf.length) {
        const off = next;
        next += SFTP_CHUNK;
        const len = Math.min(SFTP_CHUNK, buf.length - off);
        await this.#call<void>(
          "write",
          path,
          (cb) => this.#sftp.write(handle, buf, off, len, off, cb),
        );
      }
    };
    const workers = Array.from({
      length: Math.min(SFTP_WINDOW, Math.ceil(buf.length / SFTP_CHUNK)),
    }, worker);
    // allSettled: no request may still be running when the caller cleans up after a failure.
    const results = await Promise.allSettled(workers);
    for (const r of results) if (r.status === "rejected") throw r.reason;
  }

  /** Closes a handle, never throwing (used on paths that already have a result or an error). */
  async #close(handle: Handle): Promise<void> {
    await this.#call<void>("read", "", (cb) => this.#sftp.close(handle, cb)).catch(() => undefined);
  }

  /**
   * One SFTP request with a deadline. Rejects with SERVER_UNREACHABLE when the channel has
   * ended, ssh2 reports the request unanswered, or no answer came within the timeout; otherwise
   * with ssh2's own error (numeric SFTP status in `code`) for the caller to map.
   */
  #call<T>(
    action: Action,
    path: string,
    start: (cb: (err: Error | undefined | null, value?: T) => void) => void,
  ): Promise<T> {
    if (this.#state.closed) {
      return Promise.reject(unreachable(action, path, "the SFTP channel is closed"));
    }
    return new Promise<T>((resolve, reject) => {
      let done = false;
      const timer = setTimeout(() => {
        done = true;
        reject(
          unreachable(action, path, `the SFTP server did not answer within ${this.#timeoutMs} ms`),
        );
      }, this.#timeoutMs);
      const cb = (err: Error | undefined | null, value?: T) => {
        if (done) return; // a late answer after the timeout
        done = true;
        clearTimeout(timer);
        if (!err) resolve(value as T);
        else if (fxCode(err) === undefined && /no response/i.test(err.message)) {
          reject(unreachable(action, path, "the connection was lost", err));
        } else if (fxCode(err) === undefined && this.#state.closed) {
          reject(unreachable(action, path, "the SFTP channel is closed", err));
        } else reject(err);
      };
      try {
        start(cb);
      } catch (err) {
        cb(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }
}

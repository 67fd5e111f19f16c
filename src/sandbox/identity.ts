/**
 * What a file is, whatever its name: `(dev, inode, mtime, size)` from `stat`, and the SHA-256
 * of its content, cached by that key (a rewritten file changes mtime or size; a copy has the
 * same content under another inode). Read through libc, since the paths are `/proc/<pid>/root/…`
 * and `/proc/<pid>/cwd/…` views of a target process (Deno's file APIs refuse /proc).
 *
 * Bounds: the cache keeps 4096 identities (oldest out first); a file is hashed up to
 * MAX_HASHED_BYTES (a bigger one is identified by the hash of that prefix plus its size, and
 * says so with `partial`). Only regular files have an identity; nothing here blocks.
 */
import { createHash } from "node:crypto";
import { cstr, LINUX, sys } from "../../ffi/mod.ts";

/** Hashed per file on the daemon's thread (≈ 10 ms here): beyond, a prefix and the size. */
export const MAX_HASHED_BYTES = 8 * 1024 * 1024;
const CACHE_ENTRIES = 4096;
const HEAD_BYTES = 256;

export interface FileIdentity {
  dev: bigint;
  ino: bigint;
  size: number;
  /** Hex SHA-256 of the content (of its first MAX_HASHED_BYTES when `partial`). */
  sha256: string;
  partial: boolean;
  /** The first bytes (for `#!` lines). */
  head: Uint8Array;
}

const cache = new Map<string, FileIdentity>();
const statBuf = new Uint8Array(LINUX.SIZEOF_STAT);
const statView = new DataView(statBuf.buffer);
const chunk = new Uint8Array(1 << 20);
let hits = 0;
let misses = 0;

const MODE_OFFSET = Deno.build.arch === "aarch64" ? 16 : 24;
const S_IFMT = 0o170000;
const S_IFREG = 0o100000;

interface StatKey {
  dev: bigint;
  ino: bigint;
  size: number;
  regular: boolean;
  key: string;
}

/** dev, ino, size, type, mtime and ctime from the stat buffer just filled. */
function keyOf(): StatKey {
  const dev = statView.getBigUint64(0, true);
  const ino = statView.getBigUint64(8, true);
  const size = Number(statView.getBigInt64(48, true));
  const regular = (statView.getUint32(MODE_OFFSET, true) & S_IFMT) === S_IFREG;
  // ctime too: a user can set mtime back (touch -d), never ctime.
  const m = `${statView.getBigInt64(88, true)}.${statView.getBigInt64(96, true)}`;
  const c = `${statView.getBigInt64(104, true)}.${statView.getBigInt64(112, true)}`;
  return { dev, ino, size, regular, key: `${dev}:${ino}:${size}:${m}:${c}` };
}

/** stat of a path (following symlinks), or undefined. */
function statKey(path: Uint8Array): StatKey | undefined {
  return sys().stat(path, statBuf) === 0 ? keyOf() : undefined;
}

/** dev and inode of the file at `path` (following links, `/proc/<pid>/exe` too). */
export function statId(path: string): { dev: bigint; ino: bigint } | undefined {
  try {
    const st = statKey(cstr(path));
    return st ? { dev: st.dev, ino: st.ino } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The identity of the regular file at `path`, or undefined when it is not one (a FIFO, a
 * terminal, a socket: the kernel will not exec those anyway) or cannot be opened. It never
 * blocks: the file is opened non-blocking, checked again through its fd (the same inode, still
 * regular), and hashed from that fd.
 */
export function fileIdentity(path: string): FileIdentity | undefined {
  let p: Uint8Array;
  try {
    p = cstr(path);
  } catch {
    return undefined;
  }
  const st = statKey(p);
  if (st === undefined || !st.regular) return undefined;
  const cached = cache.get(st.key);
  if (cached) {
    hits++;
    cache.delete(st.key);
    cache.set(st.key, cached);
    return cached;
  }
  misses++;
  const libc = sys();
  const fd = libc.open(p, LINUX.O_RDONLY | LINUX.O_NONBLOCK | LINUX.O_NOCTTY | LINUX.O_CLOEXEC, 0);
  if (fd < 0) return undefined;
  const hash = createHash("sha256");
  let head = new Uint8Array(0);
  let total = 0;
  try {
    if (libc.fstat(fd, statBuf) !== 0) return undefined;
    const now = keyOf();
    if (!now.regular || now.dev !== st.dev || now.ino !== st.ino) return undefined;
    while (total < MAX_HASHED_BYTES) {
      const want = Math.min(chunk.length, MAX_HASHED_BYTES - total);
      const n = Number(libc.read(fd, chunk, BigInt(want)));
      if (n < 0) return undefined;
      if (n === 0) break;
      if (total === 0) head = chunk.slice(0, Math.min(n, HEAD_BYTES));
      hash.update(chunk.subarray(0, n));
      total += n;
    }
  } finally {
    libc.close(fd);
  }
  // A bigger file is identified by its first MAX_HASHED_BYTES and its size.
  if (total < st.size) hash.update(`\0size=${st.size}`);
  const id: FileIdentity = {
    dev: st.dev,
    ino: st.ino,
    size: st.size,
    sha256: hash.digest("hex"),
    partial: total < st.size,
    head,
  };
  cache.set(st.key, id);
  if (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
  return id;
}

/** Cache counters (for the bench and `capabilities`). */
export function identityCacheStats(): { entries: number; hits: number; misses: number } {
  return { entries: cache.size, hits, misses };
}

/** `#!interpreter [one argument]` of a script's first line, or undefined. */
export function shebang(head: Uint8Array): { interpreter: string; arg?: string } | undefined {
  if (head[0] !== 0x23 || head[1] !== 0x21) return undefined;
  let end = head.indexOf(10);
  if (end < 0) end = head.length;
  const line = new TextDecoder().decode(head.subarray(2, end)).trim();
  if (line === "") return undefined;
  const sp = line.search(/[ \t]/);
  if (sp < 0) return { interpreter: line };
  const arg = line.slice(sp + 1).trim();
  return { interpreter: line.slice(0, sp), ...(arg ? { arg } : {}) };
}

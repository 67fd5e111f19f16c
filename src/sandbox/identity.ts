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
import {
  cstrInto,
  LINUX,
  S_IFMT,
  S_IFREG,
  STAT_LAYOUT,
  statFd,
  statPath,
  sys,
} from "../../ffi/mod.ts";

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
const chunk = new Uint8Array(1 << 20);

// The exec gate asks for every exec: a cache hit allocates nothing but the key (the path is
// encoded into a scratch buffer, `stat` fills a buffer of ours).
const pathScratch = new Uint8Array(16384);
const stBuf = new Uint8Array(STAT_LAYOUT.size);
const stView = new DataView(stBuf.buffer);
const stU16 = new Uint16Array(stBuf.buffer);
/** The UTF-16 units of st_dev and st_ino, st_size, st_mtim and st_ctim (8-byte aligned). */
const KEY_UNITS = [
  ...range(STAT_LAYOUT.dev / 2, 8),
  ...range(STAT_LAYOUT.st_size / 2, 4),
  ...range(STAT_LAYOUT.mtime / 2, 8),
  ...range(STAT_LAYOUT.ctime / 2, 8),
];
const keyCodes: number[] = KEY_UNITS.map(() => 0);

function range(from: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => from + i);
}

/**
 * The cache key of what `stat` just filled in: what changes when the file does (dev, inode,
 * size, mtime, and ctime too: mtime can be set back), as the raw bytes of those fields.
 */
function keyOfStat(): string {
  for (let i = 0; i < KEY_UNITS.length; i++) keyCodes[i] = stU16[KEY_UNITS[i]!]!;
  return String.fromCharCode.apply(null, keyCodes);
}

/** dev and inode of the file at `path` (following links, `/proc/<pid>/exe` too). */
export function statId(path: string): { dev: bigint; ino: bigint } | undefined {
  const st = statPath(path);
  return st ? { dev: st.dev, ino: st.ino } : undefined;
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
    p = cstrInto(path, pathScratch);
  } catch {
    return undefined;
  }
  const libc = sys();
  if (libc.stat(p, stBuf) !== 0) return undefined;
  if ((stView.getUint32(STAT_LAYOUT.mode, true) & S_IFMT) !== S_IFREG) return undefined;
  const key = keyOfStat();
  const cached = cache.get(key);
  if (cached) {
    cache.delete(key);
    cache.set(key, cached);
    return cached;
  }
  const dev = stView.getBigUint64(STAT_LAYOUT.dev, true);
  const ino = stView.getBigUint64(STAT_LAYOUT.ino, true);
  const size = Number(stView.getBigInt64(STAT_LAYOUT.st_size, true));
  const fd = libc.open(p, LINUX.O_RDONLY | LINUX.O_NONBLOCK | LINUX.O_NOCTTY | LINUX.O_CLOEXEC, 0);
  if (fd < 0) return undefined;
  const hash = createHash("sha256");
  let head = new Uint8Array(0);
  let total = 0;
  try {
    const now = statFd(fd);
    if (!now || (now.mode & S_IFMT) !== S_IFREG || now.dev !== dev || now.ino !== ino) {
      return undefined;
    }
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
  if (total < size) hash.update(`\0size=${size}`);
  const id: FileIdentity = {
    dev,
    ino,
    size,
    sha256: hash.digest("hex"),
    partial: total < size,
    head,
  };
  cache.set(key, id);
  if (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
  return id;
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

/** Where program names are looked up: `PATH`'s absolute entries, then the usual system dirs. */
export function programDirs(pathVar: string | undefined): string[] {
  const system = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];
  return [...new Set([...(pathVar ?? "").split(":").filter((d) => d.startsWith("/")), ...system])];
}

/**
 * Small synchronous file helpers for the audit folder. Synchronous on purpose: async file APIs
 * borrow threads from Deno's blocking pool, which the PTY poller needs, and an audit append must
 * be on disk before the caller goes on.
 */
import { CHECKPOINT_FILE, CHECKPOINT_TMP, segmentNumber } from "./record.ts";

const LF = 0x0a;
const FIRST_CHUNK = 64 * 1024;

/** fsync a directory so that created, renamed and removed entries survive a power loss. */
export function syncDir(dir: string): void {
  const d = Deno.openSync(dir, { read: true });
  try {
    d.syncSync();
  } finally {
    d.close();
  }
}

export function removeIfPresent(path: string): boolean {
  try {
    Deno.removeSync(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

function readFullAt(file: Deno.FsFile, pos: number, into: Uint8Array): void {
  file.seekSync(pos, Deno.SeekMode.Start);
  let off = 0;
  while (off < into.length) {
    const n = file.readSync(into.subarray(off));
    if (n === null || n === 0) throw new Error("The file shrank while it was read");
    off += n;
  }
}

/** The complete lines at the end of a file and the length of a torn tail (bytes after the last LF). */
export interface LastLines {
  /** At most n complete lines (without LF), oldest first. */
  lines: Uint8Array[];
  /** Bytes after the last LF: a write that never completed. */
  tornBytes: number;
  /** Size of the file when read. */
  size: number;
}

/** Reads the last n complete lines of a file, backwards in growing chunks (not the whole file). */
export function readLastLines(path: string, n: number): LastLines {
  const file = Deno.openSync(path, { read: true });
  try {
    const size = file.statSync().size;
    let buf = new Uint8Array(0);
    let pos = size;
    let chunk = FIRST_CHUNK;
    while (pos > 0) {
      const len = Math.min(chunk, pos);
      pos -= len;
      const next = new Uint8Array(len + buf.length);
      readFullAt(file, pos, next.subarray(0, len));
      next.set(buf, len);
      buf = next;
      chunk *= 2;
      let lf = 0;
      for (let i = buf.indexOf(LF); i >= 0 && lf <= n; i = buf.indexOf(LF, i + 1)) lf++;
      // n + 1 LFs: the n lines before the last LF are complete even if the first piece is not.
      if (lf > n) break;
    }
    const lastLf = buf.lastIndexOf(LF);
    const tornBytes = buf.length - (lastLf + 1);
    const lines: Uint8Array[] = [];
    let end = lastLf;
    while (end >= 0 && lines.length < n) {
      // lastIndexOf with a negative start counts from the end: guard the line at offset 0.
      const start = end === 0 ? 0 : buf.lastIndexOf(LF, end - 1) + 1;
      if (start === 0 && pos > 0) break; // the first piece starts before what was read
      lines.push(buf.subarray(start, end));
      end = start - 1;
    }
    lines.reverse();
    return { lines, tornBytes, size };
  } finally {
    file.close();
  }
}

/** The first line of a file (without LF), or null when it has no complete line within `limit`. */
export function readFirstLine(path: string, limit: number): Uint8Array | null {
  const file = Deno.openSync(path, { read: true });
  try {
    const size = Math.min(file.statSync().size, limit);
    let buf = new Uint8Array(0);
    let chunk = FIRST_CHUNK;
    while (buf.length < size) {
      const len = Math.min(chunk, size - buf.length);
      const next = new Uint8Array(buf.length + len);
      next.set(buf);
      readFullAt(file, buf.length, next.subarray(buf.length));
      const lf = next.indexOf(LF, buf.length);
      buf = next;
      if (lf >= 0) return buf.subarray(0, lf);
      chunk *= 2;
    }
    return null;
  } finally {
    file.close();
  }
}

/** What a directory listing holds, as the audit sees it. */
export interface Listing {
  /** Regular files with a canonical segment name, by number (unsorted). */
  segments: number[];
  /** Whether checkpoint.json exists (of any type: a non-file is reported when read). */
  checkpoint: boolean;
  /** Entries named like ours that cannot be: non-canonical `audit-*` names, non-file segments. */
  unexpected: string[];
}

export function listDir(dir: string): Listing {
  const out: Listing = { segments: [], checkpoint: false, unexpected: [] };
  for (const e of Deno.readDirSync(dir)) {
    if (e.name === CHECKPOINT_FILE) {
      out.checkpoint = true;
      continue;
    }
    if (e.name === CHECKPOINT_TMP) continue; // leftover of an interrupted checkpoint write
    const n = segmentNumber(e.name);
    if (n !== null && e.isFile) out.segments.push(n);
    else if (e.name.startsWith("audit-")) out.unexpected.push(e.name);
  }
  out.unexpected.sort();
  return out;
}

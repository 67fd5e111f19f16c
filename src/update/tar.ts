/**
 * The archive format of a release asset: gzip around a ustar archive. The reader takes exactly
 * one named member out of an archive, in memory and bounded, and is strict on purpose (a
 * release archive holds plain files only): any member that is not a regular file with a plain
 * name (no `/`, not `.` or `..`), any extended header, a bad header checksum, the wanted name
 * twice, or a member over the size bound refuses the whole archive. The writer makes what
 * scripts/release.ts ships (and, with `type`, the hostile archives the tests need).
 */
import { concatBytes } from "../shared/mod.ts";
import { UpdateError } from "./error.ts";

const BLOCK = 512;

export interface TarInput {
  name: string;
  data?: Uint8Array;
  /** Default 0o755 for files. */
  mode?: number;
  type?: "file" | "dir" | "symlink" | "hardlink";
  linkname?: string;
  /** Seconds since the epoch (default 0: archives are reproducible). */
  mtime?: number;
}

const TYPEFLAG = { file: "0", hardlink: "1", symlink: "2", dir: "5" } as const;

function bad(message: string): UpdateError {
  return new UpdateError("BAD_ARCHIVE", message);
}

/** Decompresses gzip `data`, aborting once the output would pass `maxBytes`. */
export async function gunzip(data: Uint8Array, maxBytes: number): Promise<Uint8Array> {
  const stream = new Blob([data as Uint8Array<ArrayBuffer>]).stream().pipeThrough(
    new DecompressionStream("gzip"),
  );
  const reader = stream.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      let step: ReadableStreamReadResult<Uint8Array>;
      try {
        step = await reader.read();
      } catch (err) {
        throw new UpdateError(
          "BAD_ARCHIVE",
          `The archive is not valid gzip: ${(err as Error).message}`,
          {
            cause: err,
          },
        );
      }
      if (step.done) break;
      total += step.value.byteLength;
      if (total > maxBytes) throw bad(`The archive unpacks to more than ${maxBytes} bytes`);
      parts.push(step.value);
    }
  } catch (err) {
    await reader.cancel().catch(() => {/* already failed: nothing more to release */});
    throw err;
  } finally {
    reader.releaseLock();
  }
  return concatBytes(parts, total);
}

export async function gzip(data: Uint8Array): Promise<Uint8Array> {
  const out = new Blob([data as Uint8Array<ArrayBuffer>]).stream().pipeThrough(
    new CompressionStream("gzip"),
  );
  return new Uint8Array(await new Response(out).arrayBuffer());
}

function text(h: Uint8Array, start: number, len: number): string {
  const f = h.subarray(start, start + len);
  const end = f.indexOf(0);
  return new TextDecoder().decode(end < 0 ? f : f.subarray(0, end));
}

function octal(h: Uint8Array, start: number, len: number, what: string): number {
  if ((h[start]! & 0x80) !== 0) throw bad(`The archive uses a base-256 ${what} field`);
  const s = text(h, start, len).trim();
  if (!/^[0-7]{0,12}$/.test(s)) throw bad(`The archive has a malformed ${what} field`);
  return s === "" ? 0 : parseInt(s, 8);
}

function checksumOf(h: Uint8Array): number {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i]!;
  return sum;
}

/** `name` is a single path component: what a release member may be called. */
function plainName(name: string): boolean {
  return name !== "" && name !== "." && name !== ".." && !/[/\\\0]/.test(name);
}

/**
 * The bytes of the one regular file `name` in the (uncompressed) ustar archive `tar`. Throws
 * BAD_ARCHIVE naming the offending member for anything the module comment refuses.
 */
export function extractMember(tar: Uint8Array, name: string, maxSize: number): Uint8Array {
  let found: Uint8Array | undefined;
  let off = 0;
  for (;;) {
    if (off + BLOCK > tar.length) throw bad("The archive ends without its end-of-archive marker");
    const h = tar.subarray(off, off + BLOCK);
    if (h.every((b) => b === 0)) break;
    if (octal(h, 148, 8, "checksum") !== checksumOf(h)) {
      throw bad(`The archive header at byte ${off} has a bad checksum`);
    }
    if (text(h, 257, 6).slice(0, 5) !== "ustar") throw bad("The archive is not in ustar format");
    const flag = String.fromCharCode(h[156]!);
    const prefix = text(h, 345, 155);
    const raw = text(h, 0, 100);
    const member = prefix ? `${prefix}/${raw}` : raw;
    const size = octal(h, 124, 12, "size");
    const shown = JSON.stringify(member.slice(0, 120));
    if ("xgLKAEIMNSV".includes(flag)) {
      throw bad(`The archive has an extended header (type "${flag}") before ${shown}`);
    }
    if (!plainName(member)) throw bad(`The archive has a member with a path: ${shown}`);
    if (flag !== "0" && flag !== "\0") {
      const kind = flag === "2" ? "a symlink" : flag === "1" ? "a hard link" : `of type "${flag}"`;
      throw bad(`The archive member ${shown} is ${kind}, not a regular file`);
    }
    const start = off + BLOCK;
    const end = start + size;
    if (end > tar.length) throw bad(`The archive member ${shown} is cut short`);
    if (member === name) {
      if (found) throw bad(`The archive holds "${name}" more than once`);
      if (size > maxSize) throw bad(`The archive member "${name}" is over ${maxSize} bytes`);
      found = tar.slice(start, end);
    }
    off = start + Math.ceil(size / BLOCK) * BLOCK;
  }
  if (!found) throw bad(`The archive holds no file "${name}"`);
  return found;
}

function header(e: TarInput, size: number): Uint8Array {
  const h = new Uint8Array(BLOCK);
  const enc = new TextEncoder();
  const put = (s: string, at: number, len: number) => {
    const b = enc.encode(s);
    if (b.length > len) throw new RangeError(`Tar field too long: ${s}`);
    h.set(b, at);
  };
  const num = (n: number, at: number, len: number) =>
    put(n.toString(8).padStart(len - 1, "0"), at, len - 1);
  put(e.name, 0, 100);
  num(e.mode ?? 0o755, 100, 8);
  num(0, 108, 8);
  num(0, 116, 8);
  num(size, 124, 12);
  num(e.mtime ?? 0, 136, 12);
  put(TYPEFLAG[e.type ?? "file"], 156, 1);
  put(e.linkname ?? "", 157, 100);
  put("ustar\x0000", 257, 8);
  put("root", 265, 32);
  put("root", 297, 32);
  put(checksumOf(h).toString(8).padStart(6, "0") + "\0 ", 148, 8);
  return h;
}

/** An uncompressed ustar archive of `entries`, in order. */
export function createTar(entries: readonly TarInput[]): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const e of entries) {
    const data = e.type === undefined || e.type === "file" ? e.data ?? new Uint8Array() : undefined;
    parts.push(header(e, data?.length ?? 0));
    if (data) {
      parts.push(data);
      const pad = (BLOCK - (data.length % BLOCK)) % BLOCK;
      if (pad) parts.push(new Uint8Array(pad));
    }
  }
  parts.push(new Uint8Array(BLOCK * 2));
  return concatBytes(parts);
}

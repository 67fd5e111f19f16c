/**
 * Each job's cleaned output on disk, bounded, readable after a restart. A spool is a directory
 * `<spoolDir>/<jobId>/` of `seg-<n>` files of segmentBytes each: segment n holds the absolute
 * offsets [n*S, (n+1)*S). Segment 0 (the head) is kept forever, plus the newest segments that fit
 * in maxBytes; older middle segments are deleted and read back as an explicit gap. `done` marks a
 * spool whose writer ended cleanly.
 *
 * Everything here is synchronous on purpose: async file APIs borrow threads from Deno's blocking
 * pool, which the PTY poller needs.
 */
import { invalidArgument, logger, TermadaError } from "../shared/mod.ts";
import {
  type ByteSource,
  MAX_PAGE_BYTES,
  type Page,
  readPage,
  summarize,
  type Summary,
} from "./paging.ts";
import { completeEnd, isCont } from "./utf8.ts";

export interface SpoolOptions {
  /** Size of one segment file (default 1 MiB, at least 16). */
  segmentBytes?: number;
  /** Most bytes on disk per job (default 16 MiB, at least 2 segments). */
  maxBytes?: number;
}

const DEFAULT_SEGMENT_BYTES = 1024 * 1024;
const DEFAULT_MAX_BYTES = 16 * 1024 * 1024;
const MIN_SEGMENT_BYTES = 16;
/** Appends are gathered into one write of this size. */
const WRITE_BATCH = 64 * 1024;
const DONE = "done";
const JOB_ID = /^job_[0-9a-z]{12}$/;
const SEGMENT = /^seg-(0|[1-9][0-9]{0,12})$/;

/** ignoreBOM: a leading U+FEFF is output like any other character, as in CursorBuffer. */
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
const encoder = new TextEncoder();
const log = logger("output");
/** Bytes read around a lone byteAt, enough for every look-around of the paging rules. */
const PEEK = 8;

/** Validates a job id before it becomes part of a path (no traversal, no surprises). */
function jobDir(spoolDir: string, jobId: string, action: string): string {
  if (typeof jobId !== "string" || !JOB_ID.test(jobId)) {
    const shown = typeof jobId === "string" ? jobId.slice(0, 40) : String(jobId);
    throw invalidArgument(
      `Cannot ${action} for "${shown}": it is not a job id`,
      'Job ids are "job_" and 12 characters of 0-9 and a-z',
    );
  }
  if (typeof spoolDir !== "string" || spoolDir === "") {
    throw new TypeError("A spool directory path is required");
  }
  return `${spoolDir}/${jobId}`;
}

const segmentPath = (dir: string, n: number): string => `${dir}/seg-${n}`;

function removeIfPresent(path: string): void {
  try {
    Deno.removeSync(path);
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
}

function writeAll(file: Deno.FsFile, bytes: Uint8Array): void {
  let off = 0;
  while (off < bytes.length) off += file.writeSync(bytes.subarray(off));
}

/**
 * Writes one job's output. Owned by the job's pipeline; the owner must call end() (or abandon())
 * so the open segment file is closed.
 *
 * A write error (disk full) does not reach the job: it is logged once, the spool stops growing,
 * and totalBytes keeps counting, so `done` records the real size and readers see the lost bytes
 * as a gap.
 */
export class SpoolWriter {
  readonly #dir: string;
  readonly #segmentBytes: number;
  /** Newest segments kept besides segment 0. */
  readonly #keepNewest: number;
  #buffer: Uint8Array | undefined;
  #buffered = 0;
  /** Bytes on disk (offsets [0, #written) were written, minus deleted segments). */
  #written = 0;
  #file: Deno.FsFile | undefined;
  #fileSegment = -1;
  /** Lowest middle segment (≥ 1) that may still be on disk. */
  #oldestMiddle = 1;
  #state: "open" | "ended" | "abandoned" = "open";
  #error: unknown;

  private constructor(dir: string, segmentBytes: number, maxBytes: number) {
    this.#dir = dir;
    this.#segmentBytes = segmentBytes;
    this.#keepNewest = Math.floor(maxBytes / segmentBytes) - 1;
  }

  /** Creates `<spoolDir>/<jobId>/` (0700) and its first segment (0600); the job must be new. */
  static create(spoolDir: string, jobId: string, options: SpoolOptions = {}): SpoolWriter {
    const dir = jobDir(spoolDir, jobId, "create an output spool");
    const segmentBytes = options.segmentBytes ?? DEFAULT_SEGMENT_BYTES;
    const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    if (!Number.isSafeInteger(segmentBytes) || segmentBytes < MIN_SEGMENT_BYTES) {
      throw new RangeError(
        `Spool segmentBytes must be an integer of at least ${MIN_SEGMENT_BYTES}, got ${segmentBytes}`,
      );
    }
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 2 * segmentBytes) {
      throw new RangeError(
        `Spool maxBytes must be an integer of at least 2 segments (${
          2 * segmentBytes
        }), got ${maxBytes}`,
      );
    }
    const writer = new SpoolWriter(dir, segmentBytes, maxBytes);
    try {
      Deno.mkdirSync(spoolDir, { recursive: true, mode: 0o700 });
      // Not recursive: fails if the directory exists, so nothing planted there is reused.
      Deno.mkdirSync(dir, { mode: 0o700 });
      writer.#openSegment(0);
    } catch (err) {
      throw new TermadaError(
        "INTERNAL",
        `Cannot create the output spool of job "${jobId}": ${
          err instanceof Error ? err.message : String(err)
        }`,
        { cause: err, hint: "Check that the state directory is writable and has space" },
      );
    }
    return writer;
  }

  /** Bytes appended so far (including any not yet written to disk). */
  get totalBytes(): number {
    return this.#written + this.#buffered;
  }

  /** The write error that stopped this spool, if any. */
  get error(): unknown {
    return this.#error;
  }

  /** Queues bytes; writes once 64 KiB are queued. O(chunk), no allocation on the hot path. */
  append(bytes: Uint8Array): void {
    if (this.#state !== "open") throw new TypeError("Cannot append to a spool after end()");
    const len = bytes.length;
    if (len === 0) return;
    if (this.#error !== undefined) {
      // Keep counting so `done` tells readers how much was lost.
      this.#written += len;
      return;
    }
    const buffered = this.#buffered;
    if (buffered + len < WRITE_BATCH) {
      this.#buffer ??= new Uint8Array(WRITE_BATCH);
      this.#buffer.set(bytes, buffered);
      this.#buffered = buffered + len;
      return;
    }
    let rest = bytes;
    if (buffered > 0) {
      const take = WRITE_BATCH - buffered;
      this.#buffer!.set(bytes.subarray(0, take), buffered);
      this.#buffered = WRITE_BATCH;
      this.#writeBuffer();
      rest = bytes.subarray(take);
    }
    if (rest.length >= WRITE_BATCH) {
      // Big chunk: straight to disk, no copy.
      this.#write(rest);
    } else if (rest.length > 0) {
      this.#buffer ??= new Uint8Array(WRITE_BATCH);
      this.#buffer.set(rest, 0);
      this.#buffered = rest.length;
    }
  }

  /** Writes queued bytes to disk (no fsync): a crash of the process after this loses nothing. */
  flush(): void {
    if (this.#state !== "open") return;
    this.#writeBuffer();
  }

  /**
   * Flushes and closes the last segment, then writes `done`. Idempotent. No fsync: like the
   * database (WAL, synchronous=NORMAL) the spool survives a crash of the process, not a power
   * loss — an fsync per job would cost more than the whole `echo hi` round trip.
   */
  end(): void {
    if (this.#state !== "open") return;
    this.#writeBuffer();
    this.#state = "ended";
    this.#buffer = undefined;
    const file = this.#file;
    this.#file = undefined;
    file?.close();
    try {
      const done = JSON.stringify({ totalBytes: this.#written, segmentBytes: this.#segmentBytes });
      const tmp = `${this.#dir}/${DONE}.tmp`;
      // Written then renamed: a reader sees no `done` or a whole one.
      Deno.writeFileSync(tmp, encoder.encode(done + "\n"), { mode: 0o600 });
      Deno.renameSync(tmp, `${this.#dir}/${DONE}`);
    } catch (err) {
      log.error("cannot mark spool done", { dir: this.#dir, error: err });
    }
  }

  /** Closes without writing queued bytes or `done`, as a crash would leave it (for tests). */
  abandon(): void {
    if (this.#state !== "open") return;
    this.#state = "abandoned";
    this.#buffer = undefined;
    this.#buffered = 0;
    this.#file?.close();
    this.#file = undefined;
  }

  #writeBuffer(): void {
    const n = this.#buffered;
    if (n === 0) return;
    this.#buffered = 0;
    if (this.#error !== undefined) {
      this.#written += n;
      return;
    }
    this.#write(this.#buffer!.subarray(0, n));
  }

  /** Writes bytes at #written, splitting them across segments. Never throws. */
  #write(bytes: Uint8Array): void {
    const S = this.#segmentBytes;
    let off = 0;
    try {
      while (off < bytes.length) {
        const segment = Math.floor(this.#written / S);
        if (segment !== this.#fileSegment) this.#openSegment(segment);
        const n = Math.min((segment + 1) * S - this.#written, bytes.length - off);
        writeAll(this.#file!, bytes.subarray(off, off + n));
        this.#written += n;
        off += n;
      }
    } catch (err) {
      this.#fail(err);
      this.#written += bytes.length - off;
    }
  }

  /** Closes the current segment, opens segment n and deletes middle segments beyond maxBytes. */
  #openSegment(n: number): void {
    this.#file?.close();
    this.#file = undefined;
    // createNew: a link planted at the path is refused, never followed.
    this.#file = Deno.openSync(segmentPath(this.#dir, n), {
      write: true,
      createNew: true,
      mode: 0o600,
    });
    this.#fileSegment = n;
    const firstKept = n - this.#keepNewest + 1;
    for (; this.#oldestMiddle < firstKept; this.#oldestMiddle++) {
      try {
        removeIfPresent(segmentPath(this.#dir, this.#oldestMiddle));
      } catch (err) {
        log.warn("cannot delete old spool segment", { dir: this.#dir, error: err });
      }
    }
  }

  #fail(err: unknown): void {
    if (this.#error !== undefined) return;
    this.#error = err ?? new Error("unknown spool write error");
    log.error("output spool stopped", { dir: this.#dir, error: err });
    try {
      this.#file?.close();
    } catch {
      // The write already failed; the error above is the one that matters.
    }
    this.#file = undefined;
    this.#fileSegment = -1;
  }
}

/**
 * A run of readable bytes [start, end). A reader arriving from a gap resumes at `resume`, past the
 * continuation bytes of a cut character; `end` backs off a cut character where a gap follows.
 */
interface Range {
  start: number;
  resume: number;
  end: number;
}

/**
 * Reads a spool written earlier (typically after a restart). It is a snapshot of what was on disk
 * when opened and is final: reading to its end gives hasMore false, even for a spool whose writer
 * crashed. Pages follow the rules CursorBuffer follows (readPage and summarize over a ByteSource),
 * so a cursor keeps its meaning across a restart.
 */
export class SpoolReader implements ByteSource {
  readonly #dir: string;
  readonly #jobId: string;
  readonly #segmentBytes: number;
  readonly #total: number;
  readonly #complete: boolean;
  /** Readable bytes, ascending, disjoint, trimmed to whole characters at each gap. */
  readonly #ranges: Range[];
  /** Bytes around the last byteAt, from offset #peekStart: one file read serves a page end. */
  #peek: Uint8Array = new Uint8Array(0);
  #peekStart = 0;

  private constructor(
    dir: string,
    jobId: string,
    segmentBytes: number,
    total: number,
    complete: boolean,
  ) {
    this.#dir = dir;
    this.#jobId = jobId;
    this.#segmentBytes = segmentBytes;
    this.#total = total;
    this.#complete = complete;
    this.#ranges = [];
  }

  /** The job's spool, or undefined when it has none. */
  static open(spoolDir: string, jobId: string): SpoolReader | undefined {
    const dir = jobDir(spoolDir, jobId, "read the output spool");
    const segments = new Map<number, number>();
    let done: { totalBytes: number; segmentBytes: number } | undefined;
    try {
      // A link in place of the directory is not a spool this daemon wrote.
      if (!Deno.lstatSync(dir).isDirectory) return undefined;
      for (const entry of Deno.readDirSync(dir)) {
        if (entry.name === DONE && entry.isFile) {
          done = readDone(`${dir}/${DONE}`);
          continue;
        }
        const m = SEGMENT.exec(entry.name);
        if (!m || !entry.isFile) continue;
        segments.set(Number(m[1]), Deno.lstatSync(`${dir}/${entry.name}`).size);
      }
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return undefined;
      throw new TermadaError(
        "INTERNAL",
        `Cannot read the output spool of job "${jobId}": ${
          err instanceof Error ? err.message : String(err)
        }`,
        { cause: err },
      );
    }

    // The segment size: recorded in `done`; after a crash, segment 0 is full whenever a later
    // segment exists, so its size is the segment size.
    let S = done?.segmentBytes;
    if (S === undefined) {
      const size0 = segments.get(0) ?? 0;
      if (size0 === 0) {
        // No head to learn the segment size from: only segment 0 can be placed.
        for (const n of segments.keys()) {
          if (n > 0) {
            log.warn("spool without head or done: later segments ignored", { dir });
            segments.clear();
            break;
          }
        }
      }
      S = Math.max(size0, 1);
    }

    // Raw ranges from the segments present, merged where contiguous.
    const raw: { start: number; end: number }[] = [];
    for (const n of [...segments.keys()].sort((a, b) => a - b)) {
      const start = n * S;
      const end = start + Math.min(segments.get(n)!, S);
      if (end === start || !Number.isSafeInteger(end)) continue;
      const last = raw[raw.length - 1];
      if (last && last.end === start) last.end = end;
      else raw.push({ start, end });
    }
    let total = raw.length > 0 ? raw[raw.length - 1]!.end : 0;
    if (done) {
      total = done.totalBytes;
      // Never read beyond the recorded end (a damaged spool); missing bytes become a gap.
      for (const r of raw) r.end = Math.min(r.end, total);
    }

    const reader = new SpoolReader(dir, jobId, S, total, done !== undefined);
    reader.#trim(raw.filter((r) => r.end > r.start));
    return reader;
  }

  /** Bytes the job wrote: from `done`, or after a crash, up to the end of the last segment. */
  get totalBytes(): number {
    return this.#total;
  }

  /** True when the writer ended cleanly (`done` exists). */
  get complete(): boolean {
    return this.#complete;
  }

  /** A snapshot is final: always true (see complete for how the writer stopped). */
  get ended(): boolean {
    return true;
  }

  /** One page from cursor (default: the start); same rules as CursorBuffer.read on ended output. */
  read(cursor?: string, maxBytes: number = MAX_PAGE_BYTES): Page {
    return readPage(this, cursor, maxBytes);
  }

  /** Head + tail with the omitted byte count; same rules as CursorBuffer.summary on ended output. */
  summary(headLimit: number, tailLimit: number): Summary {
    return summarize(this, { headLimit, tailLimit });
  }

  /**
   * Moves range edges that border a gap off cut characters, as CursorBuffer does with its head
   * (ends back off an incomplete character) and its ring start (skips continuation bytes).
   */
  #trim(raw: { start: number; end: number }[]): void {
    const total = this.#total;
    for (const { start, end: rawEnd } of raw) {
      let end = rawEnd;
      let resume = start;
      if (start > 0) {
        const b = this.#bytes(start, Math.min(end, start + 3));
        let k = 0;
        while (k < b.length && isCont(b[k]!)) k++;
        resume += k;
      }
      if (end < total && end > start) {
        const from = Math.max(start, end - 4);
        end = from + completeEnd(this.#bytes(from, end), 0, end - from);
      }
      if (end > start) this.#ranges.push({ start, resume: Math.min(resume, end), end });
    }
  }

  #rangeOf(x: number): Range | undefined {
    for (const r of this.#ranges) if (x >= r.start && x < r.end) return r;
    return undefined;
  }

  // ByteSource: how readPage and summarize see the ranges on disk.

  /** Offset x can be read (or is the end). */
  available(x: number): boolean {
    return x === this.#total || this.#rangeOf(x) !== undefined;
  }

  /** Where readable bytes from x stop being contiguous (x itself if x cannot be read). */
  contiguousEnd(x: number): number {
    return this.#rangeOf(x)?.end ?? x;
  }

  /** First readable offset after x (the end when nothing after x is left). */
  gapEnd(x: number): number {
    for (const r of this.#ranges) if (r.start > x) return r.resume;
    return this.#total;
  }

  /** The last range when it reaches the end (a damaged spool may have lost its last bytes). */
  lastRun(): Range | undefined {
    const last = this.#ranges[this.#ranges.length - 1];
    return last?.end === this.#total ? last : undefined;
  }

  /** The byte at a readable offset; reads a few bytes around it, within its range, at once. */
  byteAt(x: number): number {
    const i = x - this.#peekStart;
    if (i >= 0 && i < this.#peek.length) return this.#peek[i]!;
    const r = this.#rangeOf(x);
    const from = r ? Math.max(r.start, x - PEEK) : x;
    this.#peek = this.#bytes(from, r ? Math.min(r.end, x + PEEK) : x + 1);
    this.#peekStart = from;
    return this.#peek[x - from]!;
  }

  /** Text of readable, contiguous bytes [from, to). */
  decode(from: number, to: number): string {
    return decoder.decode(this.#bytes(from, to));
  }

  /** Bytes [from, to) from the segment files; they must be on disk. */
  #bytes(from: number, to: number): Uint8Array {
    const out = new Uint8Array(Math.max(0, to - from));
    const S = this.#segmentBytes;
    let pos = from;
    while (pos < to) {
      const n = Math.floor(pos / S);
      const inSegment = pos - n * S;
      const want = Math.min(to, (n + 1) * S) - pos;
      let file: Deno.FsFile;
      try {
        file = Deno.openSync(segmentPath(this.#dir, n), { read: true });
      } catch (err) {
        throw new TermadaError(
          err instanceof Deno.errors.NotFound ? "NOT_FOUND" : "INTERNAL",
          `Cannot read the output of job "${this.#jobId}": its spool changed on disk`,
          { cause: err, hint: "Read it again from the start" },
        );
      }
      try {
        if (inSegment > 0) file.seekSync(inSegment, Deno.SeekMode.Start);
        let got = 0;
        while (got < want) {
          const r = file.readSync(out.subarray(pos - from + got, pos - from + want));
          if (r === null || r === 0) {
            throw new TermadaError(
              "INTERNAL",
              `Cannot read the output of job "${this.#jobId}": segment ${n} is shorter than expected`,
              { hint: "Read it again from the start" },
            );
          }
          got += r;
        }
      } finally {
        file.close();
      }
      pos += want;
    }
    return out;
  }
}

/** Parses `done`; undefined when it is damaged (treated as a crashed writer). */
function readDone(path: string): { totalBytes: number; segmentBytes: number } | undefined {
  try {
    const v = JSON.parse(new TextDecoder().decode(Deno.readFileSync(path)));
    if (
      Number.isSafeInteger(v?.totalBytes) && v.totalBytes >= 0 &&
      Number.isSafeInteger(v?.segmentBytes) && v.segmentBytes >= MIN_SEGMENT_BYTES
    ) {
      return { totalBytes: v.totalBytes, segmentBytes: v.segmentBytes };
    }
  } catch {
    // Unreadable or not JSON: same as no `done`.
  }
  return undefined;
}

/** Deletes a job's spool; nothing there is fine. */
export function removeSpool(spoolDir: string, jobId: string): void {
  const dir = jobDir(spoolDir, jobId, "remove the output spool");
  try {
    Deno.removeSync(dir, { recursive: true });
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw new TermadaError(
      "INTERNAL",
      `Cannot remove the output spool of job "${jobId}": ${
        err instanceof Error ? err.message : String(err)
      }`,
      { cause: err },
    );
  }
}

/**
 * Deletes the spool of every job `keep` says no to; returns how many were deleted. Only
 * directories named like job ids are considered: anything else in spoolDir is left alone.
 */
export function pruneSpools(spoolDir: string, keep: (jobId: string) => boolean): number {
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(spoolDir)];
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return 0;
    throw new TermadaError(
      "INTERNAL",
      `Cannot list output spools in "${spoolDir}": ${
        err instanceof Error ? err.message : String(err)
      }`,
      { cause: err },
    );
  }
  let removed = 0;
  for (const entry of entries) {
    if (!entry.isDirectory || !JOB_ID.test(entry.name) || keep(entry.name)) continue;
    removeSpool(spoolDir, entry.name);
    removed++;
  }
  return removed;
}

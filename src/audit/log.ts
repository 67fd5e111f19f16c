/**
 * The writer of the audit log: one process appends hash-chained records to JSON-lines segments,
 * each one written and fsynced before `append` returns, so a caller that runs its side effect
 * after `append` can never act without a durable record. See docs/AUDIT.md.
 *
 * Everything is synchronous on purpose (no threads from Deno's blocking pool, and an append is on
 * disk before the caller goes on).
 */
import { type Clock, invalidArgument, logger, systemClock, TermadaError } from "../shared/mod.ts";
import { canonicalJson } from "./canonical.ts";
import { listDir, readFirstLine, readLastLines, removeIfPresent, syncDir } from "./_files.ts";
import { verifyAudit } from "./verify.ts";
import {
  ACTOR_KINDS,
  AUDIT_ACTOR,
  type AuditActor,
  type AuditRecord,
  type ChainHead,
  checkLineAlone,
  type Checkpoint,
  CHECKPOINT_EVENT,
  CHECKPOINT_FILE,
  CHECKPOINT_TMP,
  checkpointDataJson,
  checkpointText,
  confirmCheckpoint,
  encoder,
  EVENT_PATTERN,
  GENESIS,
  MAX_ACTOR_ID_LENGTH,
  MAX_EVENT_LENGTH,
  parseCheckpoint,
  recordHash,
  recordLine,
  type RecordParts,
  RECOVERED_EVENT,
  RESERVED_EVENT_PREFIX,
  segmentName,
  sha256Hex,
  walkSegment,
} from "./record.ts";

export interface AuditOptions {
  /** A segment is closed and the next one started before it would grow past this (default 8 MiB). */
  maxSegmentBytes?: number;
  /** Segments kept; older ones are pruned and replaced by checkpoint.json (default 64). */
  keepSegments?: number;
  /** Applied to every string value in `data` before hashing and writing (default: none). */
  redact?: (text: string) => string;
  clock?: Clock;
  /** fsync each record before append returns (default true). Off only for tests and benchmarks. */
  fsync?: boolean;
}

/** The file operations of the write path; tests inject failures here (see openAuditLog). */
export interface AuditIo {
  /** Writes some of `bytes`, returns how many (FsFile.writeSync semantics). */
  write(file: Deno.FsFile, bytes: Uint8Array): number;
  /** Flushes the file's data to the disk (fdatasync). */
  sync(file: Deno.FsFile): void;
  /** The same, off the main thread (Deno's blocking pool): for group syncs. */
  syncAsync?(file: Deno.FsFile): Promise<void>;
}

export const SYSTEM_IO: AuditIo = {
  write: (file, bytes) => file.writeSync(bytes),
  sync: (file) => file.syncDataSync(),
  syncAsync: (file) => file.syncData(),
};

/**
 * How long a lazily written record may wait for its group sync (records written meanwhile share
 * it). A crash of the daemon loses nothing written (the page cache has it); only a crash of the
 * machine inside this window can lose a lazily written record.
 */
export const LAZY_SYNC_MS = 20;

/**
 * A durable append this long after the previous one (after its end, when that one was synced
 * inline) is "alone" and synced inline; closer ones join a group sync (one fdatasync for all of
 * them, off the main thread).
 */
export const LONE_INTENT_GAP_MS = 0.25;

export const DEFAULT_MAX_SEGMENT_BYTES = 8 * 1024 * 1024;
export const MIN_SEGMENT_BYTES = 1024;
export const MAX_SEGMENT_BYTES = 1024 * 1024 * 1024;
export const DEFAULT_KEEP_SEGMENTS = 64;
export const MAX_KEEP_SEGMENTS = 1_000_000;
/** Largest canonical JSON of one record's data, in bytes. */
export const MAX_DATA_BYTES = 1024 * 1024;
/** Most records tail() returns. */
export const MAX_TAIL = 10_000;

const HINT_BROKEN =
  "Run `termada audit verify` to see the damage. Never edit a segment: move the " +
  "damaged file out of the audit directory and keep it as evidence, then start Termada again; " +
  "it continues the chain from the last intact segment";
const HINT_WRITE = "Nothing was run. Check the audit directory (disk space, permissions, a " +
  "removed or replaced directory), then restart Termada to reopen the log";
// deno-lint-ignore no-control-regex -- matching control characters is the point
const CONTROL_CHARS = /[\x00-\x1f\x7f]/;

const log = logger("audit");

/** Directories (real paths) with an open AuditLog in this process: one writer per directory. */
const OPEN_DIRS = new Set<string>();

interface Resolved {
  maxSegmentBytes: number;
  keepSegments: number;
  redact: ((text: string) => string) | undefined;
  clock: Clock;
  fsync: boolean;
}

function resolveOptions(o: AuditOptions): Resolved {
  const int = (v: number | undefined, name: string, def: number, min: number, max: number) => {
    if (v === undefined) return def;
    if (!Number.isSafeInteger(v) || v < min || v > max) {
      throw new RangeError(`Audit option ${name} must be an integer from ${min} to ${max}: ${v}`);
    }
    return v;
  };
  if (o.redact !== undefined && typeof o.redact !== "function") {
    throw new TypeError("Audit option redact must be a function");
  }
  return {
    maxSegmentBytes: int(
      o.maxSegmentBytes,
      "maxSegmentBytes",
      DEFAULT_MAX_SEGMENT_BYTES,
      MIN_SEGMENT_BYTES,
      MAX_SEGMENT_BYTES,
    ),
    keepSegments: int(o.keepSegments, "keepSegments", DEFAULT_KEEP_SEGMENTS, 1, MAX_KEEP_SEGMENTS),
    redact: o.redact,
    clock: o.clock ?? systemClock,
    fsync: o.fsync ?? true,
  };
}

function unavailable(
  message: string,
  hint: string,
  cause?: unknown,
  details?: Record<string, unknown>,
): TermadaError {
  return new TermadaError("AUDIT_UNAVAILABLE", message, {
    retriable: false,
    hint,
    cause,
    details,
  });
}

/** A break found by open: refuses with the first broken seq and why. */
function brokenChain(
  dir: string,
  seq: number | null,
  segment: string,
  line: number,
  reason: string,
): TermadaError {
  const where = seq === null
    ? `"${segment}"${line > 0 ? ` line ${line}` : ""}`
    : `record ${seq} ("${segment}"${line > 0 ? ` line ${line}` : ""})`;
  return unavailable(
    `Cannot open the audit log in "${dir}": the chain is broken at ${where}: ${reason}`,
    HINT_BROKEN,
    undefined,
    { broken: { seq, segment, line, reason } },
  );
}

/** Creates the directory (0700) or checks the existing one: a real directory, private. */
function prepareDir(dir: string): void {
  try {
    Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const st = Deno.lstatSync(dir);
    if (!st.isDirectory) {
      throw new Error(st.isSymlink ? "it is a symbolic link" : "it is not a directory");
    }
    if (st.mode !== null && (st.mode & 0o077) !== 0) Deno.chmodSync(dir, 0o700);
  } catch (err) {
    throw unavailable(
      `Cannot open the audit log in "${dir}": ${(err as Error).message}`,
      "The audit directory must be a directory this user can write (not a link); check the " +
        "state directory's path and permissions",
      err,
    );
  }
}

/** Where open continues: found by checking the tail of the chain (last segment + checkpoint). */
interface TailState {
  checkpoint: Checkpoint | null;
  firstSegment: number;
  segment: number;
  exists: boolean;
  head: ChainHead;
  /** Size of the last segment's good lines. */
  goodBytes: number;
  torn: { line: number; bytes: number; sha256: string } | null;
  /** Segments already covered by the checkpoint (an interrupted prune): deleted at open. */
  leftovers: number[];
}

function readTail(dir: string): TailState {
  const listing = listDir(dir);
  const broken = (seq: number | null, segment: string, line: number, reason: string) =>
    brokenChain(dir, seq, segment, line, reason);
  let checkpoint: Checkpoint | null = null;
  if (listing.checkpoint) {
    const parsed = parseCheckpoint(Deno.readFileSync(`${dir}/${CHECKPOINT_FILE}`));
    if (typeof parsed === "string") throw broken(null, CHECKPOINT_FILE, 1, parsed);
    checkpoint = parsed;
  }
  const firstSegment = checkpoint === null ? 1 : checkpoint.prunedThrough + 1;
  const live = listing.segments.filter((n) => n >= firstSegment).sort((a, b) => a - b);
  const leftovers = listing.segments.filter((n) => n < firstSegment);
  const start: ChainHead = checkpoint === null
    ? { seq: 0, hash: GENESIS }
    : { seq: checkpoint.seq, hash: checkpoint.hash };
  const last = live.at(-1);
  if (last === undefined) {
    if (checkpoint !== null) {
      throw broken(
        checkpoint.seq + 1,
        segmentName(firstSegment),
        0,
        `missing segment: ${CHECKPOINT_FILE} continues in "${segmentName(firstSegment)}", ` +
          "which is not in the directory",
      );
    }
    const none = { head: start, goodBytes: 0, torn: null, leftovers };
    return { checkpoint, firstSegment, segment: 1, exists: false, ...none };
  }

  let base = start;
  if (last > firstSegment) {
    const prev = segmentName(last - 1);
    if (!live.includes(last - 1)) {
      throw broken(null, prev, 0, "missing segment: the segment before the last one is gone");
    }
    const { lines, tornBytes } = readLastLines(`${dir}/${prev}`, 1);
    const line = lines[0];
    if (tornBytes > 0 || line === undefined) {
      throw broken(
        null,
        prev,
        0,
        tornBytes > 0
          ? "truncated record: the segment ends inside a record"
          : "empty segment: only the last segment may be empty",
      );
    }
    const check = checkLineAlone(line);
    if (!check.ok) throw broken(check.seq, prev, 0, check.reason);
    base = { seq: check.record.seq, hash: check.record.hash };
  }

  const name = segmentName(last);
  const bytes = Deno.readFileSync(`${dir}/${name}`);
  const walk = walkSegment(
    bytes,
    base,
    checkpoint === null ? undefined : (record) => {
      if (record.seq !== checkpoint.recordSeq) return null;
      const confirmed = confirmCheckpoint(checkpoint, record);
      return confirmed.ok ? null : confirmed;
    },
  );
  if (walk.broken !== null) {
    throw broken(walk.broken.seq, name, walk.broken.line, walk.broken.reason);
  }
  if (checkpoint !== null && checkpoint.recordSeq > walk.head.seq) {
    throw broken(
      walk.head.seq + 1,
      name,
      walk.records + 1,
      `truncated tail: ${CHECKPOINT_FILE} was announced by record ${checkpoint.recordSeq}, ` +
        `but the log ends at seq ${walk.head.seq}`,
    );
  }
  return {
    checkpoint,
    firstSegment,
    segment: last,
    exists: true,
    head: walk.head,
    goodBytes: walk.goodBytes,
    torn: walk.torn === null
      ? null
      : { ...walk.torn, sha256: sha256Hex(bytes.subarray(walk.goodBytes)) },
    leftovers,
  };
}

function fileId(st: Deno.FileInfo): string {
  return `${st.dev}:${st.ino}`;
}

interface SyncWaiter {
  seq: number;
  resolve: () => void;
  reject: (e: unknown) => void;
}

let openWithIo: (dir: string, options: AuditOptions, io: AuditIo) => AuditLog;

/**
 * The append-only, hash-chained audit log of one directory. One writer per directory: the daemon's
 * lock guarantees one process, and a second open of the same directory in this process is refused.
 * The owner closes it (`close()` is idempotent; `using log = AuditLog.open(…)` works).
 */
export class AuditLog {
  readonly #dir: string;
  readonly #key: string;
  readonly #o: Resolved;
  readonly #io: AuditIo;
  #file: Deno.FsFile | null;
  #fileId: string;
  #segment: number;
  #segmentBytes: number;
  #firstSegment: number;
  #head: ChainHead;
  #failure: TermadaError | null = null;
  #closed = false;
  /** seq of the last record known to be on disk (fdatasync done). */
  #syncedSeq = 0;
  #syncing: Promise<void> | null = null;
  #syncWaiters: SyncWaiter[] = [];
  #lazyTimer: ReturnType<typeof setTimeout> | undefined;
  /** When the last durable append was written, or asked for if it joined a group (mono ms). */
  #lastDurableAt = -Infinity;

  static {
    openWithIo = (dir, options, io) => AuditLog.#open(dir, options, io);
  }

  private constructor(
    dir: string,
    key: string,
    o: Resolved,
    io: AuditIo,
    file: Deno.FsFile,
    id: string,
    tail: TailState,
  ) {
    this.#dir = dir;
    this.#key = key;
    this.#o = o;
    this.#io = io;
    this.#file = file;
    this.#fileId = id;
    this.#segment = tail.segment;
    this.#segmentBytes = tail.goodBytes;
    this.#firstSegment = tail.firstSegment;
    this.#head = tail.head;
    this.#syncedSeq = tail.head.seq;
  }

  /**
   * Opens (or creates) the log in `dir` and checks the tail of the chain it continues from: the last
   * segment, its link to the segment before, and checkpoint.json. A broken tail is refused with
   * AUDIT_UNAVAILABLE naming the first broken seq. A torn last line (a crash inside an append that
   * never returned) is cut off and the cut is itself recorded as an `audit.recovered` record.
   */
  static open(dir: string, options: AuditOptions = {}): AuditLog {
    return AuditLog.#open(dir, options, SYSTEM_IO);
  }

  static #open(dir: string, options: AuditOptions, io: AuditIo): AuditLog {
    if (typeof dir !== "string" || dir === "") {
      throw new TypeError("An audit directory is required");
    }
    const o = resolveOptions(options);
    prepareDir(dir);
    const key = Deno.realPathSync(dir);
    if (OPEN_DIRS.has(key)) {
      throw unavailable(
        `Cannot open the audit log in "${dir}": it is already open in this process`,
        "Share the one AuditLog; close it before opening the directory again",
      );
    }
    let tail: TailState;
    let file: Deno.FsFile;
    let id: string;
    try {
      tail = readTail(dir);
      file = AuditLog.#openSegment(dir, tail, o, io);
      try {
        id = fileId(file.statSync());
      } catch (err) {
        file.close();
        throw err;
      }
    } catch (err) {
      if (err instanceof TermadaError) throw err;
      throw unavailable(
        `Cannot open the audit log in "${dir}": ${(err as Error).message}`,
        HINT_WRITE,
        err,
      );
    }
    OPEN_DIRS.add(key);
    const auditLog = new AuditLog(dir, key, o, io, file, id, tail);
    try {
      auditLog.#finishOpen(tail);
    } catch (err) {
      auditLog.close();
      throw err;
    }
    return auditLog;
  }

  /** Opens the segment to continue (cutting a torn tail) or creates the first one. */
  static #openSegment(dir: string, tail: TailState, o: Resolved, io: AuditIo): Deno.FsFile {
    const path = `${dir}/${segmentName(tail.segment)}`;
    if (!tail.exists) {
      const file = Deno.openSync(path, { createNew: true, write: true, append: true, mode: 0o600 });
      if (o.fsync) syncDir(dir);
      return file;
    }
    const file = Deno.openSync(path, { write: true, append: true });
    try {
      const st = file.statSync();
      if (st.mode !== null && (st.mode & 0o077) !== 0) Deno.chmodSync(path, 0o600);
      if (tail.torn !== null) {
        file.truncateSync(tail.goodBytes);
        io.sync(file);
      }
      return file;
    } catch (err) {
      file.close();
      throw err;
    }
  }

  /** Completes an interrupted prune, drops a stale temp file, records a torn-tail cut. */
  #finishOpen(tail: TailState): void {
    let removed = false;
    for (const n of tail.leftovers) removed = removeIfPresent(this.#path(n)) || removed;
    removed = removeIfPresent(`${this.#dir}/${CHECKPOINT_TMP}`) || removed;
    if (removed && this.#o.fsync) syncDir(this.#dir);
    if (tail.leftovers.length > 0) {
      log.info("finished an interrupted prune", {
        dir: this.#dir,
        segments: tail.leftovers.length,
      });
    }
    if (tail.torn !== null) {
      const segment = segmentName(tail.segment);
      log.warn("cut a torn last record (an append that never returned)", {
        segment,
        line: tail.torn.line,
        bytes: tail.torn.bytes,
      });
      this.#guarded(() =>
        this.#put(
          AUDIT_ACTOR,
          RECOVERED_EVENT,
          canonicalJson({
            reason: "truncated record",
            segment,
            line: tail.torn!.line,
            discardedBytes: tail.torn!.bytes,
            discardedSha256: tail.torn!.sha256,
          }),
          this.#now(),
        )
      );
    }
  }

  /** False after a write failure (until reopened) and after close. */
  get healthy(): boolean {
    return !this.#closed && this.#failure === null;
  }

  /** seq of the last record written (0 for an empty log). */
  get lastSeq(): number {
    return this.#head.seq;
  }

  /** hash of the last record written (the genesis hash for an empty log): an anchor to keep elsewhere. */
  get lastHash(): string {
    return this.#head.hash;
  }

  /**
   * Appends one record and returns it once it is written and fsynced: run the side effect only
   * after this returns. Bad arguments throw INVALID_ARGUMENT or TypeError and write nothing. Any
   * write failure latches the log: this and every later append throw AUDIT_UNAVAILABLE (retriable
   * false) until the log is closed and opened again.
   */
  append(actor: AuditActor, event: string, data: Record<string, unknown> = {}): AuditRecord {
    return this.#append(actor, event, data, true);
  }

  /**
   * Appends one record without waiting for the disk: it is written (a crash of the daemon keeps
   * it) and becomes durable with the next group sync, at most LAZY_SYNC_MS later. For records
   * of outcomes, not for intents that must be durable before a side effect.
   */
  write(actor: AuditActor, event: string, data: Record<string, unknown> = {}): AuditRecord {
    const rec = this.#append(actor, event, data, false);
    this.#scheduleLazySync();
    return rec;
  }

  /**
   * Appends one record and resolves once it is on disk. The fdatasync runs off the main thread
   * and is shared by every record written meanwhile (group commit), so concurrent callers pay
   * one sync between them. Run the side effect only after this resolves.
   */
  async appendDurable(
    actor: AuditActor,
    event: string,
    data: Record<string, unknown> = {},
  ): Promise<AuditRecord> {
    const alone = this.#syncing === null && this.#syncWaiters.length === 0 &&
      this.#o.clock.mono() - this.#lastDurableAt > LONE_INTENT_GAP_MS;
    // A lone intent is synced on this thread: no hand-off to the blocking pool and back, which
    // costs more than the fdatasync itself here. Intents that come close together share one
    // sync off the main thread instead, so concurrent agents do not wait on each other. "Close"
    // counts from the end of the previous one: intents that queued up while an inline sync held
    // the thread (a slow disk) join one group sync instead of each syncing alone in turn.
    if (alone) {
      try {
        return this.#append(actor, event, data, true);
      } finally {
        this.#lastDurableAt = this.#o.clock.mono();
      }
    }
    this.#lastDurableAt = this.#o.clock.mono();
    const rec = this.#append(actor, event, data, false);
    await this.durable(rec.seq);
    return rec;
  }

  /** Resolves once every record up to `seq` (default: the last written) is on disk. */
  durable(seq: number = this.#head.seq): Promise<void> {
    if (seq <= this.#syncedSeq || !this.#o.fsync) return Promise.resolve();
    if (this.#failure !== null) return Promise.reject(this.#failure);
    const p = Promise.withResolvers<void>();
    this.#syncWaiters.push({ seq, resolve: p.resolve, reject: p.reject });
    this.#kickSync();
    return p.promise;
  }

  #scheduleLazySync(): void {
    if (!this.#o.fsync || this.#lazyTimer !== undefined || this.#closed) return;
    this.#lazyTimer = setTimeout(() => {
      this.#lazyTimer = undefined;
      this.durable().catch(() => {/* latched: the next append reports it */});
    }, LAZY_SYNC_MS);
  }

  /** One sync at a time; when it ends, the next covers everything written meanwhile. */
  #kickSync(): void {
    if (this.#syncing !== null || this.#syncWaiters.length === 0) return;
    const file = this.#file;
    const upTo = this.#head.seq;
    if (file === null) {
      this.#settleWaiters(
        upTo,
        this.#failure ?? unavailable("The audit log is closed", HINT_WRITE),
      );
      return;
    }
    const run = this.#io.syncAsync
      ? this.#io.syncAsync(file)
      : Promise.resolve().then(() => this.#io.sync(file));
    this.#syncing = run.then(
      () => {
        this.#syncedSeq = Math.max(this.#syncedSeq, upTo);
        this.#settleWaiters(this.#syncedSeq);
      },
      (err) => {
        // A rotation or close synced the file itself before closing it: nothing is lost.
        if (this.#syncedSeq >= upTo) {
          this.#settleWaiters(this.#syncedSeq);
          return;
        }
        const failure = this.#latch(err);
        this.#settleWaiters(this.#syncedSeq, failure);
      },
    ).finally(() => {
      this.#syncing = null;
      this.#kickSync();
    });
  }

  #settleWaiters(synced: number, failure?: TermadaError): void {
    const rest: SyncWaiter[] = [];
    for (const w of this.#syncWaiters) {
      if (w.seq <= synced) w.resolve();
      else if (failure) w.reject(failure);
      else rest.push(w);
    }
    this.#syncWaiters = rest;
  }

  #append(
    actor: AuditActor,
    event: string,
    data: Record<string, unknown>,
    sync: boolean,
  ): AuditRecord {
    this.#assertWritable();
    const who = validActor(actor, event);
    validEvent(event);
    if (typeof data !== "object" || data === null || Array.isArray(data)) {
      throw new TypeError(`Cannot audit "${event}": data must be a plain object`);
    }
    const dataJson = canonicalJson(data, this.#o.redact);
    const size = encoder.encode(dataJson).length;
    if (size > MAX_DATA_BYTES) {
      throw invalidArgument(
        `Cannot audit "${event}": its data is ${size} bytes, the maximum is ${MAX_DATA_BYTES}`,
        "Record a digest or a reference instead of the content",
      );
    }
    const time = this.#now();
    return this.#guarded(() => this.#put(who, event, dataJson, time, sync));
  }

  /** The last n records (0 ≤ n ≤ 10 000), oldest first, read back from disk and checked. */
  tail(n: number): AuditRecord[] {
    if (!Number.isSafeInteger(n) || n < 0 || n > MAX_TAIL) {
      throw invalidArgument(`Cannot read the last ${n} audit records: n must be 0 to ${MAX_TAIL}`);
    }
    if (this.#closed) throw unavailable("Cannot read the audit log: it is closed", "Open it again");
    const chunks: AuditRecord[][] = [];
    let need = n;
    for (let seg = this.#segment; seg >= this.#firstSegment && need > 0; seg--) {
      const name = segmentName(seg);
      let lines: Uint8Array[];
      try {
        lines = readLastLines(this.#path(seg), need).lines;
      } catch (err) {
        throw unavailable(
          `Cannot read the audit log in "${this.#dir}": ${(err as Error).message}`,
          HINT_BROKEN,
          err,
        );
      }
      const records: AuditRecord[] = [];
      for (const line of lines) {
        const check = checkLineAlone(line);
        if (!check.ok) {
          throw unavailable(
            `Cannot read audit record ${check.seq} in "${name}": ${check.reason}`,
            HINT_BROKEN,
          );
        }
        records.push(check.record);
      }
      chunks.unshift(records);
      need -= records.length;
    }
    return chunks.flat();
  }

  /** Closes the current segment. Idempotent; a closed log refuses appends. */
  close(): void {
    if (this.#closed) return;
    clearTimeout(this.#lazyTimer);
    this.#lazyTimer = undefined;
    this.#syncNow();
    this.#closed = true;
    OPEN_DIRS.delete(this.#key);
    this.#closeFile();
    this.#settleWaiters(this.#syncedSeq, unavailable("The audit log is closed", HINT_WRITE));
  }

  /** Syncs what was written lazily, on this thread (close, rotation). */
  #syncNow(): void {
    if (this.#file === null || this.#syncedSeq >= this.#head.seq || this.#failure !== null) return;
    try {
      if (this.#o.fsync) this.#io.sync(this.#file);
      this.#syncedSeq = this.#head.seq;
      this.#settleWaiters(this.#syncedSeq);
    } catch (err) {
      this.#latch(err);
    }
  }

  /**
   * Reopens a log that latched unhealthy after a write failure, once the cause is gone: the whole
   * chain is verified first (a broken chain stays refused), then the last segment is reopened
   * (a torn last record is cut and recorded) and appends work again. Returns what was verified.
   */
  resume(): { failure: string; verified_records: number } {
    if (this.#closed) {
      throw unavailable("Cannot resume the audit log: it is closed", "Restart Termada");
    }
    const failure = this.#failure;
    if (failure === null) return { failure: "", verified_records: 0 };
    const v = verifyAudit(this.#dir);
    if (!v.ok) {
      const b = v.firstBroken!;
      throw unavailable(
        `Cannot resume the audit log in "${this.#dir}": the chain is broken at ` +
          `${b.seq === null ? `"${b.segment}"` : `record ${b.seq}`}: ${b.reason}`,
        HINT_BROKEN,
        undefined,
        { broken: b },
      );
    }
    let tail: TailState;
    let file: Deno.FsFile;
    try {
      tail = readTail(this.#dir);
      file = AuditLog.#openSegment(this.#dir, tail, this.#o, this.#io);
      this.#fileId = fileId(file.statSync());
    } catch (err) {
      if (err instanceof TermadaError) throw err;
      throw unavailable(
        `Cannot resume the audit log in "${this.#dir}": ${(err as Error).message}`,
        HINT_WRITE,
        err,
      );
    }
    this.#closeFile();
    this.#file = file;
    this.#segment = tail.segment;
    this.#segmentBytes = tail.goodBytes;
    this.#firstSegment = tail.firstSegment;
    this.#head = tail.head;
    this.#syncedSeq = tail.head.seq;
    this.#failure = null;
    this.#finishOpen(tail);
    log.info("audit log resumed", { dir: this.#dir, after: failure.message });
    return { failure: failure.message, verified_records: v.records };
  }

  [Symbol.dispose](): void {
    this.close();
  }

  #path(n: number): string {
    return `${this.#dir}/${segmentName(n)}`;
  }

  #now(): string {
    return new Date(this.#o.clock.now()).toISOString();
  }

  #closeFile(): void {
    const file = this.#file;
    this.#file = null;
    try {
      file?.close();
    } catch {
      // Already closed by a failed rotation: nothing left to release.
    }
  }

  #assertWritable(): void {
    if (this.#closed) {
      throw unavailable(
        `Cannot write to the audit log in "${this.#dir}": it is closed`,
        "Nothing was run. Open the log again",
      );
    }
    if (this.#failure !== null) {
      throw unavailable(
        `Cannot write to the audit log in "${this.#dir}": it stopped after a write failure ` +
          `(${this.#failure.message})`,
        HINT_WRITE,
        this.#failure,
      );
    }
  }

  /** Runs a write; any failure latches the log unhealthy and becomes AUDIT_UNAVAILABLE. */
  #guarded<T>(write: () => T): T {
    try {
      return write();
    } catch (err) {
      throw this.#latch(err);
    }
  }

  /** The first write or sync failure latches the log unhealthy until `resume`. */
  #latch(err: unknown): TermadaError {
    if (this.#failure === null) {
      const why = err instanceof Error ? err.message : String(err);
      this.#failure = unavailable(
        `Cannot write to the audit log in "${this.#dir}": ${why}`,
        HINT_WRITE,
        err,
      );
      log.error("audit log stopped after a write failure", { dir: this.#dir, error: why });
      this.#closeFile();
    }
    return this.#failure;
  }

  /** Builds, writes and fsyncs one record, rotating first when the segment would overflow. */
  #put(
    actor: AuditActor,
    event: string,
    dataJson: string,
    time: string,
    sync = true,
  ): AuditRecord {
    const build = () => {
      const parts: RecordParts = { seq: this.#head.seq + 1, time, actor, event, dataJson };
      const hash = recordHash(this.#head.hash, parts);
      const bytes = encoder.encode(recordLine(parts, this.#head.hash, hash) + "\n");
      return { parts, prev: this.#head.hash, hash, bytes };
    };
    let rec = build();
    if (
      this.#segmentBytes > 0 && this.#segmentBytes + rec.bytes.length > this.#o.maxSegmentBytes
    ) {
      this.#rotate();
      rec = build();
    }
    this.#write(rec.bytes, sync);
    this.#head = { seq: rec.parts.seq, hash: rec.hash };
    if (sync && this.#o.fsync) {
      this.#syncedSeq = rec.parts.seq;
      this.#settleWaiters(this.#syncedSeq);
    }
    return {
      seq: rec.parts.seq,
      time,
      actor: { kind: actor.kind, id: actor.id },
      event,
      data: JSON.parse(dataJson),
      prev: rec.prev,
      hash: rec.hash,
    };
  }

  #write(bytes: Uint8Array, sync: boolean): void {
    const file = this.#file;
    if (file === null) throw new Error("the segment is not open");
    let off = 0;
    while (off < bytes.length) {
      const n = this.#io.write(file, bytes.subarray(off));
      if (!(n > 0)) throw new Error("a write made no progress");
      off += n;
    }
    this.#segmentBytes += bytes.length;
    if (sync && this.#o.fsync) this.#io.sync(file);
    // Written to an open file that is no longer in the directory (removed or replaced) is not
    // written to the log: say so before the caller acts.
    const path = this.#path(this.#segment);
    let st: Deno.FileInfo;
    try {
      st = Deno.lstatSync(path);
    } catch (err) {
      throw new Error(`"${segmentName(this.#segment)}" is no longer in the directory`, {
        cause: err,
      });
    }
    if (fileId(st) !== this.#fileId) {
      throw new Error(`"${segmentName(this.#segment)}" was replaced by another file`);
    }
  }

  /** Starts the next segment; prunes the oldest ones when more than keepSegments remain. */
  #rotate(): void {
    // Lazily written records of the closing segment reach the disk before it is closed.
    if (this.#o.fsync && this.#file !== null && this.#syncedSeq < this.#head.seq) {
      this.#io.sync(this.#file);
      this.#syncedSeq = this.#head.seq;
      this.#settleWaiters(this.#syncedSeq);
    }
    const next = this.#segment + 1;
    const file = Deno.openSync(this.#path(next), {
      createNew: true,
      write: true,
      append: true,
      mode: 0o600,
    });
    this.#closeFile();
    this.#file = file;
    this.#fileId = fileId(file.statSync());
    this.#segment = next;
    this.#segmentBytes = 0;
    if (this.#o.fsync) syncDir(this.#dir);
    const through = next - this.#o.keepSegments;
    if (through >= this.#firstSegment) this.#prune(through);
  }

  /**
   * Deletes segments up to `through`. Order (each step durable before the next): an
   * audit.checkpoint record in the chain, then checkpoint.json (temp file, fsync, rename, fsync
   * dir), then the deletions. A crash between steps leaves a state verify accepts and open finishes.
   */
  #prune(through: number): void {
    let last: ChainHead;
    if (through + 1 === this.#segment) {
      last = this.#head;
    } else {
      // The first record of the first kept segment names the last pruned one (seq - 1, prev).
      const first = readFirstLine(this.#path(through + 1), MAX_DATA_BYTES * 2);
      const check = first === null ? null : checkLineAlone(first);
      if (check === null || !check.ok) {
        log.error("not pruning: the first kept segment does not start with a valid record", {
          segment: segmentName(through + 1),
          reason: check === null ? "no complete line" : check.reason,
        });
        return;
      }
      last = { seq: check.record.seq - 1, hash: check.record.prev };
    }
    if (last.seq < 1) return;
    const point = {
      seq: last.seq,
      hash: last.hash,
      segment: segmentName(through),
      prunedThrough: through,
    };
    const record = this.#put(AUDIT_ACTOR, CHECKPOINT_EVENT, checkpointDataJson(point), this.#now());
    const checkpoint: Checkpoint = { ...point, recordSeq: record.seq };
    const tmp = `${this.#dir}/${CHECKPOINT_TMP}`;
    const file = Deno.openSync(tmp, { write: true, create: true, truncate: true, mode: 0o600 });
    try {
      const bytes = encoder.encode(checkpointText(checkpoint));
      for (let off = 0; off < bytes.length;) {
        const n = this.#io.write(file, bytes.subarray(off));
        if (!(n > 0)) throw new Error("a write made no progress");
        off += n;
      }
      if (this.#o.fsync) this.#io.sync(file);
    } finally {
      file.close();
    }
    Deno.renameSync(tmp, `${this.#dir}/${CHECKPOINT_FILE}`);
    if (this.#o.fsync) syncDir(this.#dir);
    for (let n = this.#firstSegment; n <= through; n++) removeIfPresent(this.#path(n));
    if (this.#o.fsync) syncDir(this.#dir);
    log.debug("pruned audit segments", {
      through: segmentName(through),
      seq: last.seq,
      record: record.seq,
    });
    this.#firstSegment = through + 1;
  }
}

/** Opens a log with injected file operations (tests: failing writers). Not exported by mod.ts. */
export function openAuditLog(dir: string, options: AuditOptions, io: AuditIo): AuditLog {
  return openWithIo(dir, options, io);
}

function validActor(actor: AuditActor, event: string): AuditActor {
  const kind: unknown = (actor as { kind?: unknown } | null)?.kind;
  if (typeof kind !== "string" || !ACTOR_KINDS.includes(kind)) {
    throw invalidArgument(
      `Cannot audit "${event}": actor kind "${String(kind)}" is not agent, operator or system`,
    );
  }
  const id: unknown = actor.id;
  if (
    typeof id !== "string" || id.length === 0 || id.length > MAX_ACTOR_ID_LENGTH ||
    CONTROL_CHARS.test(id)
  ) {
    throw invalidArgument(
      `Cannot audit "${event}": the actor id must be 1 to ${MAX_ACTOR_ID_LENGTH} characters ` +
        "without control characters",
    );
  }
  return { kind: kind as AuditActor["kind"], id };
}

function validEvent(event: string): void {
  if (typeof event !== "string" || event.length > MAX_EVENT_LENGTH || !EVENT_PATTERN.test(event)) {
    throw invalidArgument(
      `Cannot audit "${String(event).slice(0, 80)}": it is not an event name`,
      `Event names are dot-separated lower-case words of a-z, 0-9 and _ (at most ` +
        `${MAX_EVENT_LENGTH} characters), e.g. "job.started"`,
    );
  }
  if (event.startsWith(RESERVED_EVENT_PREFIX)) {
    throw invalidArgument(
      `Cannot audit "${event}": events starting with "${RESERVED_EVENT_PREFIX}" are written by ` +
        "the audit log itself",
    );
  }
}

/**
 * The operator's recordings use case: every session's asciicast v2 recording (written by the
 * engine's AsciicastRecorder under the daemon's recordings directory, after redaction), listed
 * and read back as one cast, for live and closed sessions alike.
 *
 * On disk a session has `<id>.cast` (the newest part, still growing while the session runs) and,
 * once it rotated, `<id>.cast.1` … `<id>.cast.N` (older first as N grows). Each part has its own
 * header and its event times count from that header. `open` joins the parts into one valid cast:
 * the oldest part's header, then every event in order, the times of later parts shifted by the
 * wall-clock distance between their headers (never backwards), and a resize event at each part
 * boundary so a player follows the size the next part was recorded at.
 *
 * Bounded: at most `maxBytes` (256 MiB) of recorded files are read, the newest ones; the oldest
 * part kept may be cut at an event boundary, and a marker event says how much was left out.
 * Reading never changes the files and never holds more than one chunk in memory. Nothing here
 * writes to the audit log: reading a recording is a view, like the terminal stream.
 */
import { join } from "node:path";
import type { Store } from "../store/mod.ts";
import { concatBytes, logger, TermadaError } from "../shared/mod.ts";
import { RECORDING_WIRE_LIMITS, type RecordingInfo, type RecordingList } from "../wire/mod.ts";

const log = logger("control");

/** Bytes read from a part at a time. */
const CHUNK_BYTES = 256 * 1024;
/** Longest header line read (the recorder writes ~150 bytes). */
const MAX_HEADER_BYTES = 64 * 1024;
/** Longest event line kept (the recorder's largest is a few MiB); longer is treated as damage. */
const MAX_LINE_BYTES = 64 * 1024 * 1024;
/** Rotated parts looked for beyond `keepFiles` (files of a daemon that kept more). */
const MAX_PARTS = 1000;
/** Attempts at opening a consistent set of parts while the recorder rotates. */
const OPEN_ATTEMPTS = 5;
const SESSION_ID = /^[A-Za-z0-9_.:-]{1,64}$/;
const PART_NAME = /^([A-Za-z0-9_.:-]{1,64})\.cast(?:\.([1-9][0-9]{0,3}))?$/;

const NL = 0x0a;
const COMMA = 0x2c;
const encoder = new TextEncoder();
/** `,"r",` as the recorder writes it (JSON.stringify: no spaces). */
const RESIZE_CODE = encoder.encode(`,"r",`);

/** The live sessions the engine holds (the engine's Registry satisfies it). */
export interface LiveSessions {
  sessionById(id: string): { owner: string; createdAt: number; state: string } | undefined;
}

export interface RecordingsOptions {
  /** The daemon's recordings directory (`<state>/recordings`). */
  dir: string;
  /** Whether sessions are recorded (`sessions.record`): a missing file is explained by it. */
  enabled: boolean;
  sessions: LiveSessions;
  /** Closed sessions' owner and times; absent: only what the files and live sessions say. */
  store?: Pick<Store, "sessions">;
  /** Rotated parts the recorder keeps (`sessions.recording_keep_files`, default 3). */
  keepFiles?: number;
  /** Recorded bytes one cast joins at most (default 256 MiB). */
  maxBytes?: number;
}

/** One recording read back: its description and the joined cast (the caller must consume or cancel `body`). */
export interface RecordingCast {
  info: RecordingInfo;
  /** Parts joined (those left out whole are not counted). */
  parts: number;
  /** Recorded bytes left out, the oldest, to stay under the bound. */
  omittedBytes: number;
  body: ReadableStream<Uint8Array>;
}

interface CastHeader {
  width: number;
  height: number;
  timestamp?: number;
  [key: string]: unknown;
}

interface OpenPart {
  path: string;
  file: Deno.FsFile;
  size: number;
  mtime: number | undefined;
}

/** A part chosen for the cast: its header, and the byte range of its events to read. */
interface PlannedPart {
  file: Deno.FsFile;
  header: CastHeader;
  headerLine: Uint8Array;
  from: number;
  end: number;
  /** `from` is inside the event lines: skip to the next line start first. */
  cut: boolean;
}

export class RecordingOps {
  readonly #o: RecordingsOptions;
  readonly #maxBytes: number;

  constructor(o: RecordingsOptions) {
    this.#o = o;
    this.#maxBytes = o.maxBytes ?? RECORDING_WIRE_LIMITS.castMaxBytes;
  }

  get enabled(): boolean {
    return this.#o.enabled;
  }

  /**
   * Recordings on disk, newest session first, at most `limit` (1000). Reads the directory's
   * names, the store's row of each session, and stats only the files of the sessions returned.
   */
  async list(limit: number = RECORDING_WIRE_LIMITS.listMax): Promise<RecordingList> {
    const n = Math.max(1, Math.min(RECORDING_WIRE_LIMITS.listMax, Math.floor(limit)));
    const groups = new Map<string, string[]>();
    try {
      for await (const e of Deno.readDir(this.#o.dir)) {
        if (!e.isFile) continue;
        const m = PART_NAME.exec(e.name);
        if (!m) continue;
        const id = m[1]!;
        const names = groups.get(id) ?? [];
        names.push(e.name);
        groups.set(id, names);
      }
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw readError(this.#o.dir, err);
    }
    const known: { id: string; names: string[]; facts: SessionFacts }[] = [];
    for (const [id, names] of groups) known.push({ id, names, facts: this.#facts(id) });
    // Sessions the store does not know sort by the newest part's age, after a stat.
    for (const k of known) {
      if (k.facts.startedAt === undefined) {
        const st = await lstatOrUndefined(join(this.#o.dir, `${k.id}.cast`));
        k.facts.sortKey = st?.mtime?.getTime() ?? 0;
      }
    }
    known.sort((a, b) => (b.facts.sortKey - a.facts.sortKey) || (a.id < b.id ? -1 : 1));
    const recordings: RecordingInfo[] = [];
    for (const k of known.slice(0, n)) {
      let bytes = 0;
      let parts = 0;
      let oldest: number | undefined;
      for (const name of k.names) {
        const st = await lstatOrUndefined(join(this.#o.dir, name));
        if (!st?.isFile) continue;
        parts++;
        bytes += st.size;
        const t = st.mtime?.getTime();
        if (t !== undefined && (oldest === undefined || t < oldest)) oldest = t;
      }
      if (parts === 0) continue;
      recordings.push(infoOf(k.id, k.facts, bytes, parts, oldest));
    }
    return { recordings, total: known.length, enabled: this.#o.enabled };
  }

  /** One session's recording as it is on disk now; NOT_FOUND when there is none. */
  async info(sessionId: string): Promise<RecordingInfo> {
    const id = checkSessionId(sessionId);
    const facts = this.#facts(id);
    let bytes = 0;
    let parts = 0;
    let oldest: number | undefined;
    for (const path of await this.#partPaths(id)) {
      const st = await lstatOrUndefined(path);
      if (!st?.isFile) continue;
      parts++;
      bytes += st.size;
      oldest = st.mtime?.getTime() ?? oldest;
    }
    if (parts === 0) throw this.#missing(id, facts);
    return infoOf(id, facts, bytes, parts, oldest);
  }

  /**
   * The session's recording joined into one asciicast v2 stream (see the module comment). The
   * parts are opened here, so a rotation after this call does not disturb the read; the caller
   * must consume or cancel `body`, which closes them.
   */
  async open(sessionId: string): Promise<RecordingCast> {
    const id = checkSessionId(sessionId);
    const facts = this.#facts(id);
    const opened = await this.#openParts(id);
    if (opened.length === 0) throw this.#missing(id, facts);
    let plan: { parts: PlannedPart[]; omitted: number };
    try {
      plan = await this.#plan(opened);
    } catch (err) {
      for (const p of opened) closeQuietly(p.file);
      throw err;
    }
    const used = new Set(plan.parts.map((p) => p.file));
    for (const p of opened) if (!used.has(p.file)) closeQuietly(p.file);
    if (plan.parts.length === 0) {
      throw new TermadaError(
        "NOT_FOUND",
        `The recording of session "${id}" is unreadable: no part has an asciicast v2 header`,
      );
    }
    const bytes = opened.reduce((s, p) => s + p.size, 0);
    const oldest = opened.reduce<number | undefined>(
      (m, p) => p.mtime === undefined ? m : Math.min(m ?? p.mtime, p.mtime),
      undefined,
    );
    return {
      info: infoOf(id, facts, bytes, opened.length, oldest),
      parts: plan.parts.length,
      omittedBytes: plan.omitted,
      body: castStream(plan.parts, plan.omitted, this.#maxBytes),
    };
  }

  #facts(id: string): SessionFacts {
    const live = this.#o.sessions.sessionById(id);
    let row: ReturnType<Store["sessions"]["get"]>;
    try {
      row = this.#o.store?.sessions.get(id);
    } catch (err) {
      // The store refuses ids it could never hold: nothing is known about this one.
      if (!(err instanceof TermadaError && err.code === "INVALID_ARGUMENT")) throw err;
    }
    const startedAt = row?.created_at ?? live?.createdAt;
    return {
      known: live !== undefined || row !== undefined,
      live: live !== undefined && live.state !== "closed",
      owner: row?.owner ?? live?.owner ?? null,
      startedAt,
      endedAt: row?.closed_at ?? undefined,
      closeReason: row?.close_reason ?? undefined,
      sortKey: startedAt ?? 0,
    };
  }

  #missing(id: string, facts: SessionFacts): TermadaError {
    if (!facts.known) {
      return new TermadaError("NOT_FOUND", `No session "${id}"`, {
        hint: "GET /api/recordings lists the recorded sessions",
      });
    }
    if (!this.#o.enabled) {
      return new TermadaError(
        "NOT_FOUND",
        `Session "${id}" has no recording: recording is disabled (sessions.record: false)`,
        {
          hint: "Set sessions.record: true in the config; sessions started after that are recorded",
        },
      );
    }
    return new TermadaError(
      "NOT_FOUND",
      `Session "${id}" has no recording: it could not be written or was removed`,
      { hint: 'The daemon\'s log says why a recording was disabled ("recording disabled")' },
    );
  }

  /** The part files that may exist, newest first (`.cast`, `.cast.1`, …). */
  async #partPaths(id: string): Promise<string[]> {
    const base = join(this.#o.dir, `${id}.cast`);
    const out = [base];
    const keep = this.#o.keepFiles ?? 3;
    for (let i = 1; i <= MAX_PARTS; i++) {
      const path = `${base}.${i}`;
      if (i > keep && (await lstatOrUndefined(path)) === undefined) break;
      out.push(path);
    }
    return out;
  }

  /**
   * Opens every existing part, oldest first, and checks that each path still names the file
   * opened (a rotation renames them all): retried a few times, then SESSION_BUSY. Symlinks and
   * other non-files are skipped (lstat), never followed.
   */
  async #openParts(id: string): Promise<OpenPart[]> {
    for (let attempt = 0; attempt < OPEN_ATTEMPTS; attempt++) {
      const opened: OpenPart[] = [];
      let consistent = true;
      try {
        for (const path of (await this.#partPaths(id)).reverse()) {
          const before = await lstatOrUndefined(path);
          if (!before?.isFile) continue;
          let file: Deno.FsFile;
          try {
            file = await Deno.open(path, { read: true });
          } catch (err) {
            if (err instanceof Deno.errors.NotFound) {
              consistent = false;
              break;
            }
            throw readError(path, err);
          }
          const st = await file.stat();
          opened.push({ path, file, size: st.size, mtime: st.mtime?.getTime() });
          if (st.ino !== before.ino || !st.isFile) consistent = false;
        }
        if (consistent) {
          for (const p of opened) {
            const now = await lstatOrUndefined(p.path);
            const st = await p.file.stat();
            if (!now?.isFile || now.ino !== st.ino) consistent = false;
          }
        }
      } catch (err) {
        for (const p of opened) closeQuietly(p.file);
        throw err;
      }
      if (consistent) return opened;
      for (const p of opened) closeQuietly(p.file);
    }
    throw new TermadaError(
      "SESSION_BUSY",
      `Cannot read the recording of session "${id}": its files kept rotating while they were opened`,
      { retriable: true },
    );
  }

  /** Reads each part's header and picks the byte ranges to join, newest first, within the bound. */
  async #plan(opened: OpenPart[]): Promise<{ parts: PlannedPart[]; omitted: number }> {
    const parts: PlannedPart[] = [];
    let remaining = this.#maxBytes;
    let omitted = 0;
    for (let i = opened.length - 1; i >= 0; i--) {
      const p = opened[i]!;
      const head = await readHeader(p.file, p.size);
      if (!head) {
        log.warn("recording part without a valid header skipped", { path: p.path });
        continue;
      }
      const body = p.size - head.bodyStart;
      if (remaining <= 0) {
        omitted += body;
        continue;
      }
      if (body <= remaining) {
        parts.unshift({ file: p.file, ...head, from: head.bodyStart, end: p.size, cut: false });
        remaining -= body;
      } else {
        const from = p.size - remaining;
        parts.unshift({ file: p.file, ...head, from, end: p.size, cut: true });
        omitted += from - head.bodyStart;
        remaining = 0;
      }
    }
    return { parts, omitted };
  }
}

interface SessionFacts {
  known: boolean;
  live: boolean;
  owner: string | null;
  startedAt: number | undefined;
  endedAt: number | undefined;
  closeReason: string | undefined;
  sortKey: number;
}

function infoOf(
  id: string,
  f: SessionFacts,
  bytes: number,
  parts: number,
  oldestMtime: number | undefined,
): RecordingInfo {
  const started = f.startedAt ?? oldestMtime ?? 0;
  return {
    session_id: id,
    owner: f.owner,
    live: f.live,
    bytes,
    parts,
    started_at: new Date(started).toISOString(),
    ...(f.endedAt === undefined || f.live ? {} : { ended_at: new Date(f.endedAt).toISOString() }),
    ...(f.closeReason === undefined || f.live ? {} : { close_reason: f.closeReason }),
  };
}

function checkSessionId(id: string): string {
  if (!SESSION_ID.test(id)) {
    throw new TermadaError("INVALID_ARGUMENT", `"${id.slice(0, 80)}" is not a session id`);
  }
  return id;
}

async function lstatOrUndefined(path: string): Promise<Deno.FileInfo | undefined> {
  try {
    return await Deno.lstat(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw readError(path, err);
  }
}

function readError(path: string, err: unknown): TermadaError {
  const reason = err instanceof Error ? err.message : String(err);
  return new TermadaError("INTERNAL", `Cannot read recording "${path}": ${reason}`, {
    cause: err,
  });
}

function closeQuietly(file: Deno.FsFile): void {
  try {
    file.close();
  } catch {
    // already closed: nothing left to release
  }
}

/** The header line of a part (it must be asciicast v2 with a size), and where its events start. */
async function readHeader(
  file: Deno.FsFile,
  size: number,
): Promise<{ header: CastHeader; headerLine: Uint8Array; bodyStart: number } | undefined> {
  const buf = new Uint8Array(Math.min(MAX_HEADER_BYTES, size));
  await file.seek(0, Deno.SeekMode.Start);
  let got = 0;
  while (got < buf.length) {
    const n = await file.read(buf.subarray(got));
    if (n === null) break;
    got += n;
    if (buf.subarray(0, got).includes(NL)) break;
  }
  const nl = buf.subarray(0, got).indexOf(NL);
  if (nl < 0) return undefined;
  const line = buf.slice(0, nl);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder().decode(line));
  } catch {
    return undefined;
  }
  const h = header as Partial<CastHeader> & { version?: unknown };
  if (
    typeof header !== "object" || header === null || h.version !== 2 ||
    !Number.isSafeInteger(h.width) || !Number.isSafeInteger(h.height)
  ) return undefined;
  return { header: h as CastHeader, headerLine: line, bodyStart: nl + 1 };
}

/** The time of an event line (`[t,"o",…]`) and where the number ends; undefined if malformed. */
function eventTime(line: Uint8Array): { t: number; end: number } | undefined {
  if (line[0] !== 0x5b) return undefined; // "["
  const end = line.indexOf(COMMA);
  if (end < 2 || end > 32) return undefined;
  const t = Number(String.fromCharCode(...line.subarray(1, end)));
  return Number.isFinite(t) && t >= 0 ? { t, end } : undefined;
}

function isResize(line: Uint8Array, end: number): boolean {
  for (let i = 0; i < RESIZE_CODE.length; i++) if (line[end + i] !== RESIZE_CODE[i]) return false;
  return true;
}

const seconds = (t: number) => String(Math.round(t * 1e6) / 1e6);

function eventLine(t: number, code: string, data: string): Uint8Array {
  return encoder.encode(`[${seconds(t)},${JSON.stringify(code)},${JSON.stringify(data)}]\n`);
}

/**
 * The joined cast as a byte stream: pulls one chunk of one part at a time. Lines are complete
 * JSON events (a line never holds a raw newline), so they are cut at `\n`; a trailing line
 * without one (a write in progress in the live part) and malformed lines are left out.
 */
function castStream(
  parts: PlannedPart[],
  omitted: number,
  maxBytes: number,
): ReadableStream<Uint8Array> {
  const first = parts[0]!;
  const t0 = typeof first.header.timestamp === "number" ? first.header.timestamp : undefined;
  let index = -1;
  let pos = 0;
  let carry: Uint8Array | undefined;
  let skipToLine = false;
  let offset = 0;
  let last = 0;
  let cols = first.header.width;
  let rows = first.header.height;
  const closeAll = () => {
    for (const p of parts) closeQuietly(p.file);
  };

  /** Starts part `i`; returns the lines to emit before its events. */
  const startPart = async (i: number): Promise<Uint8Array[]> => {
    const p = parts[i]!;
    index = i;
    pos = p.from;
    carry = undefined;
    skipToLine = p.cut;
    await p.file.seek(pos, Deno.SeekMode.Start);
    const out: Uint8Array[] = [];
    if (i === 0) {
      out.push(p.headerLine, encoder.encode("\n"));
      if (omitted > 0) {
        out.push(eventLine(
          0,
          "m",
          `termada: ${omitted} bytes of older recording left out (over the ${maxBytes} byte limit)`,
        ));
      }
      return out;
    }
    const ts = typeof p.header.timestamp === "number" ? p.header.timestamp : undefined;
    offset = Math.max(last, t0 !== undefined && ts !== undefined ? ts - t0 : last);
    if (p.header.width !== cols || p.header.height !== rows) {
      cols = p.header.width;
      rows = p.header.height;
      out.push(eventLine(offset, "r", `${cols}x${rows}`));
    }
    return out;
  };

  const emitLine = (line: Uint8Array, out: Uint8Array[]): void => {
    const ev = eventTime(line);
    if (!ev) return;
    if (isResize(line, ev.end)) {
      const m = /"(\d+)x(\d+)"/.exec(new TextDecoder().decode(line.subarray(ev.end)));
      if (m) [cols, rows] = [Number(m[1]), Number(m[2])];
    }
    const t = ev.t + offset;
    last = Math.max(last, t);
    if (offset === 0) out.push(line, encoder.encode("\n"));
    else {
      out.push(encoder.encode(`[${seconds(t)}`), line.subarray(ev.end), encoder.encode("\n"));
    }
  };

  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const out: Uint8Array[] = [];
        while (out.length === 0) {
          if (index < 0 || pos >= parts[index]!.end) {
            if (index + 1 >= parts.length) {
              closeAll();
              controller.close();
              return;
            }
            out.push(...await startPart(index + 1));
            continue;
          }
          const p = parts[index]!;
          const buf = new Uint8Array(Math.min(CHUNK_BYTES, p.end - pos));
          const n = await p.file.read(buf);
          if (n === null || n === 0) {
            pos = p.end; // the file is shorter than when it was opened: nothing more here
            continue;
          }
          pos += n;
          let chunk: Uint8Array = buf.subarray(0, n);
          if (carry) {
            chunk = concatBytes([carry, chunk]);
            carry = undefined;
          }
          let start = 0;
          for (let nl = chunk.indexOf(NL); nl >= 0; nl = chunk.indexOf(NL, start)) {
            if (skipToLine) skipToLine = false;
            else emitLine(chunk.subarray(start, nl), out);
            start = nl + 1;
          }
          if (start < chunk.length) {
            const rest = chunk.slice(start);
            // A line longer than any event the recorder writes is damage: dropped to its end.
            if (rest.length > MAX_LINE_BYTES) skipToLine = true;
            else carry = rest;
          }
        }
        controller.enqueue(concatBytes(out));
      } catch (err) {
        closeAll();
        controller.error(err);
      }
    },
    cancel() {
      closeAll();
    },
  });
}

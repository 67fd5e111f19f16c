/**
 * Records a session to disk as asciicast v2 (https://docs.asciinema.org/manual/asciicast/v2/):
 * a JSON header line, then one `[seconds, code, data]` JSON array per line.
 *
 * `output()` is on the session's hot path: it only decodes the chunk (streaming, so UTF-8 split
 * across chunks stays intact) and queues it. One background writer per recorder serialises queued
 * events and writes them in batches, with at most one write in flight. A batch gathers for up to
 * GATHER_MS (sooner once BATCH_BYTES are queued, or on flush/close): an interactive session's
 * small chunks then cost one write per batch instead of one blocking-pool round trip each. If the writer falls behind
 * by more than `maxPendingBytes`, output is dropped and one marker event says how many bytes were
 * lost. A disk error is logged once and stops the recording; the session keeps running.
 *
 * Files rotate at `maxFileBytes`: `path` becomes `path.1` (older ones shift up to `path.<keepFiles>`,
 * the oldest is overwritten) and a new `path` starts with a fresh header whose timestamp is the
 * rotation time; event times in each file count from that file's header. A file may exceed
 * `maxFileBytes` only when it holds a single event that alone is larger (one event of slack).
 */
import { type Clock, concatBytes, logger, systemClock, TermadaError } from "../shared/mod.ts";

const log = logger("output");

export const ASCIICAST_DEFAULT_MAX_FILE_BYTES = 16 * 1024 * 1024;
export const ASCIICAST_DEFAULT_KEEP_FILES = 3;
export const ASCIICAST_DEFAULT_MAX_PENDING_BYTES = 4 * 1024 * 1024;
/** Smallest accepted `maxFileBytes`: a header and a few events must fit. */
const MIN_FILE_BYTES = 1024;
/** Encoded bytes gathered before one write call. */
const BATCH_BYTES = 256 * 1024;
/** Longest a queued event waits for others to join its write (a crash of the daemon loses it). */
export const GATHER_MS = 25;

export interface AsciicastOptions {
  cols: number;
  rows: number;
  title?: string;
  /** Header `env`, e.g. `{ SHELL, TERM }`. */
  env?: Record<string, string>;
  /** Rotate before a file would exceed this (default 16 MiB, at least 1 KiB). */
  maxFileBytes?: number;
  /** Rotated files kept: `path.1` … `path.N` (default 3; 0 keeps only the current file). */
  keepFiles?: number;
  clock?: Clock;
  /** Queued, unwritten output beyond which output is dropped (default 4 MiB). */
  maxPendingBytes?: number;
}

type EventCode = "o" | "r" | "m";

interface PendingEvent {
  /** `clock.mono()` when it happened. */
  t: number;
  code: EventCode;
  data: string;
  /** Bytes charged against `maxPendingBytes` (the raw chunk size for output). */
  cost: number;
  seq: number;
}

interface FlushWaiter {
  seq: number;
  resolve: () => void;
}

function checkInteger(name: string, value: number, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(
      `Invalid asciicast option ${name} "${value}": it must be an integer >= ${min}`,
    );
  }
}

function isNotFound(err: unknown): boolean {
  return err instanceof Deno.errors.NotFound;
}

/** Characters looked at to tell whether a chunk is mostly escapes (see eventLine). */
const DENSITY_SAMPLE = 512;
const HEX = new TextEncoder().encode("0123456789abcdef");
/** The short escapes JSON.stringify uses (0 where it writes \u00XX). */
const SHORT_ESCAPE = new Uint8Array(0x60);
SHORT_ESCAPE[0x08] = 0x62; // b
SHORT_ESCAPE[0x09] = 0x74; // t
SHORT_ESCAPE[0x0a] = 0x6e; // n
SHORT_ESCAPE[0x0c] = 0x66; // f
SHORT_ESCAPE[0x0d] = 0x72; // r
SHORT_ESCAPE[0x22] = 0x22; // "
SHORT_ESCAPE[0x5c] = 0x5c; // \

const needsEscape = (c: number) => c < 0x20 || c === 0x22 || c === 0x5c;

/**
 * One event line, `[seconds, code, data]` and a newline, as UTF-8: byte for byte what
 * `JSON.stringify` gives. V8's JSON.stringify takes ~7 ns per escaped character, which made
 * output like `y\n` (an escape every other byte) cost 0.4 s per 100 MB; ASCII text with more
 * than one escape in six characters is escaped here instead, in one pass (~0.26 s per 100 MB).
 */
export function eventLine(
  seconds: number,
  code: string,
  data: string,
  encoder: TextEncoder = new TextEncoder(),
): Uint8Array {
  const n = data.length;
  const sample = Math.min(n, DENSITY_SAMPLE);
  let escapes = 0;
  for (let i = 0; i < sample; i++) if (needsEscape(data.charCodeAt(i))) escapes++;
  if (escapes * 6 > sample) {
    const prefix = JSON.stringify([seconds, code]).slice(0, -1) + ',"';
    // Two bytes per character fit every escape but \u00XX, which makes room when it comes.
    let out = new Uint8Array(prefix.length + 2 * n + 3);
    let o = encoder.encodeInto(prefix, out).written;
    let ascii = true;
    for (let i = 0; i < n; i++) {
      const c = data.charCodeAt(i);
      if (!needsEscape(c)) {
        if (c >= 0x80) {
          ascii = false; // UTF-8 and lone surrogates: JSON.stringify below
          break;
        }
        out[o++] = c;
        continue;
      }
      out[o++] = 0x5c;
      const short = SHORT_ESCAPE[c]!;
      if (short !== 0) {
        out[o++] = short;
      } else {
        const need = o + 5 + 2 * (n - i - 1) + 3;
        if (need > out.length) {
          const grown = new Uint8Array(Math.max(need, out.length * 2));
          grown.set(out.subarray(0, o));
          out = grown;
        }
        out[o++] = 0x75; // u00XX
        out[o++] = 0x30;
        out[o++] = 0x30;
        out[o++] = HEX[c >> 4]!;
        out[o++] = HEX[c & 15]!;
      }
    }
    if (ascii) {
      out[o++] = 0x22;
      out[o++] = 0x5d;
      out[o++] = 0x0a;
      return out.subarray(0, o);
    }
  }
  return encoder.encode(JSON.stringify([seconds, code, data]) + "\n");
}

async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  let off = 0;
  while (off < bytes.length) off += await file.write(bytes.subarray(off));
}

export class AsciicastRecorder {
  readonly path: string;
  readonly #clock: Clock;
  readonly #title: string | undefined;
  readonly #env: Record<string, string> | undefined;
  readonly #maxFileBytes: number;
  readonly #keepFiles: number;
  readonly #maxPendingBytes: number;
  readonly #encoder = new TextEncoder();
  #decoder = new TextDecoder();

  // Writer side: owned by #drain once the recorder is open.
  #file: Deno.FsFile | null = null;
  /** `clock.mono()` at the current file's header; event times count from it. */
  #fileStart = 0;
  #fileBytes = 0;
  #headerBytes = 0;
  #bytesWritten = 0;
  /** Terminal size as of the last event written, for the header of the next rotated file. */
  #cols: number;
  #rows: number;

  // Producer side.
  #queue: PendingEvent[] = [];
  #pendingBytes = 0;
  #dropped = 0;
  #seq = 0;
  #writtenSeq = 0;
  #waiters: FlushWaiter[] = [];
  #draining: Promise<void> | null = null;
  /** Ends the writer's gathering pause early (flush, close, a full batch). */
  #hurry: (() => void) | null = null;
  #closed = false;
  #closing: Promise<void> | null = null;
  #failed = false;

  private constructor(path: string, options: AsciicastOptions) {
    checkInteger("cols", options.cols, 1);
    checkInteger("rows", options.rows, 1);
    this.#maxFileBytes = options.maxFileBytes ?? ASCIICAST_DEFAULT_MAX_FILE_BYTES;
    checkInteger("maxFileBytes", this.#maxFileBytes, MIN_FILE_BYTES);
    this.#keepFiles = options.keepFiles ?? ASCIICAST_DEFAULT_KEEP_FILES;
    checkInteger("keepFiles", this.#keepFiles, 0);
    this.#maxPendingBytes = options.maxPendingBytes ?? ASCIICAST_DEFAULT_MAX_PENDING_BYTES;
    checkInteger("maxPendingBytes", this.#maxPendingBytes, 1);
    this.path = path;
    this.#cols = options.cols;
    this.#rows = options.rows;
    this.#title = options.title;
    this.#env = options.env;
    this.#clock = options.clock ?? systemClock;
  }

  /**
   * Creates (or truncates) `path` with mode 0600 and writes the header. The caller must `close()`
   * the recorder. Throws a `TermadaError` when the file cannot be created.
   */
  static async open(path: string, options: AsciicastOptions): Promise<AsciicastRecorder> {
    const recorder = new AsciicastRecorder(path, options);
    try {
      await recorder.#openFile(recorder.#clock.mono());
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      throw new TermadaError("INTERNAL", `Cannot open recording "${path}": ${reason}`, {
        cause: err,
      });
    }
    return recorder;
  }

  /** Bytes written to disk so far, headers included, across rotated files. */
  get bytesWritten(): number {
    return this.#bytesWritten;
  }

  /** True once a disk error stopped the recording. */
  get failed(): boolean {
    return this.#failed;
  }

  /** Queues a chunk of terminal output. Never throws; ignored after close or failure. */
  output(bytes: Uint8Array): void {
    if (this.#closed || this.#failed || bytes.length === 0) return;
    try {
      const t = this.#clock.mono();
      if (this.#pendingBytes > 0 && this.#pendingBytes + bytes.length > this.#maxPendingBytes) {
        this.#dropped += bytes.length;
        return;
      }
      if (this.#dropped > 0) this.#endDrop(t);
      const text = this.#decoder.decode(bytes, { stream: true });
      // An empty string means the chunk was only the start of a multibyte character.
      if (text !== "") this.#push(t, "o", text, bytes.length);
    } catch (err) {
      this.#fail(err);
    }
  }

  /** Records a terminal resize (`"r"` event, `"COLSxROWS"`). */
  resize(cols: number, rows: number): void {
    checkInteger("cols", cols, 1);
    checkInteger("rows", rows, 1);
    if (this.#closed || this.#failed) return;
    this.#push(this.#clock.mono(), "r", `${cols}x${rows}`, 0);
  }

  /** Records a marker (`"m"` event), e.g. the start of an agent's command. */
  marker(label: string): void {
    if (this.#closed || this.#failed) return;
    this.#push(this.#clock.mono(), "m", label, 0);
  }

  /**
   * Resolves once everything queued before the call is on disk (or the recording failed; check
   * `failed`). Never rejects.
   */
  flush(): Promise<void> {
    if (!this.#closed && !this.#failed && this.#dropped > 0) this.#endDrop(this.#clock.mono());
    const seq = this.#seq;
    if (this.#failed || this.#writtenSeq >= seq) return Promise.resolve();
    const p = new Promise<void>((resolve) => this.#waiters.push({ seq, resolve }));
    this.#hurry?.();
    return p;
  }

  /** Flushes and closes the file. Idempotent; never rejects. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #close(): Promise<void> {
    if (!this.#failed) {
      const t = this.#clock.mono();
      if (this.#dropped > 0) this.#endDrop(t);
      // An incomplete character at the very end becomes U+FFFD rather than vanishing.
      const tail = this.#decoder.decode();
      if (tail !== "") this.#push(t, "o", tail, 0);
    }
    this.#closed = true;
    this.#hurry?.();
    while (this.#draining !== null) await this.#draining;
    this.#closeFile();
    this.#resolveWaiters(Number.POSITIVE_INFINITY);
  }

  #endDrop(t: number): void {
    const dropped = this.#dropped;
    this.#dropped = 0;
    // Dropped bytes may have cut a character in half: restart decoding cleanly.
    this.#decoder = new TextDecoder();
    this.#push(t, "m", `termada: recording dropped ${dropped} bytes of output (disk too slow)`, 0);
  }

  #push(t: number, code: EventCode, data: string, cost: number): void {
    this.#queue.push({ t, code, data, cost, seq: ++this.#seq });
    this.#pendingBytes += cost;
    if (this.#draining === null && !this.#failed) this.#draining = this.#drain();
    else if (this.#pendingBytes >= BATCH_BYTES) this.#hurry?.();
  }

  /** Waits up to GATHER_MS for more events, unless something asks for them to be written now. */
  #gather(): Promise<void> {
    if (this.#closed || this.#waiters.length > 0 || this.#pendingBytes >= BATCH_BYTES) {
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#hurry = null;
        resolve();
      };
      const timer = setTimeout(done, GATHER_MS);
      this.#hurry = done;
    });
  }

  /** The single writer: runs until the queue is empty, then clears `#draining`. */
  async #drain(): Promise<void> {
    try {
      await this.#gather();
      while (this.#queue.length > 0 && !this.#failed) {
        const events = this.#queue;
        this.#queue = [];
        await this.#writeEvents(events);
      }
    } catch (err) {
      this.#fail(err);
    } finally {
      this.#draining = null;
    }
  }

  async #writeEvents(events: PendingEvent[]): Promise<void> {
    let parts: Uint8Array[] = [];
    let partsBytes = 0;
    let cost = 0;
    for (const event of events) {
      cost += event.cost;
      let line = this.#line(event);
      const used = this.#fileBytes + partsBytes;
      if (used + line.length > this.#maxFileBytes && used > this.#headerBytes) {
        await this.#writeParts(parts, partsBytes);
        parts = [];
        partsBytes = 0;
        await this.#rotate(event.t);
        line = this.#line(event);
      }
      parts.push(line);
      partsBytes += line.length;
      if (event.code === "r") {
        [this.#cols, this.#rows] = event.data.split("x").map(Number) as [number, number];
      }
      if (partsBytes >= BATCH_BYTES) {
        await this.#writeParts(parts, partsBytes);
        parts = [];
        partsBytes = 0;
        this.#resolveWaiters(event.seq);
      }
    }
    await this.#writeParts(parts, partsBytes);
    this.#pendingBytes -= cost;
    const last = events[events.length - 1];
    if (last) this.#resolveWaiters(last.seq);
  }

  #line(event: PendingEvent): Uint8Array {
    const micros = Math.max(0, Math.round((event.t - this.#fileStart) * 1000));
    return eventLine(micros / 1e6, event.code, event.data, this.#encoder);
  }

  async #writeParts(parts: Uint8Array[], total: number): Promise<void> {
    if (total === 0) return;
    const file = this.#file;
    if (file === null) throw new Error("the recording file is not open");
    await writeAll(file, concatBytes(parts, total));
    this.#fileBytes += total;
    this.#bytesWritten += total;
  }

  async #rotate(startMono: number): Promise<void> {
    this.#closeFile();
    const path = this.path;
    if (this.#keepFiles > 0) {
      // rename() replaces the target, so the oldest kept file is overwritten, never piled up.
      for (let i = this.#keepFiles - 1; i >= 1; i--) {
        await Deno.rename(`${path}.${i}`, `${path}.${i + 1}`).catch((err) => {
          if (!isNotFound(err)) throw err;
        });
      }
      await Deno.rename(path, `${path}.1`).catch((err) => {
        // Someone removed the live file: nothing to keep, start a new one.
        if (!isNotFound(err)) throw err;
      });
    }
    await this.#openFile(startMono);
  }

  /** Creates `path` afresh and writes a header dated now; events count from `startMono`. */
  async #openFile(startMono: number): Promise<void> {
    const file = await this.#createFile();
    try {
      const header: Record<string, unknown> = {
        version: 2,
        width: this.#cols,
        height: this.#rows,
        timestamp: Math.floor(this.#clock.now() / 1000),
      };
      if (this.#env !== undefined) header.env = this.#env;
      if (this.#title !== undefined) header.title = this.#title;
      const bytes = this.#encoder.encode(JSON.stringify(header) + "\n");
      await writeAll(file, bytes);
      this.#file = file;
      this.#fileStart = startMono;
      this.#headerBytes = bytes.length;
      this.#fileBytes = bytes.length;
      this.#bytesWritten += bytes.length;
    } catch (err) {
      file.close();
      throw err;
    }
  }

  /**
   * Opens a new file with mode 0600. An existing regular file at `path` is replaced (a stale
   * recording); anything else there (a symlink, a device, a directory) is refused rather than
   * written through or re-permissioned.
   */
  async #createFile(): Promise<Deno.FsFile> {
    const options = { write: true, createNew: true, mode: 0o600 } as const;
    try {
      return await Deno.open(this.path, options);
    } catch (err) {
      if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
    }
    const info = await Deno.lstat(this.path);
    if (!info.isFile) throw new Error("it exists and is not a regular file");
    await Deno.remove(this.path);
    return await Deno.open(this.path, options);
  }

  #closeFile(): void {
    const file = this.#file;
    this.#file = null;
    try {
      file?.close();
    } catch {
      // Already closed by the runtime after an I/O error: nothing left to release.
    }
  }

  #resolveWaiters(seq: number): void {
    this.#writtenSeq = Math.max(this.#writtenSeq, seq);
    if (this.#waiters.length === 0) return;
    const still: FlushWaiter[] = [];
    for (const w of this.#waiters) {
      if (w.seq <= seq) w.resolve();
      else still.push(w);
    }
    this.#waiters = still;
  }

  /** Stops the recording for good; logged once. The session carries on without it. */
  #fail(err: unknown): void {
    if (this.#failed) return;
    this.#failed = true;
    log.error("Recording stopped: cannot write the asciicast file", {
      path: this.path,
      error: err,
    });
    this.#queue = [];
    this.#pendingBytes = 0;
    this.#dropped = 0;
    this.#closeFile();
    this.#resolveWaiters(Number.POSITIVE_INFINITY);
  }
}

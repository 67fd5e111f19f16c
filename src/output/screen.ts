/**
 * The rendered screen of a session, computed on demand: a headless xterm.js parses the session's
 * raw bytes (from its `RawRing`) only when someone asks for a snapshot. Sessions nobody looks at
 * never create a terminal, and a terminal that fell behind the ring replays what the ring still
 * holds instead of keeping its own copy of the output.
 *
 * Resizes are recorded at the ring offset where they happened and applied between the same bytes
 * when the parser catches up, so output written before a resize is laid out at the old size.
 *
 * Change tracking (`since`) compares rendered row text, not xterm internals: every read compares
 * each row with the text the previous read saw and stamps the rows that differ with a new
 * generation. A cursor names a generation, so the rows changed since it are the rows stamped
 * later. Memory is one string and one number per row whatever the number of readers, and it
 * survives `release()` and replays (the text is what counts).
 */
import type xterm from "@xterm/headless";
import { TermadaError } from "../shared/mod.ts";

/** xterm.js is loaded on the first snapshot: most daemons never render a screen. */
let xtermModule: Promise<typeof xterm> | undefined;
function loadXterm(): Promise<typeof xterm> {
  return xtermModule ??= import("@xterm/headless").then((m) => m.default);
}
import type { RawRing } from "./raw_ring.ts";

/** Bytes per `Terminal.write` call: xterm yields to the event loop between writes. */
const WRITE_CHUNK = 64 * 1024;
/** Resizes remembered within the ring's window; older intermediate sizes are forgotten. */
const MAX_RESIZES = 64;
/** Screen cursors: `s` + the mirror's id + `.` + the generation, both base 36. */
const SCREEN_CURSOR = /^s([0-9a-z]{1,16})\.(0|[1-9a-z][0-9a-z]{0,10})$/;

function mirrorId(): string {
  const [a] = crypto.getRandomValues(new Uint32Array(1));
  return a!.toString(36);
}

/** Terminal modes the program set, which decide the bytes keys and pastes must be sent as. */
export interface ScreenModes {
  /** DECCKM (`CSI ? 1 h`): cursor keys, Home and End send `SS3 …`. */
  applicationCursor: boolean;
  /** DEC mode 2004 (`CSI ? 2004 h`): the program wants pastes bracketed. */
  bracketedPaste: boolean;
}

export interface ScreenSnapshot {
  /** The visible rows, top to bottom, without trailing blanks. */
  lines: string[];
  /** Cursor position in the visible rows, 0-based. */
  cursor: { x: number; y: number };
  cols: number;
  rows: number;
  /** Last title set with OSC 0/2 ("" if none). */
  title: string;
  /** True while a full-screen program uses the alternate buffer. */
  alternate: boolean;
}

/** One row of the screen: `row` is 0-based from the top, `text` without trailing blanks. */
export interface ScreenRow {
  row: number;
  text: string;
}

/** The screen as `since(cursor)` sees it: only the rows that changed after the cursor. */
export interface ScreenChanges extends Omit<ScreenSnapshot, "lines"> {
  modes: ScreenModes;
  /** Pass to the next `since()` to get only the rows that change after this read. */
  nextCursor: string;
  /**
   * True when `lines` holds every row: no cursor, one from another screen (a new session, a
   * restarted daemon), or one from before the screen's size changed.
   */
  full: boolean;
  /** The rows whose text changed after the cursor (every row when `full`), top to bottom. */
  lines: ScreenRow[];
}

export interface ScreenMirrorOptions {
  cols: number;
  rows: number;
  /** Lines kept above the screen by the parser (default 0: only the screen matters here). */
  scrollback?: number;
}

/** What one read of the terminal gives: all rows, plus what change tracking needs. */
interface ScreenRead extends ScreenSnapshot {
  modes: ScreenModes;
  nextCursor: string;
}

interface SizeChange {
  /** Ring offset at which the size took effect. */
  at: number;
  cols: number;
  rows: number;
}

function checkSize(cols: number, rows: number): void {
  for (const [name, v] of [["cols", cols], ["rows", rows]] as const) {
    if (!Number.isSafeInteger(v) || v < 1 || v > 10_000) {
      throw new RangeError(`Invalid screen ${name} "${v}": it must be an integer from 1 to 10000`);
    }
  }
}

/** Writes `bytes` to xterm and waits until it has parsed them. `bytes` must not change meanwhile. */
function write(term: xterm.Terminal, bytes: Uint8Array): Promise<void> {
  if (bytes.length === 0) return Promise.resolve();
  return new Promise((resolve) => {
    for (let off = 0; off < bytes.length; off += WRITE_CHUNK) {
      const last = off + WRITE_CHUNK >= bytes.length;
      term.write(bytes.subarray(off, off + WRITE_CHUNK), last ? resolve : undefined);
    }
  });
}

export class ScreenMirror {
  readonly #ring: RawRing;
  readonly #scrollback: number;
  /** Size history within the ring's window; entry 0 is the size at or before `ring.startOffset`. */
  #sizes: SizeChange[];
  /** How many entries of `#sizes` the terminal has applied (meaningful only with a terminal). */
  #applied = 0;
  #term: xterm.Terminal | null = null;
  /** Ring offset up to which the terminal has been fed. */
  #fed = 0;
  #title = "";
  /** Serialises snapshots: one catch-up at a time. */
  #chain: Promise<unknown> = Promise.resolve();
  #busy = false;
  #disposed = false;
  // Change tracking. `#gen` is the newest generation; rows stamped after a cursor's generation
  // changed after it. `#baseGen` is the generation of the last size change: older cursors get the
  // full screen.
  readonly #id = mirrorId();
  #gen = 0;
  #baseGen = 0;
  #rowText: string[] = [];
  #rowGen: number[] = [];
  #trackedCols = 0;
  /** The last read and what it was read from: reused while no byte or resize reached xterm. */
  #last: { read: ScreenRead; term: xterm.Terminal; fed: number; applied: number } | null = null;

  constructor(ring: RawRing, options: ScreenMirrorOptions) {
    checkSize(options.cols, options.rows);
    const scrollback = options.scrollback ?? 0;
    if (!Number.isSafeInteger(scrollback) || scrollback < 0) {
      throw new RangeError(`Invalid screen scrollback "${scrollback}": it must be an integer >= 0`);
    }
    this.#ring = ring;
    this.#scrollback = scrollback;
    this.#sizes = [{ at: ring.totalBytes, cols: options.cols, rows: options.rows }];
  }

  /** True once the xterm parser exists (after the first snapshot, until dispose). */
  get hasTerminal(): boolean {
    return this.#term !== null;
  }

  /** The session's terminal was resized: output from now on is laid out at the new size. */
  resize(cols: number, rows: number): void {
    checkSize(cols, rows);
    if (this.#disposed) return;
    const at = this.#ring.totalBytes;
    const last = this.#sizes[this.#sizes.length - 1]!;
    if (last.cols === cols && last.rows === rows) return;
    const entry = { at, cols, rows };
    // Several resizes with no output between them: only the last one matters, unless the terminal
    // already applied that entry.
    if (last.at === at && (this.#term === null || this.#sizes.length - 1 >= this.#applied)) {
      this.#sizes[this.#sizes.length - 1] = entry;
    } else {
      this.#sizes.push(entry);
    }
    this.#prune();
  }

  /**
   * Feeds the parser the ring bytes it has not seen (creating the terminal on first use, or
   * replaying the ring if it dropped unseen bytes) and returns the screen at that point.
   * Rejects with `STOPPED` after `dispose()`.
   */
  snapshot(): Promise<ScreenSnapshot> {
    return this.#enqueue(({ modes: _m, nextCursor: _c, ...snap }) => snap);
  }

  /**
   * Like `snapshot()`, but `lines` holds only the rows whose text changed after `cursor` (a
   * `nextCursor` of an earlier read of this mirror), each with its row number; nothing changed
   * gives `lines: []` and the same `nextCursor`. Without a cursor, or with one this mirror cannot
   * answer (another mirror's, or from before the size changed), every row comes back and `full`
   * is true. A string that is not a screen cursor is INVALID_ARGUMENT.
   */
  since(cursor?: string): Promise<ScreenChanges> {
    let from: number | undefined;
    try {
      from = cursor === undefined ? undefined : this.#parseCursor(cursor);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#enqueue((snap) => {
      const gen = from ?? -1;
      const full = gen < this.#baseGen || gen > this.#gen;
      const lines: ScreenRow[] = [];
      for (let row = 0; row < snap.lines.length; row++) {
        if (full || this.#rowGen[row]! > gen) lines.push({ row, text: snap.lines[row]! });
      }
      return { ...snap, full, lines };
    });
  }

  /** The modes the program has set, as of the output so far (parses what is new, like a read). */
  modes(): Promise<ScreenModes> {
    return this.#enqueue((snap) => snap.modes);
  }

  /** Runs `then` on the screen as of this call, after earlier reads (one catch-up at a time). */
  #enqueue<T>(then: (snap: ScreenRead) => T): Promise<T> {
    const target = this.#ring.totalBytes;
    // `then` runs in the same turn as the read, before a later read can stamp rows again.
    const run = this.#chain.then(() => this.#snapshot(target)).then(then);
    this.#chain = run.catch(() => {/* the caller of this read gets the error */});
    return run;
  }

  /** The generation in a screen cursor of this mirror, or -1 for another mirror's cursor. */
  #parseCursor(cursor: string): number {
    const m = SCREEN_CURSOR.exec(cursor);
    if (m === null) {
      throw new TermadaError("INVALID_ARGUMENT", `Invalid screen cursor "${cursor.slice(0, 64)}"`, {
        hint: "Pass the next_cursor of an earlier session_screen, or none for the whole screen",
      });
    }
    return m[1] === this.#id ? parseInt(m[2]!, 36) : -1;
  }

  /**
   * Frees the parser (~170 KiB at 80x24) while keeping the mirror usable: the next snapshot
   * replays the ring. For sessions nobody has looked at for a while. Exact as long as the ring
   * still holds the session's whole output; otherwise state set before the ring's first byte (say,
   * entering the alternate screen) is lost. Does nothing while a snapshot runs.
   */
  release(): void {
    if (!this.#busy) this.#disposeTerminal();
  }

  /** Frees the parser. Idempotent; a snapshot in progress rejects with `STOPPED`. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    // A write in flight still holds xterm timers: the catch-up loop disposes when it returns.
    if (!this.#busy) this.#disposeTerminal();
  }

  async #snapshot(target: number): Promise<ScreenRead> {
    this.#checkLive();
    this.#busy = true;
    try {
      await this.#catchUp(target);
    } finally {
      this.#busy = false;
      if (this.#disposed) this.#disposeTerminal();
    }
    this.#checkLive();
    return this.#read(this.#term!);
  }

  async #catchUp(requested: number): Promise<void> {
    const ring = this.#ring;
    // If the ring already dropped what was asked for, the newest screen is the best answer.
    const target = requested < ring.startOffset ? ring.totalBytes : requested;
    let term = this.#term;
    if (term === null || this.#fed < ring.startOffset) {
      this.#disposeTerminal();
      this.#prune();
      const base = this.#sizes[0]!;
      const { Terminal } = await loadXterm();
      if (this.#disposed) return;
      term = new Terminal({
        cols: base.cols,
        rows: base.rows,
        scrollback: this.#scrollback,
        allowProposedApi: true, // for `buffer`
        logLevel: "off", // xterm logs through console.log, and stdout belongs to MCP
      });
      // The title survives a replay: a real terminal keeps it until a program sets another.
      term.onTitleChange((title) => this.#title = title);
      this.#term = term;
      this.#applied = 1;
      this.#fed = ring.startOffset;
    }
    // A snapshot that fell back to the newest bytes may already have fed past this target.
    const end = Math.max(target, this.#fed);
    // One copy taken now, so bytes the ring drops while xterm parses cannot be missed.
    const { bytes, from } = ring.since(this.#fed, end);
    this.#fed = end;
    let done = from;
    for (;;) {
      // Re-read on each pass: resize() may add or replace entries while we await.
      const next = this.#sizes[this.#applied];
      if (next === undefined || next.at > end) break;
      if (next.at > done) {
        await write(term, bytes.subarray(done - from, next.at - from));
        done = next.at;
        if (this.#disposed) return;
        continue;
      }
      term.resize(next.cols, next.rows);
      this.#applied++;
    }
    await write(term, bytes.subarray(done - from));
  }

  #read(term: xterm.Terminal): ScreenRead {
    const last = this.#last;
    if (last?.term === term && last.fed === this.#fed && last.applied === this.#applied) {
      // Nothing was parsed since: the same screen (an agent polling an idle program costs ~1 µs).
      return { ...last.read, lines: last.read.lines.slice() };
    }
    const buffer = term.buffer.active;
    const lines: string[] = [];
    for (let y = 0; y < term.rows; y++) {
      lines.push(buffer.getLine(buffer.baseY + y)?.translateToString(true) ?? "");
    }
    this.#track(lines, term.cols);
    const modes = term.modes;
    const read: ScreenRead = {
      lines,
      cursor: { x: buffer.cursorX, y: buffer.cursorY },
      cols: term.cols,
      rows: term.rows,
      title: this.#title,
      alternate: buffer.type === "alternate",
      modes: {
        applicationCursor: modes.applicationCursorKeysMode,
        bracketedPaste: modes.bracketedPasteMode,
      },
      nextCursor: `s${this.#id}.${this.#gen.toString(36)}`,
    };
    this.#last = {
      read: { ...read, lines: lines.slice() },
      term,
      fed: this.#fed,
      applied: this.#applied,
    };
    return read;
  }

  /** Stamps the rows whose text differs from the last read with a new generation. */
  #track(lines: string[], cols: number): void {
    if (cols !== this.#trackedCols || lines.length !== this.#rowText.length) {
      // A new size (or the first read): every row is new, older cursors get the full screen.
      this.#gen++;
      this.#baseGen = this.#gen;
      this.#trackedCols = cols;
      this.#rowText = lines.slice();
      this.#rowGen = lines.map(() => this.#gen);
      return;
    }
    const next = this.#gen + 1;
    let changed = false;
    for (let y = 0; y < lines.length; y++) {
      if (lines[y] !== this.#rowText[y]) {
        this.#rowText[y] = lines[y]!;
        this.#rowGen[y] = next;
        changed = true;
      }
    }
    if (changed) this.#gen = next;
  }

  /** Forgets sizes the terminal no longer needs, keeping the one in effect at `startOffset`. */
  #prune(): void {
    const start = this.#ring.startOffset;
    let keepFrom = 0;
    while (keepFrom + 1 < this.#sizes.length && this.#sizes[keepFrom + 1]!.at <= start) keepFrom++;
    // Entries the terminal already applied are not needed again unless a replay starts at them.
    if (this.#term !== null) keepFrom = Math.min(keepFrom, this.#applied - 1);
    if (keepFrom > 0) {
      this.#sizes.splice(0, keepFrom);
      this.#applied = Math.max(0, this.#applied - keepFrom);
    }
    if (this.#sizes.length > MAX_RESIZES) {
      // A resize storm inside the ring's window: drop the oldest intermediate size.
      this.#sizes.splice(1, 1);
      if (this.#applied > 1) this.#applied--;
    }
  }

  #checkLive(): void {
    if (this.#disposed) {
      throw new TermadaError("STOPPED", "Cannot read the screen: the session was closed");
    }
  }

  #disposeTerminal(): void {
    const term = this.#term;
    this.#term = null;
    this.#applied = 0;
    this.#last = null;
    term?.dispose();
  }
}

/**
 * The rendered screen of a session, computed on demand: a headless xterm.js parses the session's
 * raw bytes (from its `RawRing`) only when someone asks for a snapshot. Sessions nobody looks at
 * never create a terminal, and a terminal that fell behind the ring replays what the ring still
 * holds instead of keeping its own copy of the output.
 *
 * Resizes are recorded at the ring offset where they happened and applied between the same bytes
 * when the parser catches up, so output written before a resize is laid out at the old size.
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

export interface ScreenMirrorOptions {
  cols: number;
  rows: number;
  /** Lines kept above the screen by the parser (default 0: only the screen matters here). */
  scrollback?: number;
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
    // The screen as of this call, even if earlier snapshots are still catching up.
    const target = this.#ring.totalBytes;
    const run = this.#chain.then(() => this.#snapshot(target));
    this.#chain = run.catch(() => {/* the caller of this snapshot gets the error */});
    return run;
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

  async #snapshot(target: number): Promise<ScreenSnapshot> {
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

  #read(term: xterm.Terminal): ScreenSnapshot {
    const buffer = term.buffer.active;
    const lines: string[] = [];
    for (let y = 0; y < term.rows; y++) {
      lines.push(buffer.getLine(buffer.baseY + y)?.translateToString(true) ?? "");
    }
    return {
      lines,
      cursor: { x: buffer.cursorX, y: buffer.cursorY },
      cols: term.cols,
      rows: term.rows,
      title: this.#title,
      alternate: buffer.type === "alternate",
    };
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
    term?.dispose();
  }
}

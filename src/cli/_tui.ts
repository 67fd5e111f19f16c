/**
 * Pure helpers for full-screen terminal views (`termada top`): fitting text into cells, column
 * layouts that drop low-priority columns on narrow screens, an incremental SSE parser, key
 * decoding for raw-mode input and a bounded ring. Nothing here touches the terminal: the caller
 * owns raw mode and the alternate screen (see `SCREEN`).
 */

/** Control sequences: enter/leave the alternate screen (cursor hidden, no autowrap). */
export const SCREEN = {
  enter: "\x1b[?1049h\x1b[?25l\x1b[?7l\x1b[2J",
  leave: "\x1b[?7h\x1b[?25h\x1b[?1049l",
} as const;

/** Characters that would move the cursor or start a sequence: shown as a space. */
// deno-lint-ignore no-control-regex
const CONTROL = /[\x00-\x1f\x7f-\x9f]/g;

/**
 * `text` made safe for one screen row and exactly `width` cells wide: control characters become
 * spaces, a longer text ends in "…", a shorter one is padded (one cell per code point).
 */
export function fit(text: string, width: number): string {
  if (width <= 0) return "";
  const chars = [...text.replace(CONTROL, " ")];
  if (chars.length > width) return chars.slice(0, width - 1).join("") + "…";
  return chars.join("") + " ".repeat(width - chars.length);
}

/** One column of a table: its title, its widest and narrowest size, when it is dropped. */
export interface Column {
  title: string;
  /** Cells wider than this are truncated. */
  max: number;
  /** The flexible column takes the room left; one per table. */
  flex?: boolean;
  /** The narrowest it is (the flexible column: before other columns are dropped). */
  min?: number;
  /** Lower numbers are dropped first when the screen is too narrow (default: never). */
  drop?: number;
}

/** Gap between columns. */
const GAP = 2;

/**
 * The width of each column for `rows` in `width` cells (0 for a dropped one): each column as
 * wide as its widest cell (up to `max`); columns are dropped by `drop` order until the flexible
 * one gets its `min`.
 */
export function layout(
  columns: readonly Column[],
  rows: readonly string[][],
  width: number,
): number[] {
  const natural = columns.map((c, i) =>
    Math.min(
      c.max,
      Math.max(c.min ?? 0, [...c.title].length, ...rows.map((r) => [...(r[i] ?? "")].length)),
    )
  );
  const shown = columns.map(() => true);
  const dropOrder = columns.map((c, i) => ({ i, d: c.drop })).filter((x) => x.d !== undefined)
    .sort((a, b) => a.d! - b.d!);
  const room = () => {
    let used = 0;
    let n = 0;
    columns.forEach((c, i) => {
      if (shown[i] && !c.flex) used += natural[i]!;
      if (shown[i]) n++;
    });
    return width - used - GAP * Math.max(0, n - 1);
  };
  const flexMin = columns.find((c) => c.flex)?.min ?? 0;
  for (const { i } of dropOrder) {
    if (room() >= flexMin) break;
    shown[i] = false;
  }
  const left = room();
  return columns.map((c, i) => !shown[i] ? 0 : c.flex ? Math.max(0, left) : natural[i]!);
}

/** One table row in `widths` (from `layout`); the result is exactly `width` cells. */
export function tableRow(
  cells: readonly string[],
  widths: readonly number[],
  width: number,
): string {
  const parts = widths.flatMap((w, i) => w > 0 ? [fit(cells[i] ?? "", w)] : []);
  return fit(parts.join(" ".repeat(GAP)).trimEnd(), width);
}

/** A bounded first-in first-out buffer: the oldest entries go once it holds `capacity`. */
export class Ring<T> {
  #items: T[] = [];
  readonly capacity: number;

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError("Bad ring capacity");
    this.capacity = capacity;
  }

  push(item: T): void {
    this.#items.push(item);
    if (this.#items.length > this.capacity) {
      this.#items.splice(0, this.#items.length - this.capacity);
    }
  }

  /** Newest first. */
  newest(n: number): T[] {
    return this.#items.slice(-n).reverse();
  }

  get length(): number {
    return this.#items.length;
  }
}

/** One event of a `text/event-stream`. */
export interface SseEvent {
  id?: string;
  event: string;
  data: string;
}

/** Bytes of one event before the stream is treated as broken (a daemon event is far smaller). */
const MAX_EVENT_CHARS = 1 << 20;

/**
 * An incremental `text/event-stream` parser: `push` a decoded chunk, get the events it
 * completed. Comments (keep-alives) are skipped; `event` defaults to "message".
 */
export class SseParser {
  #buf = "";

  push(chunk: string): SseEvent[] {
    this.#buf += chunk.replace(/\r\n?/g, "\n");
    const out: SseEvent[] = [];
    let end: number;
    while ((end = this.#buf.indexOf("\n\n")) >= 0) {
      const block = this.#buf.slice(0, end);
      this.#buf = this.#buf.slice(end + 2);
      const e = parseBlock(block);
      if (e) out.push(e);
    }
    if (this.#buf.length > MAX_EVENT_CHARS) throw new RangeError("Event stream message too large");
    return out;
  }
}

function parseBlock(block: string): SseEvent | undefined {
  const e: SseEvent = { event: "message", data: "" };
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "data") data.push(value);
    else if (field === "event") e.event = value;
    else if (field === "id") e.id = value;
  }
  if (data.length === 0 && e.id === undefined) return undefined;
  e.data = data.join("\n");
  return e;
}

/** A key as raw-mode input names it: a printable character, or one of these names. */
export type Key =
  | "up"
  | "down"
  | "left"
  | "right"
  | "home"
  | "end"
  | "pageup"
  | "pagedown"
  | "tab"
  | "backtab"
  | "enter"
  | "backspace"
  | "escape"
  | "ctrl-c"
  | "ctrl-d"
  | "ctrl-l"
  | "ctrl-u"
  | { char: string };

const SEQUENCES: Record<string, Key> = {
  "\x1b[A": "up",
  "\x1b[B": "down",
  "\x1b[C": "right",
  "\x1b[D": "left",
  "\x1bOA": "up",
  "\x1bOB": "down",
  "\x1bOC": "right",
  "\x1bOD": "left",
  "\x1b[H": "home",
  "\x1b[F": "end",
  "\x1b[1~": "home",
  "\x1b[4~": "end",
  "\x1b[5~": "pageup",
  "\x1b[6~": "pagedown",
  "\x1b[Z": "backtab",
};
const CONTROLS: Record<string, Key> = {
  "\t": "tab",
  "\r": "enter",
  "\n": "enter",
  "\x7f": "backspace",
  "\b": "backspace",
  "\x03": "ctrl-c",
  "\x04": "ctrl-d",
  "\x0c": "ctrl-l",
  "\x15": "ctrl-u",
};

/** The keys in one chunk of raw-mode input; unknown sequences are skipped whole. */
export function parseKeys(input: string): Key[] {
  const keys: Key[] = [];
  let i = 0;
  while (i < input.length) {
    const c = input[i]!;
    if (c === "\x1b") {
      // deno-lint-ignore no-control-regex
      const m = /^\x1b(\[[0-9;?]*[ -/]*[@-~]|O[A-Za-z])/.exec(input.slice(i));
      if (m) {
        const k = SEQUENCES[m[0]];
        if (k) keys.push(k);
        i += m[0].length;
        continue;
      }
      keys.push("escape");
      i++;
      continue;
    }
    const cp = input.codePointAt(i)!;
    const ch = String.fromCodePoint(cp);
    const control = CONTROLS[ch];
    if (control) keys.push(control);
    else if (cp >= 0x20) keys.push({ char: ch });
    i += ch.length;
  }
  return keys;
}

/** "512B", "1.2K", "34M" (powers of 1024). */
export function formatBytes(n: number): string {
  const units = ["B", "K", "M", "G", "T"];
  let v = Math.max(0, n);
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  const text = u === 0 || v >= 10 ? String(Math.round(v)) : v.toFixed(1);
  return text + units[u];
}

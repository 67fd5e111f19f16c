/**
 * Asciicast v2 for the dashboard's player and job screens: a bounded, defensive parser (a bad
 * line is skipped and counted, never fatal), a bounded loader for
 * `GET /api/sessions/:id/recording`, a plain-text search index over the output events, and the
 * screen a job left (its window of the cast). DOM-free, so tests import it directly.
 */

/** Bounds: a cast larger than this is cut (the events up to the cut are kept). */
export const CAST_LIMITS = {
  maxBytes: 64 * 1024 * 1024,
  maxEvents: 1_000_000,
  /** A PTY grid beyond this is not a terminal size (the header or a resize is refused). */
  maxCols: 1000,
  maxRows: 1000,
} as const;

export interface CastHeader {
  version: 2;
  width: number;
  height: number;
  /** Unix seconds of the recording's start. */
  timestamp?: number;
  title?: string;
}

/** `o`: output, `r`: resize (`COLSxROWS`), `m`: marker. Input (`i`) and unknown codes are dropped. */
export interface CastEvent {
  t: number;
  code: "o" | "r" | "m";
  data: string;
}

export interface Cast {
  header: CastHeader;
  events: CastEvent[];
  /** The last event's time (seconds from the start). */
  duration: number;
  /** Lines that were not a valid event (or a later header), skipped. */
  skipped: number;
  /** The cast passed a bound (bytes or events): what came after was left out. */
  truncated: boolean;
}

export class CastError extends Error {}

const posInt = (v: unknown, max: number): v is number =>
  typeof v === "number" && Number.isInteger(v) && v >= 1 && v <= max;

/** `COLSxROWS` of a resize event, or undefined when it is not one. */
export function parseSize(data: string): { cols: number; rows: number } | undefined {
  const m = /^(\d{1,4})x(\d{1,4})$/.exec(data);
  if (!m) return undefined;
  const cols = Number(m[1]);
  const rows = Number(m[2]);
  return posInt(cols, CAST_LIMITS.maxCols) && posInt(rows, CAST_LIMITS.maxRows)
    ? { cols, rows }
    : undefined;
}

function header(v: unknown): CastHeader | undefined {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
  const h = v as Record<string, unknown>;
  if (h.version !== 2) return undefined;
  if (!posInt(h.width, CAST_LIMITS.maxCols) || !posInt(h.height, CAST_LIMITS.maxRows)) {
    return undefined;
  }
  return {
    version: 2,
    width: h.width,
    height: h.height,
    ...(typeof h.timestamp === "number" && Number.isFinite(h.timestamp)
      ? { timestamp: h.timestamp }
      : {}),
    ...(typeof h.title === "string" ? { title: h.title.slice(0, 200) } : {}),
  };
}

/**
 * Parses an asciicast v2 text. Throws CastError when the first line is not a v2 header with a
 * size. Event times that go backwards are held at the previous time; a later header (parts
 * joined by hand) continues the timeline, with a resize when its size differs.
 */
export function parseCast(text: string, opts: { truncated?: boolean } = {}): Cast {
  let truncated = opts.truncated ?? false;
  if (text.length > CAST_LIMITS.maxBytes) {
    text = text.slice(0, text.lastIndexOf("\n", CAST_LIMITS.maxBytes) + 1);
    truncated = true;
  }
  let pos = 0;
  const next = (): string | undefined => {
    if (pos >= text.length) return undefined;
    let nl = text.indexOf("\n", pos);
    if (nl < 0) nl = text.length;
    const line = text.slice(pos, nl);
    pos = nl + 1;
    return line;
  };
  let first = next();
  while (first !== undefined && first.trim() === "") first = next();
  if (first === undefined) throw new CastError("The recording is empty");
  let h: CastHeader | undefined;
  try {
    h = header(JSON.parse(first));
  } catch {
    h = undefined;
  }
  if (!h) throw new CastError("The recording does not start with an asciicast v2 header");
  const events: CastEvent[] = [];
  let skipped = 0;
  let last = 0;
  let offset = 0;
  let size = `${h.width}x${h.height}`;
  for (let line = next(); line !== undefined; line = next()) {
    if (line.trim() === "") continue;
    if (events.length >= CAST_LIMITS.maxEvents) {
      truncated = true;
      break;
    }
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      skipped++;
      continue;
    }
    if (!Array.isArray(v)) {
      const again = header(v);
      if (!again) {
        skipped++;
        continue;
      }
      offset = last;
      const s = `${again.width}x${again.height}`;
      if (s !== size) events.push({ t: last, code: "r", data: size = s });
      continue;
    }
    const [t, code, data] = v as unknown[];
    if (
      typeof t !== "number" || !Number.isFinite(t) || t < 0 || typeof code !== "string" ||
      typeof data !== "string"
    ) {
      skipped++;
      continue;
    }
    if (code !== "o" && code !== "r" && code !== "m") continue;
    if (code === "r") {
      if (!parseSize(data)) {
        skipped++;
        continue;
      }
      size = data;
    }
    last = Math.max(last, t + offset);
    events.push({ t: last, code, data });
  }
  return { header: h, events, duration: last, skipped, truncated };
}

/**
 * Reads a cast from the operator API with the token in a header, at most CAST_LIMITS.maxBytes
 * (then the rest is cancelled and the cast marked truncated). Throws an Error with `status` on
 * an HTTP error.
 */
export async function loadCast(
  token: string,
  sessionId: string,
  signal?: AbortSignal,
): Promise<Cast> {
  const res = await fetch(`/api/sessions/${encodeURIComponent(sessionId)}/recording`, {
    headers: { authorization: `Bearer ${token}`, "x-termada-operator": "dashboard" },
    cache: "no-store",
    signal,
  });
  if (!res.ok || !res.body) {
    const body = await res.json().catch(() => ({})) as { error?: { message?: string } };
    throw Object.assign(new Error(body.error?.message ?? `HTTP ${res.status}`), {
      status: res.status,
    });
  }
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  const parts: string[] = [];
  let bytes = 0;
  let truncated = false;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes += value.byteLength;
    if (bytes > CAST_LIMITS.maxBytes) {
      truncated = true;
      await reader.cancel().catch(() => {});
      break;
    }
    parts.push(dec.decode(value, { stream: true }));
  }
  let text = parts.join("") + (truncated ? "" : dec.decode());
  // A cut cast ends mid-line: keep whole lines only.
  if (truncated) text = text.slice(0, text.lastIndexOf("\n") + 1);
  return parseCast(text, { truncated });
}

const ESCAPES =
  // deno-lint-ignore no-control-regex
  /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[P^_][^\x1b]*\x1b\\|\x1b[ -/]*[0-~]|[\x00-\x08\x0b-\x1f\x7f]/g;

/** The printable text of terminal output (escape sequences and control characters out). */
export function plainText(data: string): string {
  return data.replace(/\r\n/g, "\n").replace(ESCAPES, "");
}

/** The output events' text, searchable: a match maps back to the event that completes it. */
export class CastIndex {
  readonly #text: string;
  /** Per output event: where its text starts in `#text`, and its index in the cast. */
  readonly #starts: number[] = [];
  readonly #events: number[] = [];

  constructor(cast: Cast) {
    const chunks: string[] = [];
    let at = 0;
    cast.events.forEach((e, i) => {
      if (e.code !== "o") return;
      const t = plainText(e.data).toLowerCase();
      if (!t) return;
      this.#starts.push(at);
      this.#events.push(i);
      chunks.push(t);
      at += t.length;
    });
    this.#text = chunks.join("");
  }

  /** The first match at or after `from` (a text offset): its offset and the event completing it. */
  find(query: string, from = 0): { offset: number; event: number } | undefined {
    const q = query.toLowerCase();
    if (!q) return undefined;
    const offset = this.#text.indexOf(q, from);
    if (offset < 0) return undefined;
    return { offset, event: this.#eventAt(offset + q.length - 1) };
  }

  /** How many matches (at most `max`). */
  count(query: string, max = 10_000): number {
    const q = query.toLowerCase();
    if (!q) return 0;
    let n = 0;
    for (let i = this.#text.indexOf(q); i >= 0 && n < max; i = this.#text.indexOf(q, i + 1)) n++;
    return n;
  }

  #eventAt(offset: number): number {
    let lo = 0;
    let hi = this.#starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.#starts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return this.#events[lo] ?? 0;
  }
}

// deno-lint-ignore no-control-regex
const ALT_SCREEN = /\x1b\[\?(?:1049|1047|47)([hl])/g;

/**
 * What to write to show the screen a job left: every event up to the job's end (seconds from
 * the cast's start; Infinity while it runs), cut just before the last alternate-screen exit in
 * the job's window (unless the alternate screen was entered again after it) — so a full-screen
 * program's last frame stays instead of the shell's screen it restored on exit. `fullScreen`:
 * the window used the alternate screen.
 */
export function jobScreen(
  cast: Cast,
  start: number,
  end: number,
): { writes: CastEvent[]; fullScreen: boolean } {
  const writes: CastEvent[] = [];
  let fullScreen = false;
  let cut: { index: number; at: number } | undefined;
  for (const e of cast.events) {
    if (e.t > end) break;
    writes.push(e);
    if (e.code !== "o" || e.t < start) continue;
    ALT_SCREEN.lastIndex = 0;
    for (let m = ALT_SCREEN.exec(e.data); m !== null; m = ALT_SCREEN.exec(e.data)) {
      fullScreen = true;
      cut = m[1] === "l" ? { index: writes.length - 1, at: m.index } : undefined;
    }
  }
  if (cut) {
    const e = writes[cut.index]!;
    writes.length = cut.index + 1;
    writes[cut.index] = { ...e, data: e.data.slice(0, cut.at) };
  }
  return { writes, fullScreen };
}

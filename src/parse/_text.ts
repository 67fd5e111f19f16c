/**
 * What every parser shares: the bounds, the line preparation (CRLF, carriage-return overwrites,
 * ANSI escapes), the warnings collector and small linear-time token helpers. No regex here runs
 * on an untrusted line except anchored ones over short, already-bounded tokens.
 */

/** The bounds every parser keeps (documented in docs/PARSERS.md). */
export const PARSE_LIMITS = {
  /** Characters of output processed; the rest is ignored with a warning. */
  maxInputChars: 4 * 1024 * 1024,
  /** Entries (files, processes, commits, sockets…) kept per result; the rest are counted. */
  maxEntries: 100_000,
  /** Characters kept of any one string field (a path, a command line, a header value). */
  maxField: 4096,
  /** Line numbers kept in a warning or an error. */
  maxLineNumbers: 10,
  /** Warnings kept per result. */
  maxWarnings: 20,
} as const;

/** Characters kept of short fields (user names, states, times, addresses). */
export const SHORT_FIELD = 256;

/** A non-fatal finding: lines skipped, fields shortened, a cap reached. */
export interface ParseWarning {
  message: string;
  /** 1-based line numbers (the first few) the warning is about. */
  lines?: number[];
  /** How many lines or items it is about, when more than the listed ones. */
  count?: number;
}

/** Thrown by a parser when nothing useful came out; the registry turns it into `parse_error`. */
export class ParseFailure extends Error {
  readonly line: number | undefined;
  constructor(message: string, line?: number) {
    super(message);
    this.name = "ParseFailure";
    this.line = line;
  }
}

/** One prepared line: its 1-based number in the original output and its text. */
export interface Line {
  n: number;
  text: string;
}

/**
 * Per-call state of one parse: the prepared lines, and what was skipped or shortened. Parsers
 * call `unparsed(line)` for every line they could not read instead of dropping it silently.
 */
export class ParseContext {
  readonly lines: Line[];
  readonly now: Date;
  #unparsed: number[] = [];
  #unparsedCount = 0;
  #clipped = 0;
  #dropped = 0;
  #notes: ParseWarning[] = [];

  /** `keepNul`: NUL bytes stay (records of `git status -z`); other controls are removed. */
  constructor(output: string, now: Date, keepNul = false) {
    this.now = now;
    const prepared = prepare(output, keepNul);
    this.lines = prepared.lines;
    if (prepared.truncated) {
      this.note({
        message:
          `Output longer than ${PARSE_LIMITS.maxInputChars} characters: the rest was not parsed`,
      });
    }
    if (prepared.ansi) this.note({ message: "ANSI escape sequences were removed before parsing" });
  }

  /** Records a line that could not be read. */
  unparsed(line: Line | number): void {
    this.#unparsedCount++;
    if (this.#unparsed.length < PARSE_LIMITS.maxLineNumbers) {
      this.#unparsed.push(typeof line === "number" ? line : line.n);
    }
  }

  get unparsedCount(): number {
    return this.#unparsedCount;
  }

  get firstUnparsed(): number | undefined {
    return this.#unparsed[0];
  }

  /** `s` cut to `max` characters (the field bound by default; counted). */
  clip(s: string, max: number = PARSE_LIMITS.maxField): string {
    if (s.length <= max) return s;
    this.#clipped++;
    return s.slice(0, max);
  }

  /** `s` cut to the bound of short fields (names, states, times: 256). */
  short(s: string): string {
    return this.clip(s, SHORT_FIELD);
  }

  /** True while `list` may take one more item (`max`: the entry bound); counts what is dropped. */
  room(list: readonly unknown[], max: number = PARSE_LIMITS.maxEntries): boolean {
    if (list.length < max) return true;
    this.#dropped++;
    return false;
  }

  note(w: ParseWarning): void {
    if (this.#notes.length < PARSE_LIMITS.maxWarnings) this.#notes.push(w);
  }

  /** Every warning of this parse (unparsed lines first). */
  warnings(): ParseWarning[] {
    const out: ParseWarning[] = [];
    if (this.#unparsedCount > 0) {
      out.push({
        message: `${this.#unparsedCount} line${
          this.#unparsedCount === 1 ? "" : "s"
        } could not be parsed`,
        lines: [...this.#unparsed],
        count: this.#unparsedCount,
      });
    }
    if (this.#clipped > 0) {
      out.push({
        message:
          `${this.#clipped} field(s) were cut to their bound (${SHORT_FIELD} or ${PARSE_LIMITS.maxField} characters)`,
        count: this.#clipped,
      });
    }
    if (this.#dropped > 0) {
      out.push({
        message: `A list reached its bound (${PARSE_LIMITS.maxEntries} entries, or fewer for ` +
          `sections, headers, logs): ${this.#dropped} item(s) were left out`,
        count: this.#dropped,
      });
    }
    return [...out, ...this.#notes].slice(0, PARSE_LIMITS.maxWarnings);
  }
}

interface Prepared {
  lines: Line[];
  truncated: boolean;
  ansi: boolean;
}

/**
 * Output → lines: cut at the input bound (at a line end when there is one), CRLF and lone CR
 * handled as a terminal shows them (the text after the last CR of a line wins), ANSI CSI/OSC
 * sequences and other C0 controls except TAB removed. One pass per step, linear.
 */
export function prepare(output: string, keepNul = false): Prepared {
  let text = output;
  let truncated = false;
  if (text.length > PARSE_LIMITS.maxInputChars) {
    truncated = true;
    text = text.slice(0, PARSE_LIMITS.maxInputChars);
    const nl = text.lastIndexOf("\n");
    if (nl > 0) text = text.slice(0, nl);
  }
  let ansi = false;
  if (text.includes("\x1b")) {
    ansi = true;
    text = stripAnsi(text);
  }
  const raw = text.split("\n");
  if (raw.length > 0 && raw[raw.length - 1] === "") raw.pop();
  const lines: Line[] = [];
  for (let i = 0; i < raw.length; i++) {
    let t = raw[i]!;
    let end = t.length;
    while (end > 0 && t.charCodeAt(end - 1) === 0x0d) end--;
    if (end < t.length) t = t.slice(0, end);
    const cr = t.lastIndexOf("\r");
    if (cr >= 0) t = t.slice(cr + 1);
    lines.push({ n: i + 1, text: dropControls(t, keepNul) });
  }
  return { lines, truncated, ansi };
}

/** Removes CSI (`ESC [ … final`), OSC (`ESC ] … BEL|ST`) and two-byte ESC sequences. */
export function stripAnsi(s: string): string {
  let out = "";
  let from = 0;
  let i = s.indexOf("\x1b");
  while (i >= 0) {
    out += s.slice(from, i);
    let j = i + 1;
    const c = s[j];
    if (c === "[") {
      j++;
      while (j < s.length) {
        const code = s.charCodeAt(j);
        j++;
        if (code >= 0x40 && code <= 0x7e) break;
      }
    } else if (c === "]") {
      j++;
      while (j < s.length) {
        if (s[j] === "\x07") {
          j++;
          break;
        }
        if (s[j] === "\x1b" && s[j + 1] === "\\") {
          j += 2;
          break;
        }
        if (s[j] === "\n") break;
        j++;
      }
    } else if (c !== undefined) {
      j++;
    }
    from = j;
    i = s.indexOf("\x1b", j);
  }
  return out + s.slice(from);
}

function dropControls(s: string, keepNul: boolean): string {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09 && !(keepNul && c === 0)) || c === 0x7f) {
      return s.replace(keepNul ? CONTROLS_BUT_NUL : CONTROLS, "");
    }
  }
  return s;
}

// deno-lint-ignore no-control-regex
const CONTROLS = /[\x00-\x08\x0a-\x1f\x7f]/g;
// deno-lint-ignore no-control-regex
const CONTROLS_BUT_NUL = /[\x01-\x08\x0a-\x1f\x7f]/g;

/** A whitespace-separated token with its position in the line. */
export interface Token {
  text: string;
  start: number;
  end: number;
}

/**
 * The first `max` whitespace-separated tokens of `line` and the offset just after the last one
 * taken (so the caller can keep the rest verbatim, e.g. a name with spaces).
 */
export function tokens(line: string, max = Infinity): Token[] {
  const out: Token[] = [];
  let i = 0;
  const n = line.length;
  while (i < n && out.length < max) {
    while (i < n && isSpace(line.charCodeAt(i))) i++;
    if (i >= n) break;
    const start = i;
    while (i < n && !isSpace(line.charCodeAt(i))) i++;
    out.push({ text: line.slice(start, i), start, end: i });
  }
  return out;
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

/** A non-negative decimal integer (no sign, no dot), or undefined. */
export function toUint(s: string | undefined): number | undefined {
  if (s === undefined || s.length === 0 || s.length > 16) return undefined;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return undefined;
  }
  return Number(s);
}

/** A plain decimal number ("12", "0.5", "-3"), or undefined. */
export function toNumber(s: string | undefined): number | undefined {
  if (s === undefined || s.length === 0 || s.length > 24) return undefined;
  if (!/^-?\d+(?:\.\d+)?$/.test(s)) return undefined;
  return Number(s);
}

const UNIT_POWER: Record<string, number> = {
  "": 0,
  K: 1,
  M: 2,
  G: 3,
  T: 4,
  P: 5,
  E: 6,
  Z: 7,
  Y: 8,
};

/**
 * A human size ("4.0K", "12G", "466Gi", "9.1Mi", "0B", "1,5G" is not accepted) in bytes.
 * `base` is 1024 unless the tool was told `--si`; a trailing `i` always means 1024.
 */
export function humanBytes(s: string, base = 1024): number | undefined {
  if (s.length === 0 || s.length > 24) return undefined;
  if (s.endsWith("Bi")) s = s.slice(0, -1); // macOS df -h prints "0Bi"
  const m = /^(\d+(?:\.\d+)?)([KMGTPEZY]?)(i?)(B?)$/i.exec(s);
  if (!m) return undefined;
  const power = UNIT_POWER[m[2]!.toUpperCase()];
  if (power === undefined) return undefined;
  const b = m[3] ? 1024 : base;
  return Math.round(Number(m[1]) * b ** power);
}

/** `-la --all -C x` → short flag letters and long options (with their `=value` cut off). */
export interface Flags {
  short: Set<string>;
  long: Set<string>;
  /** Long options with their values (`--format=json` → "json"). */
  values: Map<string, string>;
  /** Words that are not options. */
  operands: string[];
}

/**
 * Flags of argv (after argv[0]). `withValue` lists short letters that take an argument (the
 * rest of the cluster or the next word), and `longWithValue` long options that take one.
 */
export function flags(
  args: readonly string[],
  withValue = "",
  longWithValue: readonly string[] = [],
): Flags {
  const short = new Set<string>();
  const long = new Set<string>();
  const values = new Map<string, string>();
  const operands: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--") {
      operands.push(...args.slice(i + 1));
      break;
    }
    if (a.startsWith("--")) {
      const eq = a.indexOf("=");
      const name = eq < 0 ? a.slice(2) : a.slice(2, eq);
      long.add(name);
      if (eq >= 0) values.set(name, a.slice(eq + 1));
      else if (longWithValue.includes(name) && i + 1 < args.length) values.set(name, args[++i]!);
      continue;
    }
    if (a.startsWith("-") && a.length > 1) {
      for (let j = 1; j < a.length; j++) {
        const c = a[j]!;
        short.add(c);
        if (withValue.includes(c)) {
          if (j === a.length - 1) i++;
          break;
        }
      }
      continue;
    }
    operands.push(a);
  }
  return { short, long, values, operands };
}

/** The last path segment of a command name (`/usr/bin/ls` → `ls`). */
export function basename(cmd: string): string {
  const slash = cmd.lastIndexOf("/");
  return slash < 0 ? cmd : cmd.slice(slash + 1);
}

/**
 * A C-quoted path as git writes it (`"with \"q\" \303\251"`) → text; unquoted input is returned
 * as it is. Octal escapes are bytes, decoded as UTF-8.
 */
export function unquoteC(s: string): string {
  if (s.length < 2 || s[0] !== '"' || s[s.length - 1] !== '"') return s;
  const bytes: number[] = [];
  const enc = new TextEncoder();
  for (let i = 1; i < s.length - 1; i++) {
    const c = s[i]!;
    if (c !== "\\") {
      const code = s.codePointAt(i)!;
      if (code > 0xffff) i++;
      bytes.push(...enc.encode(String.fromCodePoint(code)));
      continue;
    }
    const d = s[++i];
    const simple: Record<string, number> = {
      n: 10,
      t: 9,
      r: 13,
      a: 7,
      b: 8,
      f: 12,
      v: 11,
      '"': 34,
      "\\": 92,
    };
    if (d !== undefined && d in simple) bytes.push(simple[d]!);
    else if (d !== undefined && d >= "0" && d <= "7") {
      const oct = s.slice(i, i + 3);
      bytes.push(parseInt(oct, 8) & 0xff);
      i += oct.length - 1;
    } else if (d !== undefined) bytes.push(...enc.encode(d));
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

/**
 * A copy of `o` without the keys whose value is `undefined` (optional fields stay absent, as
 * the strict schemas want). Copying is much faster than `delete`, which turns objects into
 * slow dictionaries.
 */
export function compact<T extends Record<string, unknown>>(o: T): T {
  const out: Record<string, unknown> = {};
  for (const k in o) {
    const v = o[k];
    if (v !== undefined) out[k] = v;
  }
  return out as T;
}

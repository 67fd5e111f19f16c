/**
 * Masks secrets in terminal output before anyone sees it: registered literal values (passwords an
 * agent typed) and built-in token patterns. Works on bytes; a chunk without any candidate is
 * returned untouched, so ordinary output costs one byte scan.
 */
import { encodeBase64, invalidArgument } from "../shared/mod.ts";
import {
  ALL_FLAGS,
  BYTE_FLAGS,
  classify,
  HAS_ANCHOR,
  HAS_ESC,
  PAIR_FLAGS,
  type WordView,
  wordView,
} from "./scan.ts";

export interface RedactorOptions {
  /** Built-in token patterns (default true). */
  patterns?: boolean;
  /** Secret values to mask from the start (same rules as addLiteral). */
  literals?: string[];
  /**
   * Extra patterns from the configuration (matched over the bytes as Latin-1, so offsets are
   * byte offsets: write them in ASCII). The whole match is masked. They run over output agents
   * control, so they are compiled with the linear-time engine (src/shared/regex.ts): no output
   * can make them backtrack.
   */
  extraPatterns?: readonly Matcher[];
  /** The daemon-wide secrets (vault values) this redactor masks besides its own literals. */
  secrets?: SecretSet;
}

/** A compiled pattern (src/shared's LinearRegex satisfies it). */
export interface Matcher {
  exec(text: string, from?: number): { index: number; end: number } | null;
}

/** Adds the byte spans of every non-empty match of `patterns` in d[from, to). */
function extraSpans(
  d: Uint8Array,
  from: number,
  to: number,
  patterns: readonly Matcher[],
  spans: number[],
): void {
  const text = latin1.decode(d.subarray(from, to));
  for (const re of patterns) {
    let at = 0;
    while (at <= text.length) {
      const m = re.exec(text, at);
      if (!m) break;
      if (m.end > m.index) spans.push(from + m.index, from + m.end);
      at = m.end > m.index ? m.end : m.index + 1;
    }
  }
}

/** What redact() knows of the text around the bytes it is given. */
export interface RedactContext {
  /**
   * The start of the current line, already handed out (unredacted; the caller keeps at most
   * MAX_LINE_HEAD bytes of it): the rules see it ahead of the bytes, so a value whose key went out
   * before a pause is still masked. None of it is returned.
   */
  head?: Uint8Array;
  /**
   * A look at text that will be redacted again later (a prompt, a wait's match): the PEM block
   * state of the redactor's stream of lines is left as it was.
   */
  peek?: boolean;
}

/** The most of a line's handed-out start a caller keeps as RedactContext.head. */
export const MAX_LINE_HEAD = 1024;
/** The longest run at the end of a partial line held back as a token still being printed. */
const MAX_TOKEN_HOLD = 512;

/** Streaming redactor over raw terminal bytes; see Redactor.stream. */
export interface RedactStream {
  /**
   * Returns the redacted bytes that are safe to hand out now. `flags` (scan.ts `classify` of the
   * chunk, or of a larger chunk it is part of) lets a chunk without anchors or escapes skip those
   * scans; without it every scan runs.
   */
  push(chunk: Uint8Array, flags?: number): Uint8Array;
  /**
   * A bulk chunk's tail that may be a token cut by the read (see RAW_TOKEN_HOLD_MIN) is held
   * with the next chunk; the caller calls release() when none came for a while.
   */
  readonly tokenHeld: boolean;
  /** Hands out (redacted) the part of the held tail kept for a token, not the part a literal may continue. */
  release(): Uint8Array;
  /** Returns the held-back tail, redacted; call at the end of the stream. */
  flush(): Uint8Array;
}

/**
 * A raw chunk of at least this many new bytes is bulk output, whose end is where a read
 * happened to stop, maybe inside a token: its tail that may be a token still being printed
 * (partialHoldStart) is held for the next chunk, so the pattern sees the token whole. A smaller
 * one (an echo of a key typed) is handed out at once.
 */
export const RAW_TOKEN_HOLD_MIN = 256;

/** Shortest literal accepted: shorter values would mask ordinary text. */
const MIN_LITERAL_BYTES = 4;
/** Longest literal accepted. */
const MAX_LITERAL_BYTES = 4096;
/** Most literals one redactor holds. */
const MAX_LITERALS = 256;

const MASK = new TextEncoder().encode("[REDACTED]");
const STAR = 0x2a;
const LF = 0x0a;
const EMPTY = new Uint8Array(0);
/** Lines of a PEM private key block masked before the block is considered over. */
const MAX_PEM_LINES = 512;

// ---------------------------------------------------------------------------------------------
// Built-in patterns. They run on one line at a time, decoded as windows-1252 so that string
// indexes are byte offsets (UTF-8 bytes become non-ASCII characters that no pattern matches).

/** Whole-match rules (the token itself is masked). Case sensitive: the formats are. */
const TOKEN_RULES: readonly RegExp[] = [
  // GitHub classic tokens and fine-grained PATs.
  /(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{36,}/g,
  /(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{22,}/g,
  // AWS access key ids.
  /(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])/g,
  // OpenAI / Anthropic style keys: sk- (sk-proj-, sk-ant-…) and at least 20 key characters, one a digit.
  /(?<![A-Za-z0-9_-])sk-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}/g,
  // Slack tokens.
  /(?<![A-Za-z0-9_-])xox[abposr]-[A-Za-z0-9-]{10,}/g,
  // Google API keys.
  /(?<![A-Za-z0-9_-])AIza[A-Za-z0-9_-]{35}/g,
  // JWTs: header.payload.signature in base64url, header starting with `{"` (eyJ).
  /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{7,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g,
];

const KEY = String.raw`(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]*` +
  String.raw`(?:password|passwd|secret|token|(?:api|secret|private|access)[_-]?key)`;

/** Value rules: group 1 is the prefix kept, group VALUE_GROUP[i] the value masked. */
const VALUE_RULES: readonly RegExp[] = [
  // Authorization: Bearer|Basic|Token <credentials>
  new RegExp(
    String.raw`((?<![A-Za-z0-9])authorization["']?[:=][ \t]*["']?(?:bearer|basic|token)[ \t]+)` +
      String.raw`([A-Za-z0-9._~+/=-]+)`,
    "gi",
  ),
  // key="value" / key='value'
  new RegExp(String.raw`(${KEY}["']?=(["']))([^\x00-\x1f]*?)\2`, "gi"),
  // key=value (up to whitespace, a quote or &)
  new RegExp(String.raw`(${KEY}["']?=)([^\x00-\x20\x7f"'&]+)`, "gi"),
  // "key": "value" (JSON, YAML, code)
  new RegExp(String.raw`(${KEY}["']?:[ \t]*(["']))([^\x00-\x1f]*?)\2`, "gi"),
  // YAML `password: value` at the start of a line (password/passwd/secret keys only)
  new RegExp(
    String.raw`^([ \t]*(?:-[ \t]+)?[A-Za-z0-9_.-]*(?:password|passwd|secret):[ \t]+)` +
      String.raw`([^\x00-\x20\x7f"'#|>&*!%@\x60{[][^\x00-\x1f\x7f]*?)(?=[ \t]*\r?$)`,
    "i",
  ),
];
const VALUE_GROUP = [2, 3, 2, 3, 2] as const;

/**
 * How each token rule's match begins (a rule added above needs its lead here: the test that cuts
 * every rule's sample at every byte holds them to it). A partial line ending in a prefix of a
 * lead, or a lead and then token characters, may be a token still being printed.
 */
const TOKEN_LEADS: readonly string[] = [
  ..."pousr".split("").map((c) => `gh${c}_`),
  "github_pat_",
  "AKIA",
  "ASIA",
  "sk-",
  ..."abposr".split("").map((c) => `xox${c}-`),
  "AIza",
  "eyJ",
];
/** Bytes a token's run is made of, its lead included: A-Z a-z 0-9 _ . - */
const TOKEN_CHAR = new Uint8Array(256);
/** A-Z a-z 0-9 (what may not come right before a token). */
const ALNUM = new Uint8Array(256);
/** First bytes of the leads. */
const LEAD_FIRST = new Uint8Array(256);
for (let b = 0; b < 256; b++) {
  const c = String.fromCharCode(b);
  if (/[A-Za-z0-9_.-]/.test(c)) TOKEN_CHAR[b] = 1;
  if (/[A-Za-z0-9]/.test(c)) ALNUM[b] = 1;
}
/**
 * A quoted value after a key whose closing quote has not come yet, at the end of a partial line
 * (group 2: the value so far). Run only on a line's last MAX_LINE_HEAD bytes, at a commit.
 */
const OPEN_QUOTED_VALUE =
  // deno-lint-ignore no-control-regex
  /(?:password|passwd|secret|token|key|authorization)["']?[=:][ \t]*(["'])((?:(?!\1)[^\x00-\x1f])*)$/i;

for (const lead of TOKEN_LEADS) LEAD_FIRST[lead.charCodeAt(0)] = 1;

/** Whether `t` (a run of token bytes) may be the beginning of a token rule's match. */
function mayBeToken(t: string): boolean {
  for (const lead of TOKEN_LEADS) {
    if (t.length <= lead.length ? lead.startsWith(t) : t.startsWith(lead)) return true;
  }
  return false;
}

/**
 * Where a partial line's held-back tail starts (line.length when none): a token still being
 * printed (see TOKEN_LEADS) or a quoted value after a key whose closing quote has not come. The
 * rules match it once the rest of the line has come; handed out now, its start would show.
 */
function partialHoldStart(line: Uint8Array): number {
  const n = line.length;
  const lineStart = line.lastIndexOf(LF) + 1;
  let hold = n;
  // The trailing run of token bytes: the earliest start in it that may begin a token.
  let runStart = n;
  while (runStart > lineStart && n - runStart < MAX_TOKEN_HOLD && TOKEN_CHAR[line[runStart - 1]!]) {
    runStart--;
  }
  for (let s = runStart; s < n; s++) {
    // A token starts with a lead's first byte, at the run's start or after a non-alphanumeric.
    if (LEAD_FIRST[line[s]!] === 0 || (s > runStart && ALNUM[line[s - 1]!] === 1)) continue;
    if (mayBeToken(latin1.decode(line.subarray(s, n)))) {
      hold = s;
      break;
    }
  }
  // The other two need a quote or a dash in the line's tail: one byte loop says whether to look.
  const tailFrom = Math.max(lineStart, n - MAX_LINE_HEAD);
  let quote = false;
  let dash = false;
  for (let i = tailFrom; i < n; i++) {
    const b = line[i]!;
    if (b === 0x22 || b === 0x27) quote = true;
    else if (b === 0x2d && line[i + 1] === 0x2d) dash = true;
  }
  if (!quote && !dash) return hold;
  const tail = latin1.decode(line.subarray(tailFrom, n));
  const m = quote ? OPEN_QUOTED_VALUE.exec(tail) : null;
  if (m) hold = Math.min(hold, tailFrom + m.index + m[0].length - m[2]!.length);
  // A key on one line (JSON with \n escapes) whose END marker has not come: its body so far.
  const begin = dash ? tail.lastIndexOf("-----BEGIN") : -1;
  if (begin >= 0 && !tail.includes("-----END ", begin)) {
    const b = PEM_BEGIN.exec(tail.slice(begin));
    if (b && b.index === 0) hold = Math.min(hold, tailFrom + begin + b[0].length);
  }
  return hold;
}
/**
 * Built-in rules: the token rules, the value rules and the two PEM forms (a block, a key on one
 * line). Exported for the test that holds a sample of each to an anchor byte (scan_test.ts).
 */
export const BUILTIN_RULE_COUNT = TOKEN_RULES.length + VALUE_RULES.length + 2;

const PEM_BEGIN = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----/;
/** A whole key on one line (e.g. JSON with \n escapes): the part between the markers. */
const PEM_ONE_LINE = /(-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)(.+?)-----END /g;
const PEM_BASE64 = /^([ \t]*)([A-Za-z0-9+/=]+)[ \t]*\r?$/;
/** Blank lines and RFC 1421 headers (Proc-Type, DEK-Info) inside a block. */
const PEM_KEEP = /^(?:[ \t]*\r?|[A-Za-z-]+: [^\n]*)$/;

const latin1 = new TextDecoder("windows-1252");

/** Per stream: are we inside a PEM private key block. */
interface PemState {
  inBlock: boolean;
  lines: number;
}

// Cheap prefix test: every built-in rule's match holds one of scan.ts's anchor bytes
// (ANCHOR_BYTES; a rule added here needs its anchor there and in anchorHit).

const lower = (s: string): Uint8Array => new TextEncoder().encode(s);
const KEY_WORDS = ["password", "passwd", "secret", "token", "key", "authorization"].map(lower);
/** Non-zero for the last byte of some key word (lower case): most `=`/`:` fail on it at once. */
const KEY_WORD_LAST = new Uint8Array(256);
for (const w of KEY_WORDS) KEY_WORD_LAST[w[w.length - 1]!] = 1;

function at(d: Uint8Array, i: number, c: string): boolean {
  return d[i] === c.charCodeAt(0);
}

/** `d[from, end)` ends with `word` (lower case ASCII), compared case-insensitively. */
function endsWithWord(d: Uint8Array, from: number, end: number, word: Uint8Array): boolean {
  const start = end - word.length;
  if (start < from) return false;
  for (let k = 0; k < word.length; k++) {
    if ((d[start + k]! | 0x20) !== word[k]) return false;
  }
  return true;
}

/**
 * Could a pattern match around the anchor byte at i? Must never say no when a rule would match in
 * the line; may say yes needlessly (the rules then decide).
 */
function anchorHit(d: Uint8Array, i: number, from: number, to: number): boolean {
  switch (d[i]) {
    case 0x5f: // _ : ghp_… / github_pat_
      return (i - from >= 3 && at(d, i - 3, "g") && at(d, i - 2, "h")) ||
        (i - from >= 6 && at(d, i - 6, "g") && at(d, i - 5, "i") && at(d, i - 4, "t") &&
          at(d, i - 3, "h") && at(d, i - 2, "u") && at(d, i - 1, "b"));
    case 0x41: // A : AKIA / ASIA / AIza
      return i + 3 < to && (
        ((at(d, i + 1, "K") || at(d, i + 1, "S")) && at(d, i + 2, "I") && at(d, i + 3, "A")) ||
        (at(d, i + 1, "I") && at(d, i + 2, "z") && at(d, i + 3, "a"))
      );
    case 0x78: // x : xox?-
      return i + 2 < to && at(d, i + 1, "o") && at(d, i + 2, "x");
    case 0x4a: // J : eyJ
      return i - from >= 2 && at(d, i - 2, "e") && at(d, i - 1, "y");
    case 0x2d: // - : sk- / -----BEGIN
      return (i - from >= 2 && at(d, i - 2, "s") && at(d, i - 1, "k")) ||
        (i + 5 < to && at(d, i + 1, "-") && at(d, i + 2, "-") && at(d, i + 3, "-") &&
          at(d, i + 4, "-") && at(d, i + 5, "B"));
    default: { // = or : after a key word (optionally quoted)
      let end = i;
      if (end > from && (at(d, end - 1, '"') || at(d, end - 1, "'"))) end--;
      if (end === from || KEY_WORD_LAST[d[end - 1]! | 0x20] === 0) return false;
      for (const w of KEY_WORDS) if (endsWithWord(d, from, end, w)) return true;
      return false;
    }
  }
}

/** Appends [start, end) pairs of pattern matches in the line d[from, to) to spans. */
function lineSpans(d: Uint8Array, from: number, to: number, pem: PemState, spans: number[]): void {
  if (to <= from) {
    return;
  }
  const line = latin1.decode(d.subarray(from, to));
  if (pem.inBlock) {
    if (line.includes("-----END")) {
      pem.inBlock = false;
      // A line that also begins the block is a key on one line whose start went out before its
      // rest came (RedactContext.head opened the block): the one-line rule below masks it.
      if (!line.includes("-----BEGIN")) return;
    } else {
      const b64 = PEM_BASE64.exec(line);
      if (b64) {
        const start = from + b64[1]!.length;
        spans.push(start, start + b64[2]!.length);
        if (++pem.lines > MAX_PEM_LINES) pem.inBlock = false;
        return;
      }
      if (PEM_KEEP.test(line)) return;
      pem.inBlock = false; // not key material: the block is over, treat the line normally
    }
  }
  if (line.includes("-----BEGIN") && PEM_BEGIN.test(line)) {
    PEM_ONE_LINE.lastIndex = 0;
    let one = false;
    for (let m = PEM_ONE_LINE.exec(line); m; m = PEM_ONE_LINE.exec(line)) {
      const start = from + m.index + m[1]!.length;
      spans.push(start, start + m[2]!.length);
      one = true;
    }
    if (!one) {
      pem.inBlock = true;
      pem.lines = 0;
    }
  }
  for (const re of TOKEN_RULES) {
    re.lastIndex = 0;
    for (let m = re.exec(line); m; m = re.exec(line)) {
      spans.push(from + m.index, from + m.index + m[0].length);
    }
  }
  for (let r = 0; r < VALUE_RULES.length; r++) {
    const re = VALUE_RULES[r]!;
    const group = VALUE_GROUP[r]!;
    re.lastIndex = 0;
    for (let m = re.exec(line); m; m = re.exec(line)) {
      const value = m[group]!;
      if (value.length > 0) {
        const start = from + m.index + m[1]!.length;
        spans.push(start, start + value.length);
      }
      if (!re.global) break;
    }
  }
}

/** Pattern spans for d[from, to), scanning line by line; only lines with an anchor hit are decoded. */
function patternSpans(
  d: Uint8Array,
  from: number,
  to: number,
  pem: PemState,
  spans: number[],
): void {
  let i = from;
  let lineStart = from;
  const words = to - from >= WORD_SCAN_MIN ? wordView(d) : undefined;
  while (i < to) {
    if (!pem.inBlock) {
      i = nextAnchor(d, words, i, from, to);
      if (i < 0) return;
      lineStart = Math.max(lineStart, d.lastIndexOf(LF, i) + 1);
    }
    let lineEnd = d.indexOf(LF, i);
    if (lineEnd < 0 || lineEnd > to) lineEnd = to;
    lineSpans(d, lineStart, lineEnd, pem, spans);
    i = lineEnd + 1;
    lineStart = i;
  }
}

/**
 * The hot loop: the next anchor at or after i that verifies, or -1. Backward checks may look
 * across a line start (a needless hit at worst: the rules decide).
 */
function nextAnchor(
  d: Uint8Array,
  words: WordView | undefined,
  i: number,
  from: number,
  to: number,
): number {
  while (i < to) {
    if (words !== undefined && ((i - words.shift) & 1) === 0) {
      // Two bytes per lookup while neither is an anchor.
      const w = words.w;
      let k = (i - words.shift) >> 1;
      const end = Math.min(w.length, (to - words.shift) >> 1);
      while (k < end && (PAIR_FLAGS[w[k]!]! & HAS_ANCHOR) === 0) k++;
      i = words.shift + 2 * k;
      if (i >= to) return -1;
    }
    if ((BYTE_FLAGS[d[i]!]! & HAS_ANCHOR) !== 0 && anchorHit(d, i, from, to)) return i;
    i++;
  }
  return -1;
}

/** Below this many bytes the pattern scan goes byte by byte (a 16-bit view costs more). */
const WORD_SCAN_MIN = 256;

/**
 * The first position ≥ i (and ≤ last) where a literal may start: its first two bytes start some
 * literal. Skips a whole window of m bytes when the window's last byte appears in no literal's first
 * m bytes (then no literal starts anywhere in the window). -1 when there is none.
 */
function nextCandidate(
  d: Uint8Array,
  i: number,
  last: number,
  m: number,
  inWindow: Uint8Array,
  pairs: Uint8Array,
): number {
  while (i <= last) {
    if (inWindow[d[i + m - 1]!] === 0) {
      i += m;
    } else if (pairs[(d[i]! << 8) | d[i + 1]!] === 0) {
      i++;
    } else {
      return i;
    }
  }
  return -1;
}

/** The start of the span of sorted, merged `spans` that has `cut` inside it, or `cut`. */
function insideSpanStart(spans: readonly number[], cut: number): number {
  for (let k = 0; k < spans.length; k += 2) {
    if (spans[k]! < cut && cut < spans[k + 1]!) return spans[k]!;
  }
  return cut;
}

/** Sorts [start, end) pairs and merges overlapping ones. */
function normalize(spans: number[]): number[] {
  const count = spans.length / 2;
  if (count <= 1) return spans;
  let sorted = true;
  for (let k = 2; k < spans.length; k += 2) {
    if (spans[k]! < spans[k - 2]!) {
      sorted = false;
      break;
    }
  }
  let pairs = spans;
  if (!sorted) {
    const order = Array.from({ length: count }, (_, k) => k);
    order.sort((a, b) => spans[2 * a]! - spans[2 * b]! || spans[2 * b + 1]! - spans[2 * a + 1]!);
    pairs = [];
    for (const k of order) pairs.push(spans[2 * k]!, spans[2 * k + 1]!);
  }
  const out: number[] = [pairs[0]!, pairs[1]!];
  for (let k = 2; k < pairs.length; k += 2) {
    const s = pairs[k]!;
    const e = pairs[k + 1]!;
    const last = out.length - 1;
    if (s < out[last]!) {
      if (e > out[last]!) out[last] = e;
    } else {
      out.push(s, e);
    }
  }
  return out;
}

/** d[from, to) with each span replaced by [REDACTED] (when it fits) or stars. Never longer. */
function applySpans(d: Uint8Array, from: number, to: number, spans: number[]): Uint8Array {
  const out = new Uint8Array(to - from);
  let o = 0;
  let pos = from;
  for (let k = 0; k < spans.length; k += 2) {
    const s = Math.max(spans[k]!, pos);
    const e = Math.min(spans[k + 1]!, to);
    if (e <= s) continue;
    out.set(d.subarray(pos, s), o);
    o += s - pos;
    const len = e - s;
    if (len >= MASK.length) {
      out.set(MASK, o);
      o += MASK.length;
    } else {
      out.fill(STAR, o, o + len);
      o += len;
    }
    pos = e;
  }
  out.set(d.subarray(pos, to), o);
  o += to - pos;
  return out.subarray(0, o);
}

/**
 * The literal values one redactor (or the whole daemon) masks, with the tables that find them
 * fast: literals by first byte, a pair table, a skip window. Bounds are per table.
 */
class LiteralTable {
  readonly literals: Uint8Array[] = [];
  readonly #known = new Set<string>();
  /** Literal indexes by first byte. */
  readonly #byFirst: number[][] = Array.from({ length: 256 }, () => []);
  /** Non-zero when some literal starts with these two bytes (index b0 << 8 | b1). */
  readonly #pairs = new Uint8Array(65536);
  /** Non-zero when two bytes follow each other anywhere in some literal (b0 << 8 | b1). */
  readonly innerPairs = new Uint8Array(65536);
  maxLen = 0;
  /** Shortest literal length: the scan window. */
  #minLen = MAX_LITERAL_BYTES;
  /** Non-zero for bytes found in the first #minLen bytes of some literal (skip table). */
  readonly #inWindow = new Uint8Array(256);
  readonly #max: number;

  constructor(max: number) {
    this.#max = max;
  }

  get size(): number {
    return this.literals.length;
  }

  /** Adds `bytes` (length already checked); false when it was known. Throws past the bound. */
  add(bytes: Uint8Array): boolean {
    const key = latin1.decode(bytes);
    if (this.#known.has(key)) return false;
    if (this.literals.length >= this.#max) {
      throw invalidArgument(`Cannot register more than ${this.#max} secrets`);
    }
    this.#known.add(key);
    const index = this.literals.push(bytes) - 1;
    this.#byFirst[bytes[0]!]!.push(index);
    this.#pairs[(bytes[0]! << 8) | bytes[1]!] = 1;
    for (let k = 0; k + 1 < bytes.length; k++) {
      this.innerPairs[(bytes[k]! << 8) | bytes[k + 1]!] = 1;
    }
    this.maxLen = Math.max(this.maxLen, bytes.length);
    if (bytes.length < this.#minLen) {
      this.#minLen = bytes.length;
      this.#inWindow.fill(0);
      for (const lit of this.literals) {
        for (let k = 0; k < this.#minLen; k++) this.#inWindow[lit[k]!] = 1;
      }
    } else {
      for (let k = 0; k < this.#minLen; k++) this.#inWindow[bytes[k]!] = 1;
    }
    return true;
  }

  /** Appends merged [start, end) spans of literal matches in d[from, to) (longest match first). */
  spans(d: Uint8Array, from: number, to: number, spans: number[]): void {
    const pairs = this.#pairs;
    const byFirst = this.#byFirst;
    const literals = this.literals;
    const inWindow = this.#inWindow;
    const m = this.#minLen;
    let curStart = -1;
    let curEnd = -1;
    const last = to - m;
    for (let i = from; i <= last; i++) {
      i = nextCandidate(d, i, last, m, inWindow, pairs);
      if (i < 0) break;
      const b0 = d[i]!;
      let best = 0;
      for (const index of byFirst[b0]!) {
        const lit = literals[index]!;
        const len = lit.length;
        if (len <= best || i + len > to) continue;
        let k = 2; // the first two bytes matched the pair table, but not necessarily this literal's
        if (d[i + 1] !== lit[1]) continue;
        while (k < len && d[i + k] === lit[k]) k++;
        if (k === len) best = len;
      }
      if (best === 0) continue;
      if (i < curEnd) {
        if (i + best > curEnd) curEnd = i + best;
      } else {
        if (curEnd >= 0) spans.push(curStart, curEnd);
        curStart = i;
        curEnd = i + best;
      }
    }
    if (curEnd >= 0) spans.push(curStart, curEnd);
  }

  /**
   * Where a held-back tail must start: the earliest position whose rest of d is a proper prefix
   * of a literal and that does not cut a masked span (`spans` sorted). d.length when none.
   */
  holdStart(d: Uint8Array, spans: number[]): number {
    const n = d.length;
    for (let c = Math.max(0, n - this.maxLen + 1); c < n; c++) {
      let inside = false;
      for (let k = spans.length - 2; k >= 0 && spans[k + 1]! > c; k -= 2) {
        if (spans[k]! < c) {
          inside = true;
          break;
        }
      }
      if (inside) continue;
      const rest = n - c;
      for (const index of this.#byFirst[d[c]!]!) {
        const lit = this.literals[index]!;
        if (lit.length <= rest) continue;
        let k = 1;
        while (k < rest && d[c + k] === lit[k]) k++;
        if (k === rest) return c;
      }
    }
    return n;
  }
}

function checkedLiteral(secret: string | Uint8Array): Uint8Array {
  const bytes = typeof secret === "string" ? new TextEncoder().encode(secret) : secret;
  if (bytes.length < MIN_LITERAL_BYTES) {
    throw invalidArgument(
      `Cannot register a secret of ${bytes.length} bytes: the minimum is ${MIN_LITERAL_BYTES}`,
      "Shorter values would mask ordinary output; such a secret cannot be redacted",
    );
  }
  if (bytes.length > MAX_LITERAL_BYTES) {
    throw invalidArgument(
      `Cannot register a secret of ${bytes.length} bytes: the maximum is ${MAX_LITERAL_BYTES}`,
    );
  }
  return bytes;
}

/** Most literals (values and their encodings) a daemon-wide SecretSet holds. */
export const MAX_SHARED_LITERALS = 8192;
/** A line of a multi-line secret is masked on its own from this length (PEM lines are 64). */
const MIN_LINE_BYTES = 16;
/** Encodings (base64, hex) are masked from this many characters: shorter ones are too common. */
const MIN_ENCODED_CHARS = 8;

/**
 * Secrets the whole daemon masks (vault values it injected): one set shared by every session's,
 * job's and log's redactor, so a value registered once is masked everywhere from then on, for
 * the daemon's life. Each value is registered with the forms a program commonly prints it in:
 * the bytes, each line of a multi-line value (and the value with CRLF line ends, as a terminal
 * shows it), base64 (standard and URL-safe, at each of the three byte alignments it can have
 * inside a longer text, unwrapped) and hex (lower and upper case). A value longer than 4096
 * bytes is masked by its first 4096 bytes and its lines. Raw terminal streams also catch a value
 * drawn with escape sequences between its characters (Redactor.stream). Other transformations
 * (compression, encryption, reversal, spaced hex dumps, cursor moves between characters) are
 * out of reach of any redactor: docs/VAULT.md says so.
 */
export class SecretSet {
  readonly table: LiteralTable = new LiteralTable(MAX_SHARED_LITERALS);
  #values = 0;

  /** How many values were registered. */
  get size(): number {
    return this.#values;
  }

  /** Registers `value` and its printed forms (INVALID_ARGUMENT below 4 bytes or past the bound). */
  add(value: Uint8Array): void {
    if (value.length < MIN_LITERAL_BYTES) checkedLiteral(value); // throws the clear error
    const forms: Uint8Array[] = [];
    const head = value.length > MAX_LITERAL_BYTES ? value.subarray(0, MAX_LITERAL_BYTES) : value;
    forms.push(head);
    if (value.includes(LF)) {
      const text = binaryString(value);
      const crlf = latin1Bytes(text.replace(/\r?\n/g, "\r\n"));
      if (crlf.length <= MAX_LITERAL_BYTES) forms.push(crlf);
      for (const line of text.split(/\r?\n/)) {
        if (line.length >= MIN_LINE_BYTES) {
          forms.push(latin1Bytes(line.slice(0, MAX_LITERAL_BYTES)));
        }
      }
    }
    if (head.length <= 3072) {
      for (let skip = 0; skip < 3; skip++) {
        const groups = Math.floor((head.length - skip) / 3);
        if (groups * 4 < MIN_ENCODED_CHARS) continue;
        const b64 = encodeBase64(head.subarray(skip, skip + groups * 3));
        forms.push(latin1Bytes(b64));
        const url = b64.replaceAll("+", "-").replaceAll("/", "_");
        if (url !== b64) forms.push(latin1Bytes(url));
      }
    }
    if (head.length * 2 <= MAX_LITERAL_BYTES && head.length * 2 >= MIN_ENCODED_CHARS) {
      const hex = Array.from(head, (b) => b.toString(16).padStart(2, "0")).join("");
      forms.push(latin1Bytes(hex), latin1Bytes(hex.toUpperCase()));
    }
    let added = false;
    for (const f of forms) {
      if (f.length >= MIN_LITERAL_BYTES && this.table.add(f.slice())) added = true;
    }
    if (added) this.#values++;
  }
}

const ESC = 0x1b;
const scratch = { text: new Uint8Array(0), map: new Int32Array(0) };
/** An escape string (OSC, DCS…) longer than this is not held back waiting for its end. */
const MAX_HELD_SEQUENCE = 4096;

/**
 * The end of the run of escape sequences starting at `i` (the index of the next text byte), or
 * -1 when one of them is not complete within `d` (an unterminated string longer than
 * MAX_HELD_SEQUENCE counts as running to the end: it is not held).
 */
function skipSequences(d: Uint8Array, i: number): number {
  const n = d.length;
  while (i < n && d[i] === ESC) {
    const next = d[i + 1];
    if (next === undefined) return -1;
    let j: number;
    if (next === 0x5b) {
      j = i + 2;
      while (j < n && (d[j]! < 0x40 || d[j]! > 0x7e)) j++;
      if (j >= n) return -1;
      i = j + 1;
    } else if (next === 0x5d || next === 0x50 || next === 0x58 || next === 0x5e || next === 0x5f) {
      j = i + 2;
      while (j < n && d[j] !== 0x07 && !(d[j] === ESC && d[j + 1] === 0x5c)) j++;
      if (j >= n || (d[j] === ESC && j + 1 >= n)) return n - i <= MAX_HELD_SEQUENCE ? -1 : n;
      i = d[j] === 0x07 ? j + 1 : j + 2;
    } else {
      j = i + 1;
      while (j < n && d[j]! >= 0x20 && d[j]! <= 0x2f) j++;
      if (j >= n) return -1;
      i = j + 1;
    }
  }
  return i;
}

/**
 * The bytes of `d` without its escape sequences (CSI, OSC/DCS/APC/PM/SOS strings, two- and
 * three-byte ESC sequences), with the index in `d` of each byte kept, and where an escape
 * sequence that is not complete at the end starts (`open`, d.length when none).
 */
function projectText(d: Uint8Array): { text: Uint8Array; map: Int32Array; open: number } {
  const n = d.length;
  // Scratch reused across calls (one thread; the caller is done with it before the next call).
  if (scratch.text.length < n) {
    scratch.text = new Uint8Array(n);
    scratch.map = new Int32Array(n);
  }
  const text = scratch.text;
  const map = scratch.map;
  let t = 0;
  let open = n;
  let i = 0;
  while (i < n) {
    if (d[i] !== ESC) {
      text[t] = d[i]!;
      map[t++] = i++;
      continue;
    }
    const end = skipSequences(d, i);
    if (end < 0) {
      open = i;
      break;
    }
    i = end;
  }
  return { text: text.subarray(0, t), map, open };
}

/** One character per byte (U+0000–U+00FF), the form btoa takes. */
function binaryString(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    s += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return s;
}

/** The bytes of a binary string (the inverse of binaryString). */
function latin1Bytes(text: string): Uint8Array {
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i) & 0xff;
  return out;
}

export class Redactor {
  readonly #patterns: boolean;
  /**
   * Its own literals, made on the first one (its tables take ~130 KiB: most redactors, like a
   * finished job's, never have one).
   */
  #own: LiteralTable | undefined;
  readonly #shared: LiteralTable | undefined;
  /** PEM block state of the redact() stream of lines. */
  readonly #pem: PemState = { inBlock: false, lines: 0 };

  #extra: readonly Matcher[];

  constructor(options: RedactorOptions = {}) {
    this.#patterns = options.patterns ?? true;
    this.#extra = options.extraPatterns ?? [];
    this.#shared = options.secrets?.table;
    for (const secret of options.literals ?? []) this.addLiteral(secret);
  }

  /**
   * Registers a secret value (e.g. a password an agent typed). Values shorter than 4 bytes are
   * refused with INVALID_ARGUMENT (they would mask ordinary text); at most 256 literals, each ≤ 4096 bytes.
   */
  addLiteral(secret: string): void {
    const bytes = checkedLiteral(secret);
    (this.#own ??= new LiteralTable(MAX_LITERALS)).add(bytes);
  }

  /** The held-back tail's start over both literal tables (d.length when none). */
  #holdStart(d: Uint8Array, spans: number[]): number {
    const own = this.#own;
    let cut = own && own.size > 0 ? own.holdStart(d, spans) : d.length;
    if (this.#shared && this.#shared.size > 0) {
      cut = Math.min(cut, this.#shared.holdStart(d, spans));
    }
    return cut;
  }

  /**
   * Whether some run of escape sequences in `d` could sit inside a literal: the text byte before
   * it and the one after it follow each other in some literal, or the run is not complete at the
   * end. Ordinary coloured output fails this test, so it costs one scan, not a projection.
   */
  #escapesMayHide(d: Uint8Array): boolean {
    const tables = [this.#own, this.#shared].filter((t): t is LiteralTable =>
      t !== undefined && t.size > 0
    );
    let e = d.indexOf(ESC);
    while (e >= 0) {
      const end = skipSequences(d, e);
      // Not complete, or ending the chunk: hold and look again with the next chunk.
      if (end < 0 || end === d.length) return e > 0;
      if (e > 0) {
        const pair = (d[e - 1]! << 8) | d[end]!;
        if (tables.some((t) => t.innerPairs[pair] === 1)) return true;
      }
      e = end < d.length ? d.indexOf(ESC, end) : -1;
    }
    return false;
  }

  /**
   * Literals found in `d` with its escape sequences left out: their characters become `*` in a
   * copy of `d` (never longer, escape sequences kept). Also moves `cut` back to hold a tail that
   * may continue such a literal, or an escape sequence that is not complete yet.
   */
  #starProjected(d: Uint8Array, cut: number): { bytes: Uint8Array; cut: number } {
    const p = projectText(d);
    const spans: number[] = [];
    this.#literalSpans(p.text, 0, p.text.length, spans);
    const sorted = spans.length > 2 ? normalize(spans) : spans;
    const pcut = this.#holdStart(p.text, sorted);
    const held = Math.min(cut, pcut < p.text.length ? p.map[pcut]! : d.length, p.open);
    if (sorted.length === 0) return { bytes: d, cut: held };
    const out = d.slice();
    for (let k = 0; k < sorted.length; k += 2) {
      for (let i = sorted[k]!; i < sorted[k + 1]!; i++) out[p.map[i]!] = STAR;
    }
    return { bytes: out, cut: held };
  }

  #literalSpans(d: Uint8Array, from: number, to: number, spans: number[]): void {
    if (this.#own && this.#own.size > 0) this.#own.spans(d, from, to, spans);
    if (this.#shared && this.#shared.size > 0) this.#shared.spans(d, from, to, spans);
  }

  #hasLiterals(): boolean {
    return (this.#own !== undefined && this.#own.size > 0) ||
      (this.#shared !== undefined && this.#shared.size > 0);
  }

  /**
   * Redacts one complete chunk of text bytes (the cleaner hands over whole lines). Never lengthens:
   * output.length <= input.length. `anchorFreeFrom`, when given, is a line start after which the
   * caller knows no anchor byte occurs (scan.ts): the built-in patterns then scan only the lines
   * before it (and the rest only inside a PEM block, whose lines need no anchor).
   */
  redact(bytes: Uint8Array, anchorFreeFrom?: number, context?: RedactContext): Uint8Array {
    if (bytes.length === 0) return bytes;
    const before = context?.head;
    // The line's start goes ahead of the bytes for the rules (literals were held back whole).
    const h = before && before.length > 0 && (this.#patterns || this.#extra.length > 0)
      ? before.length
      : 0;
    let d = bytes;
    if (h > 0) {
      d = new Uint8Array(h + bytes.length);
      d.set(before!);
      d.set(bytes, h);
    }
    const n = d.length;
    const pem = context?.peek ? { ...this.#pem } : this.#pem;
    const spans: number[] = [];
    if (this.#hasLiterals()) this.#literalSpans(d, h, n, spans);
    if (this.#patterns) {
      const free = anchorFreeFrom === undefined ? n : Math.max(h, Math.min(n, anchorFreeFrom + h));
      patternSpans(d, 0, free, pem, spans);
      if (free < n && pem.inBlock) patternSpans(d, free, n, pem, spans);
    }
    if (this.#extra.length > 0) extraSpans(d, 0, n, this.#extra, spans);
    if (!spans.some((v, k) => k % 2 === 1 && v > h)) return bytes;
    return applySpans(d, h, n, normalize(spans));
  }

  /**
   * The spans of `bytes` that are secret by every rule (literals, patterns, configured
   * patterns), sorted and merged; the PEM block state of the stream of lines is read, not changed.
   * The VT cleaner keeps these masked on a line that is drawn over (src/output/vt_cleaner.ts).
   */
  spansOf(bytes: Uint8Array): number[] {
    return this.#allSpans(bytes, { ...this.#pem });
  }

  /**
   * How much of a partial line `bytes` can be handed out now (bytes.length when all): not a tail
   * that is a proper prefix of a registered secret (it may continue in bytes still to come), nor
   * one that may be a secret still being printed (partialHoldStart, seen after `head`, the line's
   * start already handed out) — and never cutting a literal found whole.
   */
  safeLength(bytes: Uint8Array, head: Uint8Array = EMPTY): number {
    if (bytes.length === 0) return 0;
    let spans: number[] = [];
    let cut = bytes.length;
    if (this.#hasLiterals()) {
      this.#literalSpans(bytes, 0, bytes.length, spans);
      if (spans.length > 2) spans = normalize(spans);
      cut = this.#holdStart(bytes, spans);
    }
    if (!this.#patterns) return cut;
    const h = head.length;
    let line = bytes;
    if (h > 0) {
      line = new Uint8Array(h + bytes.length);
      line.set(head);
      line.set(bytes, h);
    }
    return Math.min(cut, insideSpanStart(spans, Math.max(0, partialHoldStart(line) - h)));
  }

  /** Spans of `bytes` by every rule, the patterns with `pem` as the PEM block state. */
  #allSpans(bytes: Uint8Array, pem: PemState): number[] {
    const spans: number[] = [];
    if (this.#hasLiterals()) this.#literalSpans(bytes, 0, bytes.length, spans);
    if (this.#patterns) patternSpans(bytes, 0, bytes.length, pem, spans);
    if (this.#extra.length > 0) extraSpans(bytes, 0, bytes.length, this.#extra, spans);
    return spans.length > 2 ? normalize(spans) : spans;
  }

  /**
   * Redacts one piece of text on its own (a screen row, a title): as redact(), without touching
   * the PEM line state of this redactor's stream of lines.
   */
  redactPiece(text: string): string {
    const bytes = new TextEncoder().encode(text);
    const spans = this.#allSpans(bytes, { inBlock: false, lines: 0 });
    if (spans.length === 0) return text;
    return new TextDecoder().decode(applySpans(bytes, 0, bytes.length, spans));
  }

  /**
   * A streaming byte redactor for raw terminal bytes (recording, replay ring): it holds back only a
   * tail that is a proper prefix of a registered literal, so a secret split across chunks is still
   * caught, and ordinary output is not delayed. Patterns apply to what is handed out; a bulk
   * chunk's tail that may be a token cut by the read is held too (RAW_TOKEN_HOLD_MIN), until the
   * next chunk or release(). Literals are always caught.
   */
  stream(): RedactStream {
    let held: Uint8Array = EMPTY;
    /** Where in `held` the part a literal may continue starts (before it: a token's hold). */
    let literalAt = 0;
    const pem: PemState = { inBlock: false, lines: 0 };
    const finish = (d: Uint8Array, cut: number, spans: number[], flags: number): Uint8Array => {
      if (this.#patterns && ((flags & HAS_ANCHOR) !== 0 || pem.inBlock)) {
        patternSpans(d, 0, cut, pem, spans);
      }
      if (this.#extra.length > 0) extraSpans(d, 0, cut, this.#extra, spans);
      if (spans.length === 0) return cut === d.length ? d : d.subarray(0, cut);
      return applySpans(d, 0, cut, normalize(spans));
    };
    return {
      push: (chunk: Uint8Array, flags: number = ALL_FLAGS): Uint8Array => {
        let d = chunk;
        if (held.length > 0) {
          flags |= classify(held);
          d = new Uint8Array(held.length + chunk.length);
          d.set(held);
          d.set(chunk, held.length);
          held = EMPTY;
          literalAt = 0;
        }
        const n = d.length;
        const bulk = this.#patterns && chunk.length >= RAW_TOKEN_HOLD_MIN;
        if (n === 0 || (!bulk && !this.#hasLiterals())) return finish(d, n, [], flags);
        let spans: number[] = [];
        let cut = n;
        if (this.#hasLiterals()) {
          this.#literalSpans(d, 0, n, spans);
          if (spans.length > 2) spans = normalize(spans);
          cut = this.#holdStart(d, spans);
          if ((flags & HAS_ESC) !== 0 && d.includes(ESC) && this.#escapesMayHide(d)) {
            // A program may draw a value with escape sequences between its characters (colours,
            // a full-screen redraw): match the text with the sequences left out, and star the
            // matched characters where they are (the sequences stay, so the terminal's state
            // does).
            const starred = this.#starProjected(d, cut);
            d = starred.bytes;
            cut = starred.cut;
          }
        }
        const literalCut = cut;
        if (bulk) cut = Math.min(cut, insideSpanStart(spans, partialHoldStart(d)));
        if (cut < n) {
          held = d.slice(cut); // a copy: the caller may reuse its chunk
          literalAt = literalCut - cut;
          while (spans.length > 0 && spans[spans.length - 2]! >= cut) spans.length -= 2;
        }
        return finish(d, cut, spans, flags);
      },
      get tokenHeld(): boolean {
        return literalAt > 0;
      },
      release: (): Uint8Array => {
        if (literalAt <= 0) return EMPTY;
        const d = held.subarray(0, literalAt);
        held = held.slice(literalAt);
        literalAt = 0;
        const spans: number[] = [];
        this.#literalSpans(d, 0, d.length, spans);
        return finish(d, d.length, spans.length > 2 ? normalize(spans) : spans, ALL_FLAGS);
      },
      flush: (): Uint8Array => {
        let d = held;
        held = EMPTY;
        literalAt = 0;
        if (d.length === 0) return EMPTY;
        if (d.includes(ESC) && this.#hasLiterals()) d = this.#starProjected(d, d.length).bytes;
        const spans: number[] = [];
        this.#literalSpans(d, 0, d.length, spans);
        return finish(d, d.length, spans, ALL_FLAGS);
      },
    };
  }
}

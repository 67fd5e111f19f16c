/**
 * Linear-time regular expressions for patterns that agents control (`exec_wait until.pattern`,
 * policy `auto_answer` prompts, redaction patterns run over agent-controlled output).
 *
 * JavaScript's `RegExp` backtracks: `^(a+)+b$` on 28 characters blocks the thread for seconds.
 * This module compiles the backtracking-free part of the syntax to a Pike VM (a Thompson NFA run
 * breadth-first, its threads kept in priority order), so a search costs O(text × program) time
 * and O(program) memory, never more. Results are JavaScript's: `exec(text, from)` returns the
 * index and `match[0]` that `RegExp.prototype.exec` gives with `lastIndex = from` — the leftmost
 * match and, among the matches starting there, the one backtracking picks (greedy and lazy
 * quantifiers, alternation order, and the rule that an optional iteration may not match empty).
 * Groups only group: no captures are reported.
 *
 * Rejected as INVALID_ARGUMENT: backreferences and lookaround (no linear-time algorithm gives
 * JavaScript's results), Unicode property escapes, inline modifiers, legacy octal escapes, flags
 * other than `i` `m` `s` `u`, and patterns over `REGEX_LIMITS`. Syntax errors are whatever the
 * native `RegExp` constructor rejects (it is used as the syntax check, so the two agree).
 */
import { TermadaError } from "./errors.ts";

export interface RegexMatch {
  /** UTF-16 index of the first character of the match. */
  index: number;
  /** UTF-16 index just past the match. */
  end: number;
  /** The matched text (`match[0]`). */
  match: string;
}

export interface LinearRegex {
  readonly source: string;
  /** The flags in canonical order (`"imsu"` subset), as `RegExp.prototype.flags` shows them. */
  readonly flags: string;
  /**
   * VM states of the compiled program: one search costs at most text length × this many steps,
   * so callers that scan large texts size their window by it.
   */
  readonly programSize: number;
  /** Leftmost match at or after `from` (default 0), or null. */
  exec(text: string, from?: number): RegexMatch | null;
  test(text: string): boolean;
}

export interface CompileRegexOptions {
  /** A subset of `i`, `m`, `s`, `u`. */
  flags?: string;
  /** Most VM instructions allowed after repetitions are expanded (default `REGEX_LIMITS`). */
  maxProgram?: number;
  /** The field named in error messages, e.g. `until.pattern` (default `pattern`). */
  label?: string;
}

/**
 * Bounds on what an agent may submit. A search costs at most text length × program size steps,
 * so the program bound is what caps one scan of a 256 KiB window.
 */
export const REGEX_LIMITS: { readonly sourceChars: number; readonly programSize: number } = Object
  .freeze({ sourceChars: 1024, programSize: 10_000 });

/** Deepest group nesting accepted; keeps the recursive parser and compiler far from the stack. */
const MAX_NESTING = 100;

/** Compiles; an unsupported or invalid pattern throws TermadaError("INVALID_ARGUMENT", ...). */
export function compileRegex(source: string, options: CompileRegexOptions = {}): LinearRegex {
  if (typeof source !== "string") throw new TypeError("compileRegex: source must be a string");
  const label = options.label ?? "pattern";
  const maxProgram = options.maxProgram ?? REGEX_LIMITS.programSize;
  if (!Number.isInteger(maxProgram) || maxProgram < 1) {
    throw new RangeError(`compileRegex: maxProgram must be a positive integer, got ${maxProgram}`);
  }
  const flags = parseFlags(options.flags ?? "", label);
  if (source.length > REGEX_LIMITS.sourceChars) {
    throw invalid(label, `the pattern is longer than ${REGEX_LIMITS.sourceChars} characters`);
  }
  try {
    // Syntax check only: the constructor parses, nothing runs.
    new RegExp(source, flags.text);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const cut = message.lastIndexOf(": ");
    const reason = cut < 0 ? message : message.slice(cut + 2);
    throw invalid(label, reason.charAt(0).toLowerCase() + reason.slice(1), err);
  }
  const ast = new Parser(source, flags, label).parse();
  const tooLarge = (size: number): TermadaError =>
    invalid(
      label,
      `the pattern is too large: it needs ${size > 1e15 ? "over 10^15" : size} instructions ` +
        `once repetitions are expanded, over the limit of ${maxProgram}`,
      undefined,
      "Use smaller repetition counts such as {1,100}, or * and +",
    );
  const size = programSize(ast) + 1;
  if (size > maxProgram) throw tooLarge(size);
  const program = emitProgram(ast, flags);
  // Nested loops that can match empty multiply the states one position can visit.
  if (program.states > maxProgram) throw tooLarge(program.states);
  return new Regex(source, flags, ast, program);
}

// ---------------------------------------------------------------------------------------------
// Errors and flags

function invalid(label: string, reason: string, cause?: unknown, hint?: string): TermadaError {
  return new TermadaError("INVALID_ARGUMENT", `Invalid "${label}": ${reason}`, { cause, hint });
}

interface Flags {
  readonly text: string;
  readonly ignoreCase: boolean;
  readonly multiline: boolean;
  readonly dotAll: boolean;
  readonly unicode: boolean;
}

function parseFlags(flags: string, label: string): Flags {
  const seen = new Set<string>();
  for (const f of flags) {
    if (f !== "i" && f !== "m" && f !== "s" && f !== "u") {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Invalid "${label}" flags "${flags}": only "i", "m", "s" and "u" are supported`,
      );
    }
    if (seen.has(f)) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Invalid "${label}" flags "${flags}": "${f}" is given twice`,
      );
    }
    seen.add(f);
  }
  return {
    text: ["i", "m", "s", "u"].filter((f) => seen.has(f)).join(""),
    ignoreCase: seen.has("i"),
    multiline: seen.has("m"),
    dotAll: seen.has("s"),
    unicode: seen.has("u"),
  };
}

// ---------------------------------------------------------------------------------------------
// Character sets: sorted, merged, inclusive ranges [lo0, hi0, lo1, hi1, ...] of code units
// (without `u`) or code points (with `u`).

type CharSet = Int32Array;

const MAX_UNIT = 0xffff;
const MAX_CODE_POINT = 0x10ffff;

function normalize(pairs: ArrayLike<number>): CharSet {
  const n = pairs.length >> 1;
  const order = Array.from({ length: n }, (_, i) => i);
  order.sort((x, y) => pairs[2 * x]! - pairs[2 * y]!);
  const out: number[] = [];
  for (const i of order) {
    const lo = pairs[2 * i]!;
    const hi = pairs[2 * i + 1]!;
    const last = out.length - 1;
    if (last > 0 && lo <= out[last]! + 1) {
      if (hi > out[last]!) out[last] = hi;
    } else {
      out.push(lo, hi);
    }
  }
  return Int32Array.from(out);
}

function complement(set: CharSet, max: number): CharSet {
  const out: number[] = [];
  let next = 0;
  for (let i = 0; i < set.length; i += 2) {
    if (set[i]! > next) out.push(next, set[i]! - 1);
    next = set[i + 1]! + 1;
  }
  if (next <= max) out.push(next, max);
  return Int32Array.from(out);
}

function contains(set: CharSet, c: number): boolean {
  let lo = 0;
  let hi = (set.length >> 1) - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (c < set[2 * mid]!) hi = mid - 1;
    else if (c > set[2 * mid + 1]!) lo = mid + 1;
    else return true;
  }
  return false;
}

/** The part of a set at or above 128. */
function nonAscii(set: CharSet): number[] {
  const out: number[] = [];
  for (let i = 0; i < set.length; i += 2) {
    if (set[i + 1]! >= 128) out.push(Math.max(set[i]!, 128), set[i + 1]!);
  }
  return out;
}

function sameSet(a: CharSet, b: CharSet): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The one character of a single-character set, or -1. */
function singleChar(set: CharSet): number {
  return set.length === 2 && set[0] === set[1] ? set[0]! : -1;
}

const LINE_TERMINATORS: CharSet = Int32Array.of(10, 10, 13, 13, 0x2028, 0x2029);
const DIGITS: CharSet = Int32Array.of(48, 57);
const WORD: CharSet = Int32Array.of(48, 57, 65, 90, 95, 95, 97, 122);
const WHITE_SPACE: CharSet = Int32Array.of(
  ...[9, 13, 0x20, 0x20, 0xa0, 0xa0, 0x1680, 0x1680, 0x2000, 0x200a, 0x2028, 0x2029],
  ...[0x202f, 0x202f, 0x205f, 0x205f, 0x3000, 0x3000, 0xfeff, 0xfeff],
);

function isLineTerminator(c: number): boolean {
  return c === 10 || c === 13 || c === 0x2028 || c === 0x2029;
}

// ---------------------------------------------------------------------------------------------
// Case folding for the `i` flag. Two characters match case-insensitively when their canonical
// forms are equal (ECMA-262 Canonicalize): without `u`, the single-unit toUpperCase (never
// mapping non-ASCII to ASCII); with `u`, Unicode simple case folding. Tables are built once, on
// the first case-insensitive pattern, as lists of equivalence classes of two or more characters.

interface CaseTable {
  /** Each class of two or more equivalent characters, sorted. */
  readonly classes: readonly Int32Array[];
  readonly classOf: ReadonlyMap<number, Int32Array>;
}

let legacyCaseTable: CaseTable | undefined;
let unicodeCaseTable: CaseTable | undefined;
let casedCache: number[] | undefined;

/** Code points up to U+1FFFF that change under some case mapping (none above have case). */
function casedCodePoints(): number[] {
  if (casedCache) return casedCache;
  const units = new Uint16Array(0xd800 + (0x10000 - 0xe000) + 2 * 0x10000);
  let n = 0;
  for (let c = 0; c < 0xd800; c++) units[n++] = c;
  for (let c = 0xe000; c < 0x10000; c++) units[n++] = c;
  for (let c = 0; c < 0x10000; c++) {
    units[n++] = 0xd800 + (c >> 10);
    units[n++] = 0xdc00 + (c & 0x3ff);
  }
  const parts: string[] = [];
  for (let i = 0; i < units.length; i += 8192) {
    parts.push(String.fromCharCode(...units.subarray(i, i + 8192)));
  }
  // A fixed pattern over a fixed text: the native engine is safe (and exact) here.
  const re = /[\p{Changes_When_Casemapped}\p{Changes_When_Casefolded}]/gu;
  const all = parts.join("");
  const out: number[] = [];
  for (let m = re.exec(all); m !== null; m = re.exec(all)) out.push(m[0].codePointAt(0)!);
  casedCache = out;
  return out;
}

function tableFromGroups(groups: Iterable<number[]>): CaseTable {
  const classes: Int32Array[] = [];
  const classOf = new Map<number, Int32Array>();
  for (const g of groups) {
    if (g.length < 2) continue;
    const cls = Int32Array.from(new Set(g)).sort();
    classes.push(cls);
    for (const c of cls) classOf.set(c, cls);
  }
  return { classes, classOf };
}

function legacyTable(): CaseTable {
  if (legacyCaseTable) return legacyCaseTable;
  const groups = new Map<number, number[]>();
  const canon = (c: number): number => {
    const u = String.fromCharCode(c).toUpperCase();
    if (u.length !== 1) return c;
    const cu = u.charCodeAt(0);
    return c >= 128 && cu < 128 ? c : cu;
  };
  for (const c of casedCodePoints()) {
    if (c > MAX_UNIT) break;
    const k = canon(c);
    let g = groups.get(k);
    if (!g) groups.set(k, g = []);
    g.push(c);
  }
  for (const [k, g] of groups) if (canon(k) === k) g.push(k);
  return legacyCaseTable = tableFromGroups(groups.values());
}

function unicodeTable(): CaseTable {
  if (unicodeCaseTable) return unicodeCaseTable;
  // Candidate classes: characters linked by single-character toLowerCase/toUpperCase, or
  // sharing a multi-character mapping (U+0390 and U+1FD3 both upper-case to three characters).
  // Simple folding is almost always such a link; classes that are not a plain lower/upper pair
  // are split by asking the native engine, which implements simple case folding exactly.
  const parent = new Map<number, number>();
  const find = (x: number): number => {
    let p = parent.get(x);
    if (p === undefined) {
      parent.set(x, x);
      return x;
    }
    while (p !== x) {
      x = p;
      p = parent.get(x)!;
    }
    return x;
  };
  const union = (a: number, b: number): void => {
    const ra = find(a);
    const rb = find(b);
    if (ra !== rb) parent.set(ra, rb);
  };
  const single = (s: string): number => {
    const cp = s.codePointAt(0)!;
    return s.length === (cp > 0xffff ? 2 : 1) ? cp : -1;
  };
  const byUpper = new Map<string, number>();
  const byLower = new Map<string, number>();
  for (const c of casedCodePoints()) {
    const s = String.fromCodePoint(c);
    find(c);
    for (
      const [mapped, seen] of [[s.toLowerCase(), byLower], [s.toUpperCase(), byUpper]] as const
    ) {
      const m = single(mapped);
      if (m >= 0) {
        union(c, m);
      } else {
        const other = seen.get(mapped);
        if (other === undefined) seen.set(mapped, c);
        else union(c, other);
      }
    }
  }
  const components = new Map<number, number[]>();
  for (const c of parent.keys()) {
    const r = find(c);
    let g = components.get(r);
    if (!g) components.set(r, g = []);
    g.push(c);
  }
  const groups: number[][] = [];
  for (const g of components.values()) {
    if (g.length < 2) continue;
    const [a, b] = g as [number, number];
    const sa = String.fromCodePoint(a);
    const sb = String.fromCodePoint(b);
    const plainPair = g.length === 2 &&
      (sa.toLowerCase() === sb || sb.toLowerCase() === sa) &&
      (sa.toUpperCase() === sb || sb.toUpperCase() === sa);
    if (plainPair) {
      groups.push(g);
      continue;
    }
    let rest = g;
    while (rest.length > 0) {
      const head = rest[0]!;
      const re = new RegExp(`^\\u{${head.toString(16)}}$`, "iu");
      groups.push(rest.filter((c) => re.test(String.fromCodePoint(c))));
      rest = rest.filter((c) => c !== head && !re.test(String.fromCodePoint(c)));
    }
  }
  return unicodeCaseTable = tableFromGroups(groups);
}

/** Adds every character case-equivalent to a member (CharacterSetMatcher with IgnoreCase). */
function closeOverCase(set: CharSet, table: CaseTable): CharSet {
  const extra: number[] = [];
  for (const cls of table.classes) {
    let hit = false;
    for (const c of cls) {
      if (contains(set, c)) {
        hit = true;
        break;
      }
    }
    if (!hit) continue;
    for (const c of cls) if (!contains(set, c)) extra.push(c, c);
  }
  return extra.length === 0 ? set : normalize([...set, ...extra]);
}

// ---------------------------------------------------------------------------------------------
// Syntax tree. Groups leave no node of their own: only match[0] is reported.

const A_BOL = 0; // ^ without m
const A_EOL = 1; // $ without m
const A_MBOL = 2; // ^ with m
const A_MEOL = 3; // $ with m
const A_WORD = 4; // \b
const A_NOT_WORD = 5; // \B

type Node =
  | { readonly kind: "empty" }
  | { readonly kind: "char"; readonly set: CharSet }
  | { readonly kind: "assert"; readonly test: number }
  | { readonly kind: "cat"; readonly items: readonly Node[] }
  | { readonly kind: "alt"; readonly items: readonly Node[] }
  | {
    readonly kind: "rep";
    readonly body: Node;
    readonly min: number;
    readonly max: number;
    readonly greedy: boolean;
  };

const EMPTY: Node = { kind: "empty" };

const C_BACKSLASH = 0x5c;

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  const l = c | 0x20;
  return l >= 97 && l <= 102 ? l - 87 : -1;
}

function isLetter(c: number): boolean {
  const l = c | 0x20;
  return l >= 97 && l <= 122;
}

/**
 * Recursive descent over a source the native constructor has already accepted, so syntax errors
 * here are defensive. Recursion depth is bounded by MAX_NESTING groups.
 */
class Parser {
  readonly #src: string;
  readonly #flags: Flags;
  readonly #label: string;
  readonly #maxChar: number;
  readonly #cases: CaseTable | null;
  #pos = 0;
  #depth = 0;

  constructor(src: string, flags: Flags, label: string) {
    this.#src = src;
    this.#flags = flags;
    this.#label = label;
    this.#maxChar = flags.unicode ? MAX_CODE_POINT : MAX_UNIT;
    this.#cases = flags.ignoreCase ? (flags.unicode ? unicodeTable() : legacyTable()) : null;
  }

  parse(): Node {
    const node = this.#alternation();
    if (this.#pos < this.#src.length) this.#fail('unmatched ")"', this.#pos);
    return node;
  }

  #fail(reason: string, at: number, hint?: string): never {
    throw invalid(this.#label, `${reason} at character ${at + 1}`, undefined, hint);
  }

  #unsupported(what: string, at: number, length: number, linear: boolean): never {
    const found = JSON.stringify(this.#src.slice(at, at + length));
    this.#fail(
      `${what} are not supported${linear ? " (patterns run in linear time)" : ""}, found ${found}`,
      at,
      linear ? "Match the text itself instead; patterns run in linear time" : undefined,
    );
  }

  #peek(offset = 0): number {
    const i = this.#pos + offset;
    return i < this.#src.length ? this.#src.charCodeAt(i) : -1;
  }

  /** Reads one pattern character: a code point with `u`, else a code unit. */
  #readChar(): number {
    const c = this.#flags.unicode
      ? this.#src.codePointAt(this.#pos)!
      : this.#src.charCodeAt(this.#pos);
    this.#pos += c > 0xffff ? 2 : 1;
    return c;
  }

  #alternation(): Node {
    const items = [this.#sequence()];
    while (this.#peek() === 0x7c /* | */) {
      this.#pos++;
      items.push(this.#sequence());
    }
    return items.length === 1 ? items[0]! : { kind: "alt", items };
  }

  #sequence(): Node {
    const items: Node[] = [];
    for (;;) {
      const c = this.#peek();
      if (c < 0 || c === 0x7c /* | */ || c === 0x29 /* ) */) break;
      const term = this.#term();
      if (term.kind === "cat") items.push(...term.items);
      else if (term.kind !== "empty") items.push(term);
    }
    return items.length === 0 ? EMPTY : items.length === 1 ? items[0]! : { kind: "cat", items };
  }

  #term(): Node {
    const start = this.#pos;
    const c = this.#peek();
    let atom: Node;
    switch (c) {
      case 0x5e: // ^
        this.#pos++;
        return this.#assertion(this.#flags.multiline ? A_MBOL : A_BOL);
      case 0x24: // $
        this.#pos++;
        return this.#assertion(this.#flags.multiline ? A_MEOL : A_EOL);
      case 0x28: // (
        atom = this.#group();
        break;
      case 0x2e: // .
        this.#pos++;
        atom = this.#charNode(this.#dotSet(), false);
        break;
      case 0x5b: // [
        atom = this.#charClass();
        break;
      case C_BACKSLASH: {
        const n = this.#peek(1);
        if (n === 0x62 /* b */ || n === 0x42 /* B */) {
          this.#pos += 2;
          return this.#assertion(n === 0x62 ? A_WORD : A_NOT_WORD);
        }
        atom = this.#atomEscape();
        break;
      }
      case 0x2a: // *
      case 0x2b: // +
      case 0x3f: // ?
        this.#fail("nothing to repeat", start);
        break;
      default:
        atom = this.#charNode(this.#single(this.#readChar()), true);
    }
    return this.#quantified(atom);
  }

  #assertion(test: number): Node {
    const c = this.#peek();
    if (c === 0x2a || c === 0x2b || c === 0x3f || (c === 0x7b && this.#braces(false))) {
      this.#fail("nothing to repeat", this.#pos);
    }
    return { kind: "assert", test };
  }

  #quantified(atom: Node): Node {
    let min: number;
    let max: number;
    switch (this.#peek()) {
      case 0x2a: // *
        [min, max] = [0, Infinity];
        this.#pos++;
        break;
      case 0x2b: // +
        [min, max] = [1, Infinity];
        this.#pos++;
        break;
      case 0x3f: // ?
        [min, max] = [0, 1];
        this.#pos++;
        break;
      case 0x7b: { // {
        const braces = this.#braces(true);
        if (!braces) return atom;
        [min, max] = braces;
        break;
      }
      default:
        return atom;
    }
    let greedy = true;
    if (this.#peek() === 0x3f) {
      greedy = false;
      this.#pos++;
    }
    if (min > max) this.#fail("numbers out of order in {} quantifier", this.#pos - 1);
    return { kind: "rep", body: atom, min, max, greedy };
  }

  /** `{n}`, `{n,}` or `{n,m}` at the cursor; anything else is a literal `{` (Annex B). */
  #braces(consume: boolean): [number, number] | null {
    const src = this.#src;
    let i = this.#pos + 1;
    const digits = (): string => {
      const from = i;
      while (i < src.length && isDigit(src.charCodeAt(i))) i++;
      return src.slice(from, i);
    };
    const first = digits();
    if (first === "") return null;
    const min = Number(first);
    let max = min;
    if (src.charCodeAt(i) === 0x2c /* , */) {
      i++;
      const second = digits();
      max = second === "" ? Infinity : Number(second);
    }
    if (src.charCodeAt(i) !== 0x7d /* } */) return null;
    if (consume) this.#pos = i + 1;
    return [min, max];
  }

  #group(): Node {
    const at = this.#pos;
    this.#pos++;
    if (this.#peek() === 0x3f /* ? */) {
      const n = this.#peek(1);
      if (n === 0x3a /* : */) {
        this.#pos += 2;
      } else if (n === 0x3d /* = */ || n === 0x21 /* ! */) {
        this.#unsupported("lookahead assertions", at, 3, true);
      } else if (n === 0x3c /* < */) {
        const n2 = this.#peek(2);
        if (n2 === 0x3d || n2 === 0x21) this.#unsupported("lookbehind assertions", at, 4, true);
        const close = this.#src.indexOf(">", this.#pos);
        if (close < 0) this.#fail("invalid capture group name", at);
        this.#pos = close + 1;
      } else {
        this.#unsupported("inline modifiers", at, 3, false);
      }
    }
    if (++this.#depth > MAX_NESTING) {
      this.#fail(`groups nest deeper than ${MAX_NESTING} levels`, at);
    }
    const inner = this.#alternation();
    if (this.#peek() !== 0x29 /* ) */) this.#fail("unterminated group", at);
    this.#pos++;
    this.#depth--;
    return inner;
  }

  #atomEscape(): Node {
    const at = this.#pos;
    const c = this.#peek(1);
    const set = this.#classEscape(c);
    if (set) {
      this.#pos += 2;
      return this.#charNode(set, false);
    }
    if (c >= 0x31 && c <= 0x39) this.#unsupported("backreferences", at, 2, true);
    if (c === 0x6b /* k */) this.#unsupported("named backreferences", at, 2, true);
    return this.#charNode(this.#single(this.#charEscape(false)), true);
  }

  /** The set of `\d \D \s \S \w \W`, or null for any other escape letter. */
  #classEscape(c: number): CharSet | null {
    const max = this.#maxChar;
    switch (c) {
      case 0x64: // d
        return DIGITS;
      case 0x44: // D
        return complement(DIGITS, max);
      case 0x73: // s
        return WHITE_SPACE;
      case 0x53: // S
        return complement(WHITE_SPACE, max);
      case 0x77: // w
        return this.#wordSet();
      case 0x57: // W
        return complement(this.#wordSet(), max);
      default:
        return null;
    }
  }

  /** WordCharacters: with `u` and `i`, plus the characters that fold into it (U+017F, U+212A). */
  #wordSet(): CharSet {
    return this.#flags.unicode && this.#cases ? closeOverCase(WORD, this.#cases) : WORD;
  }

  #dotSet(): CharSet {
    return this.#flags.dotAll
      ? Int32Array.of(0, this.#maxChar)
      : complement(LINE_TERMINATORS, this.#maxChar);
  }

  #single(c: number): CharSet {
    return Int32Array.of(c, c);
  }

  #charNode(set: CharSet, closeCase: boolean): Node {
    if (this.#cases) {
      if (closeCase && singleChar(set) >= 0) {
        const cls = this.#cases.classOf.get(set[0]!);
        if (cls) set = normalize(Array.from(cls, (c) => [c, c]).flat());
      } else {
        set = closeOverCase(set, this.#cases);
      }
    }
    return { kind: "char", set };
  }

  /**
   * A character escape (the cursor is on the backslash); returns the character. Follows Annex B
   * without `u`: `\x`, `\u` without hex digits and unknown letters stand for themselves, and a
   * `\c` without a control letter is a literal backslash.
   */
  #charEscape(inClass: boolean): number {
    const at = this.#pos;
    const src = this.#src;
    const unicode = this.#flags.unicode;
    const c = this.#peek(1);
    if (c < 0) this.#fail("\\ at end of pattern", at);
    this.#pos += 2;
    switch (c) {
      case 0x74: // t
        return 9;
      case 0x6e: // n
        return 10;
      case 0x76: // v
        return 11;
      case 0x66: // f
        return 12;
      case 0x72: // r
        return 13;
      case 0x62: // b (inside a class only)
        return 8;
      case 0x30: // 0
        if (isDigit(this.#peek())) this.#unsupported("legacy octal escapes", at, 3, false);
        return 0;
      case 0x63: { // c
        const l = this.#peek();
        if (isLetter(l) || (inClass && !unicode && (isDigit(l) || l === 0x5f /* _ */))) {
          this.#pos++;
          return l % 32;
        }
        this.#pos = at + 1;
        return C_BACKSLASH;
      }
      case 0x78: { // x
        const h = hexValue(this.#peek());
        const l = hexValue(this.#peek(1));
        if (h >= 0 && l >= 0) {
          this.#pos += 2;
          return h * 16 + l;
        }
        return 0x78;
      }
      case 0x75: { // u
        if (unicode && this.#peek() === 0x7b /* { */) {
          const close = src.indexOf("}", this.#pos);
          const value = parseInt(src.slice(this.#pos + 1, close), 16);
          this.#pos = close + 1;
          return value;
        }
        const value = this.#hex4(this.#pos);
        if (value < 0) return 0x75;
        this.#pos += 4;
        if (unicode && value >= 0xd800 && value <= 0xdbff && src.startsWith("\\u", this.#pos)) {
          const low = this.#hex4(this.#pos + 2);
          if (low >= 0xdc00 && low <= 0xdfff) {
            this.#pos += 6;
            return 0x10000 + ((value - 0xd800) << 10) + (low - 0xdc00);
          }
        }
        return value;
      }
      case 0x70: // p
      case 0x50: // P
        this.#unsupported("Unicode property escapes", at, 2, false);
        break;
      default:
        if (isDigit(c)) this.#unsupported("legacy octal escapes", at, 2, false);
    }
    // An identity escape: the character itself.
    this.#pos = at + 1;
    return this.#readChar();
  }

  #hex4(i: number): number {
    let v = 0;
    for (let k = 0; k < 4; k++) {
      const h = i + k < this.#src.length ? hexValue(this.#src.charCodeAt(i + k)) : -1;
      if (h < 0) return -1;
      v = v * 16 + h;
    }
    return v;
  }

  #charClass(): Node {
    const at = this.#pos;
    this.#pos++;
    let negate = false;
    if (this.#peek() === 0x5e /* ^ */) {
      negate = true;
      this.#pos++;
    }
    const pairs: number[] = [];
    const add = (item: number | CharSet): void => {
      if (typeof item === "number") pairs.push(item, item);
      else pairs.push(...item);
    };
    for (;;) {
      const c = this.#peek();
      if (c < 0) this.#fail("unterminated character class", at);
      if (c === 0x5d /* ] */) break;
      const first = this.#classAtom();
      if (this.#peek() === 0x2d /* - */ && this.#peek(1) !== 0x5d && this.#peek(1) >= 0) {
        const dash = this.#pos;
        this.#pos++;
        const last = this.#classAtom();
        if (typeof first === "number" && typeof last === "number") {
          if (first > last) this.#fail("range out of order in character class", dash);
          pairs.push(first, last);
        } else {
          // Annex B: a range with a class escape at either end is a union with "-".
          add(first);
          add(0x2d);
          add(last);
        }
      } else {
        add(first);
      }
    }
    this.#pos++;
    let set = normalize(pairs);
    if (this.#cases) set = closeOverCase(set, this.#cases);
    if (negate) set = complement(set, this.#maxChar);
    return { kind: "char", set };
  }

  #classAtom(): number | CharSet {
    if (this.#peek() !== C_BACKSLASH) return this.#readChar();
    const set = this.#classEscape(this.#peek(1));
    if (set) {
      this.#pos += 2;
      return set;
    }
    if (this.#peek(1) === 0x2d /* - */) {
      this.#pos += 2;
      return 0x2d;
    }
    return this.#charEscape(true);
  }
}

// ---------------------------------------------------------------------------------------------
// Program. Consuming instructions first (the VM tests `op < OP_SPLIT`).

const OP_CHAR = 0; // a: character
const OP_CHAR2 = 1; // a, b: either character
const OP_SET = 2; // a: set index
const OP_ANY = 3;
const OP_ANY_BUT_NEWLINE = 4;
const OP_SPLIT = 5; // a: preferred target, b: other
const OP_JMP = 6; // a: target
const OP_ASSERT = 7; // a: A_* kind
const OP_LOOP_START = 8; // an optional iteration of a body that can match empty starts here
const OP_LOOP_END = 9; // ... and ends here; fails if the iteration consumed nothing
const OP_MATCH = 10;

interface Program {
  readonly ops: Int32Array;
  readonly a: Int32Array;
  readonly b: Int32Array;
  readonly sets: readonly CharSet[];
  /**
   * First visited-slot of each instruction. An empty-width instruction inside d checked loops
   * has d + 1 slots, one per number of those loops whose current iteration is still empty (see
   * `Regex.#add`); a consuming instruction or MATCH has one.
   */
  readonly base: Int32Array;
  /** Total slots: the most (instruction, state) pairs one position can visit. */
  readonly states: number;
}

function emitProgram(ast: Node, flags: Flags): Program {
  const em = new Emitter(flags.unicode ? MAX_CODE_POINT : MAX_UNIT);
  em.node(ast);
  em.emit(OP_MATCH);
  const ops = Int32Array.from(em.op);
  const base = new Int32Array(ops.length);
  let states = 0;
  let depth = 0;
  for (let pc = 0; pc < ops.length; pc++) {
    const op = ops[pc]!;
    base[pc] = states;
    states += op < OP_SPLIT || op === OP_MATCH ? 1 : depth + 1;
    if (op === OP_LOOP_START) depth++;
    else if (op === OP_LOOP_END) depth--;
  }
  return { ops, a: Int32Array.from(em.a), b: Int32Array.from(em.b), sets: em.sets, base, states };
}

function nullable(n: Node): boolean {
  switch (n.kind) {
    case "empty":
    case "assert":
      return true;
    case "char":
      return false;
    case "cat":
      return n.items.every(nullable);
    case "alt":
      return n.items.some(nullable);
    case "rep":
      return n.min === 0 || nullable(n.body);
  }
}

const sizes = new WeakMap<Node, number>();

/** Instructions `emit` produces for a node (a float: repetition can overflow any integer). */
function programSize(n: Node): number {
  let size = sizes.get(n);
  if (size === undefined) sizes.set(n, size = computeSize(n));
  return size;
}

function computeSize(n: Node): number {
  switch (n.kind) {
    case "empty":
      return 0;
    case "char":
    case "assert":
      return 1;
    case "cat":
      return n.items.reduce((sum, item) => sum + programSize(item), 0);
    case "alt":
      return n.items.reduce((sum, item) => sum + programSize(item), 0) + 2 * (n.items.length - 1);
    case "rep": {
      const body = programSize(n.body);
      // A body of no instructions matches only the empty string: repeating it changes nothing.
      if (n.max === 0 || body === 0) return 0;
      const check = nullable(n.body) ? 2 : 0;
      if (n.max === Infinity) {
        return n.min >= 1 && check === 0 ? n.min * body + 1 : n.min * body + body + 2 + check;
      }
      return n.min * body + (n.max - n.min) * (body + 1 + check);
    }
  }
}

class Emitter {
  readonly op: number[] = [];
  readonly a: number[] = [];
  readonly b: number[] = [];
  readonly sets: CharSet[] = [];
  readonly #setIndex = new Map<CharSet, number>();
  readonly #anyBut: CharSet;
  readonly #maxChar: number;

  constructor(maxChar: number) {
    this.#maxChar = maxChar;
    this.#anyBut = complement(LINE_TERMINATORS, maxChar);
  }

  emit(op: number, a = 0, b = 0): number {
    this.op.push(op);
    this.a.push(a);
    this.b.push(b);
    return this.op.length - 1;
  }

  get here(): number {
    return this.op.length;
  }

  node(n: Node): void {
    switch (n.kind) {
      case "empty":
        return;
      case "char":
        return this.#char(n.set);
      case "assert":
        this.emit(OP_ASSERT, n.test);
        return;
      case "cat":
        for (const item of n.items) this.node(item);
        return;
      case "alt": {
        // SPLIT chains keep alternatives in priority order (leftmost first).
        const jumps: number[] = [];
        n.items.forEach((item, i) => {
          if (i === n.items.length - 1) return this.node(item);
          const split = this.emit(OP_SPLIT, 0, 0);
          this.a[split] = this.here;
          this.node(item);
          jumps.push(this.emit(OP_JMP));
          this.b[split] = this.here;
        });
        for (const j of jumps) this.a[j] = this.here;
        return;
      }
      case "rep":
        return this.#repeat(n.body, n.min, n.max, n.greedy);
    }
  }

  #split(at: number, body: number, exit: number, greedy: boolean): void {
    this.a[at] = greedy ? body : exit;
    this.b[at] = greedy ? exit : body;
  }

  /**
   * Mandatory iterations are plain copies. Optional ones follow ECMA-262 RepeatMatcher: an
   * optional iteration that matches nothing fails, so a body that can match empty is wrapped in
   * LOOP_START/LOOP_END, which kill a thread that comes back around without consuming.
   */
  #repeat(body: Node, min: number, max: number, greedy: boolean): void {
    if (max === 0 || programSize(body) === 0) return;
    const check = nullable(body);
    if (max === Infinity && min >= 1 && !check) {
      // A non-empty body: one copy loops back to itself (x+ is x then "again or stop").
      for (let i = 1; i < min; i++) this.node(body);
      const start = this.here;
      this.node(body);
      const split = this.emit(OP_SPLIT);
      this.#split(split, start, this.here, greedy);
      return;
    }
    for (let i = 0; i < min; i++) this.node(body);
    if (max === Infinity) {
      const split = this.emit(OP_SPLIT);
      const start = this.here;
      this.#optional(body, check);
      this.emit(OP_JMP, split);
      this.#split(split, start, this.here, greedy);
      return;
    }
    const splits: [number, number][] = [];
    for (let i = min; i < max; i++) {
      const split = this.emit(OP_SPLIT);
      splits.push([split, this.here]);
      this.#optional(body, check);
    }
    for (const [split, start] of splits) this.#split(split, start, this.here, greedy);
  }

  #optional(body: Node, check: boolean): void {
    if (!check) return this.node(body);
    this.emit(OP_LOOP_START);
    this.node(body);
    this.emit(OP_LOOP_END);
  }

  #char(set: CharSet): void {
    const c = singleChar(set);
    if (c >= 0) {
      this.emit(OP_CHAR, c);
    } else if (set.length === 4 && set[0] === set[1] && set[2] === set[3]) {
      this.emit(OP_CHAR2, set[0], set[2]);
    } else if (set.length === 2 && set[0] === 0 && set[1] === this.#maxChar) {
      this.emit(OP_ANY);
    } else if (sameSet(set, this.#anyBut)) {
      this.emit(OP_ANY_BUT_NEWLINE);
    } else {
      let k = this.#setIndex.get(set);
      if (k === undefined) {
        k = this.sets.length;
        this.sets.push(set);
        this.#setIndex.set(set, k);
      }
      this.emit(OP_SET, k);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Literal analysis for prefilters.

function charString(c: number): string {
  return String.fromCodePoint(c);
}

/** True when a string has no unpaired surrogate (safe for indexOf in `u` mode). */
function wellFormed(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (!(d >= 0xdc00 && d <= 0xdfff)) return false;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return false;
    }
  }
  return true;
}

/** The pattern as a plain string, when it is one (no flags that matter, only literal chars). */
function pureLiteral(n: Node): string | null {
  if (n.kind === "empty") return "";
  const items = n.kind === "cat" ? n.items : [n];
  let s = "";
  for (const item of items) {
    const c = item.kind === "char" ? singleChar(item.set) : -1;
    if (c < 0) return null;
    s += charString(c);
  }
  return s;
}

/** Most strings in a prefix set (each costs one indexOf pass over the text). */
const MAX_PREFIXES = 16;
/** Longest prefix kept. */
const MAX_PREFIX_LENGTH = 64;

/** Each position of a match's start: the few characters allowed there. */
type CharChoices = number[][];

/** The characters of a non-empty set of at most four, or null. */
function fewChars(set: CharSet): number[] | null {
  const out: number[] = [];
  for (let i = 0; i < set.length; i += 2) {
    if (set[i + 1]! - set[i]! + out.length >= 4) return null;
    for (let c = set[i]!; c <= set[i + 1]!; c++) out.push(c);
  }
  return out.length === 0 ? null : out;
}

/** One CharChoices per way a match can start, or null when some way has no fixed start. */
function prefixChoices(n: Node): CharChoices[] | null {
  switch (n.kind) {
    case "char": {
      const chars = fewChars(n.set);
      return chars === null ? null : [[chars]];
    }
    case "rep":
      return n.min >= 1 ? prefixChoices(n.body) : null;
    case "alt": {
      const out: CharChoices[] = [];
      for (const item of n.items) {
        const sub = prefixChoices(item);
        if (sub === null || out.length + sub.length > MAX_PREFIXES) return null;
        out.push(...sub);
      }
      return out;
    }
    case "cat": {
      const seq: CharChoices = [];
      for (const item of n.items) {
        if (item.kind === "assert") continue;
        const chars = item.kind === "char" ? fewChars(item.set) : null;
        if (chars !== null && seq.length < MAX_PREFIX_LENGTH) {
          seq.push(chars);
          continue;
        }
        if (seq.length === 0) return prefixChoices(item);
        break;
      }
      return seq.length === 0 ? null : [seq];
    }
    default:
      return null;
  }
}

/**
 * Strings one of which every match starts with, or null. Choices are spelled out (`fatal` with
 * `i` gives "fa", "fA", "Fa", "FA", ...) as far as MAX_PREFIXES strings allow.
 */
function prefixes(n: Node): string[] | null {
  const choices = prefixChoices(n);
  if (choices === null) return null;
  let sets = choices.map((seq) => seq[0]!.map(charString));
  if (sets.reduce((sum, strings) => sum + strings.length, 0) > MAX_PREFIXES) return null;
  for (let k = 1; k < MAX_PREFIX_LENGTH; k++) {
    let grew = false;
    let total = sets.reduce((sum, strings) => sum + strings.length, 0);
    sets = sets.map((strings, i) => {
      const next = choices[i]![k];
      if (next === undefined || strings[0]!.length !== k) return strings;
      const size = strings.length * next.length;
      if (total - strings.length + size > MAX_PREFIXES) return strings;
      total += size - strings.length;
      grew = true;
      return strings.flatMap((s) => next.map((c) => s + charString(c)));
    });
    if (!grew) break;
  }
  return [...new Set(sets.flat())];
}

/** The longest string every match contains ("" when none is known). */
function requiredLiteral(n: Node): string {
  switch (n.kind) {
    case "char": {
      const c = singleChar(n.set);
      return c < 0 ? "" : charString(c);
    }
    case "rep":
      return n.min >= 1 ? requiredLiteral(n.body) : "";
    case "cat": {
      let best = "";
      let run = "";
      for (const item of n.items) {
        if (item.kind === "assert") continue;
        const c = item.kind === "char" ? singleChar(item.set) : -1;
        if (c >= 0) {
          run += charString(c);
          continue;
        }
        if (run.length > best.length) best = run;
        run = "";
        const inner = requiredLiteral(item);
        if (inner.length > best.length) best = inner;
      }
      return run.length > best.length ? run : best;
    }
    default:
      return "";
  }
}

// ---------------------------------------------------------------------------------------------
// The matcher.

const WORD_ASCII = new Uint8Array(128);
for (let i = 0; i < WORD.length; i += 2) WORD_ASCII.fill(1, WORD[i]!, WORD[i + 1]! + 1);

function inRanges(r: Int32Array, c: number): boolean {
  let lo = 0;
  let hi = (r.length >> 1) - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (c < r[2 * mid]!) hi = mid - 1;
    else if (c > r[2 * mid + 1]!) lo = mid + 1;
    else return true;
  }
  return false;
}

class Regex implements LinearRegex {
  readonly source: string;
  readonly flags: string;
  readonly #unicode: boolean;
  readonly #ops: Int32Array;
  readonly #a: Int32Array;
  readonly #b: Int32Array;
  readonly #base: Int32Array;
  readonly #states: number;
  /** 128 membership bytes per set for ASCII, ranges for the rest. */
  readonly #setAscii: Uint8Array;
  readonly #setHigh: Int32Array[];
  /** Non-ASCII word characters for \b (with `u` and `i`). */
  readonly #wordExtra: CharSet | null;
  /** The whole pattern is this string: indexOf does the work. */
  readonly #literal: string | null;
  /** Every match starts with one of these. */
  readonly #prefixes: string[] | null;
  /** Every match contains this. */
  readonly #required: string | null;
  /** Every match starts at 0 (a leading ^ without m). */
  readonly #anchored: boolean;
  /** ASCII characters a match can start with, and whether a non-ASCII one can. */
  readonly #first: Uint8Array | null;
  readonly #firstNonAscii: boolean;
  /** With `u`, V8 also tries empty matches inside surrogate pairs (see `#search`). */
  readonly #emptyInPairs: boolean;

  get programSize(): number {
    return this.#states;
  }

  // Per-search scratch, allocated on first use, O(program).
  #pc0 = new Int32Array(0);
  #st0 = new Int32Array(0);
  #pc1 = new Int32Array(0);
  #st1 = new Int32Array(0);
  #visited = new Int32Array(0);
  #stackPc = new Int32Array(0);
  #stackDepth = new Int32Array(0);
  #prefixAt = new Int32Array(0);
  #gen = 0;
  #matchEnd = -1;

  constructor(source: string, flags: Flags, ast: Node, program: Program) {
    this.source = source;
    this.flags = flags.text;
    this.#unicode = flags.unicode;
    this.#ops = program.ops;
    this.#a = program.a;
    this.#b = program.b;
    this.#base = program.base;
    this.#states = program.states;
    this.#setAscii = new Uint8Array(128 * program.sets.length);
    this.#setHigh = program.sets.map((set, k) => {
      for (let i = 0; i < set.length && set[i]! < 128; i += 2) {
        this.#setAscii.fill(1, k * 128 + set[i]!, k * 128 + Math.min(set[i + 1]!, 127) + 1);
      }
      return Int32Array.from(nonAscii(set));
    });
    this.#wordExtra = flags.unicode && flags.ignoreCase
      ? normalize(nonAscii(closeOverCase(WORD, unicodeTable())))
      : null;

    const ok = (s: string): boolean => !flags.unicode || wellFormed(s);
    const literal = pureLiteral(ast);
    this.#literal = literal !== null && ok(literal) ? literal : null;
    const pre = prefixes(ast);
    this.#prefixes = pre !== null && pre.every(ok) ? pre : null;
    const req = this.#prefixes === null ? requiredLiteral(ast) : "";
    this.#required = req !== "" ? req : null;
    this.#anchored = this.#startsAnchored();
    const first = this.#anchored ? null : this.#firstChars();
    this.#first = first?.ascii ?? null;
    this.#firstNonAscii = first?.nonAscii ?? true;
    this.#emptyInPairs = flags.unicode && nullable(ast);
  }

  exec(text: string, from = 0): RegexMatch | null {
    const index = this.#search(text, from, false);
    return index < 0
      ? null
      : { index, end: this.#matchEnd, match: text.slice(index, this.#matchEnd) };
  }

  test(text: string): boolean {
    return this.#search(text, 0, true) >= 0;
  }

  /** Every path from the start meets a non-multiline ^ before consuming anything. */
  #startsAnchored(): boolean {
    const ops = this.#ops;
    const seen = new Uint8Array(ops.length);
    const todo = [0];
    while (todo.length > 0) {
      const pc = todo.pop()!;
      if (seen[pc]) continue;
      seen[pc] = 1;
      const op = ops[pc]!;
      if (op < OP_SPLIT || op === OP_MATCH) return false;
      if (op === OP_ASSERT && this.#a[pc] === A_BOL) continue;
      if (op === OP_SPLIT) todo.push(this.#b[pc]!, this.#a[pc]!);
      else if (op === OP_JMP) todo.push(this.#a[pc]!);
      else todo.push(pc + 1);
    }
    return true;
  }

  /** Characters a match can start with; null when it can be empty or start with most ASCII. */
  #firstChars(): { ascii: Uint8Array; nonAscii: boolean } | null {
    const ops = this.#ops;
    const seen = new Uint8Array(ops.length);
    const ascii = new Uint8Array(128);
    let nonAscii = false;
    const todo = [0];
    while (todo.length > 0) {
      const pc = todo.pop()!;
      if (seen[pc]) continue;
      seen[pc] = 1;
      const a = this.#a[pc]!;
      switch (ops[pc]) {
        case OP_MATCH:
          return null;
        case OP_SPLIT:
          todo.push(this.#b[pc]!, a);
          break;
        case OP_JMP:
          todo.push(a);
          break;
        case OP_ASSERT:
        case OP_LOOP_START:
        case OP_LOOP_END:
          todo.push(pc + 1);
          break;
        case OP_CHAR2:
          for (const c of [a, this.#b[pc]!]) {
            if (c < 128) ascii[c] = 1;
            else nonAscii = true;
          }
          break;
        case OP_CHAR:
          if (a < 128) ascii[a] = 1;
          else nonAscii = true;
          break;
        case OP_SET:
          for (let c = 0; c < 128; c++) if (this.#setAscii[a * 128 + c] === 1) ascii[c] = 1;
          if (this.#setHigh[a]!.length > 0) nonAscii = true;
          break;
        default:
          return null;
      }
    }
    let count = 0;
    for (let c = 0; c < 128; c++) count += ascii[c]!;
    return count > 96 ? null : { ascii, nonAscii };
  }

  #nextGen(): number {
    if (this.#gen >= 0x7ffffffe) {
      this.#visited.fill(0);
      this.#gen = 0;
    }
    return ++this.#gen;
  }

  #ensureScratch(): void {
    const n = this.#ops.length;
    if (this.#pc0.length === n) return;
    this.#pc0 = new Int32Array(n);
    this.#st0 = new Int32Array(n);
    this.#pc1 = new Int32Array(n);
    this.#st1 = new Int32Array(n);
    this.#visited = new Int32Array(this.#states);
    this.#stackPc = new Int32Array(this.#states + 1);
    this.#stackDepth = new Int32Array(this.#states + 1);
    this.#prefixAt = new Int32Array(this.#prefixes?.length ?? 0);
  }

  /** Start index of the match (end in #matchEnd), or -1. `any`: stop at the first match found. */
  #search(text: string, fromArg: number, any: boolean): number {
    const len = text.length;
    let from = fromArg > 0 ? Math.floor(fromArg) : 0;
    if (from > len) return -1;
    if (
      this.#unicode && from > 0 && from < len && (text.charCodeAt(from) & 0xfc00) === 0xdc00 &&
      (text.charCodeAt(from - 1) & 0xfc00) === 0xd800
    ) {
      from--; // like RegExp with `u`: a lastIndex inside a surrogate pair means the pair
    }
    const literal = this.#literal;
    if (literal !== null) {
      const i = text.indexOf(literal, from);
      this.#matchEnd = i + literal.length;
      return i;
    }
    if (this.#anchored && from > 0) return -1;
    if (this.#required !== null && text.indexOf(this.#required, from) < 0) return -1;
    this.#ensureScratch();
    this.#prefixAt.fill(-2);

    const ops = this.#ops;
    const A = this.#a;
    const B = this.#b;
    const setAscii = this.#setAscii;
    const setHigh = this.#setHigh;
    const unicode = this.#unicode;
    const anchored = this.#anchored;
    let cpc = this.#pc0;
    let cst = this.#st0;
    let npc = this.#pc1;
    let nst = this.#st1;
    let matchStart = -1;

    // With `u`, ECMA-262 tries starts one code point apart, but V8 steps one code unit at a
    // time, so an empty match can start between the halves of a pair (/\B/u on "x😀😀" is at 2).
    // A thread cannot consume from there, so only an empty match matters: `#emptyAt` checks it
    // with lowest priority whenever the scan steps over a pair. Remove if V8 follows the spec.
    const emptyInPairs = this.#emptyInPairs;
    let p = this.#candidate(text, from);
    if (p < 0) return -1;
    let gen = this.#nextGen();
    let ccount = this.#add(cpc, cst, 0, 0, p, p, text, gen);
    if (ccount < 0) {
      ccount = ~ccount;
      matchStart = p;
      if (any) return p;
    }
    for (;;) {
      if (ccount === 0) {
        // Nothing alive: jump to the next place a match can start.
        if (matchStart >= 0 || p >= len) break;
        const w = this.#width(text, p);
        if (w === 2 && emptyInPairs && this.#emptyAt(cpc, cst, text, p + 1)) {
          matchStart = p + 1;
          break;
        }
        p = this.#candidate(text, p + w);
        if (p < 0) break;
        gen = this.#nextGen();
        ccount = this.#add(cpc, cst, 0, 0, p, p, text, gen);
        if (ccount < 0) {
          ccount = ~ccount;
          matchStart = p;
          if (any) return p;
        }
        continue;
      }
      if (p >= len) break;
      let c = text.charCodeAt(p);
      let w = 1;
      if (unicode && (c & 0xfc00) === 0xd800 && p + 1 < len) {
        const d = text.charCodeAt(p + 1);
        if ((d & 0xfc00) === 0xdc00) {
          c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          w = 2;
        }
      }
      const q = p + w;
      if (w === 2 && emptyInPairs && matchStart < 0 && this.#emptyAt(npc, nst, text, p + 1)) {
        // Below every live thread in priority: a match they find later still wins.
        matchStart = p + 1;
        if (any) return matchStart;
      }
      gen = this.#nextGen();
      let ncount = 0;
      for (let i = 0; i < ccount; i++) {
        const pc = cpc[i]!;
        let ok: boolean;
        switch (ops[pc]) {
          case OP_CHAR:
            ok = c === A[pc];
            break;
          case OP_CHAR2:
            ok = c === A[pc] || c === B[pc];
            break;
          case OP_SET:
            ok = c < 128 ? setAscii[(A[pc]! << 7) | c] === 1 : inRanges(setHigh[A[pc]!]!, c);
            break;
          case OP_ANY:
            ok = true;
            break;
          default: // OP_ANY_BUT_NEWLINE
            ok = c !== 10 && c !== 13 && c !== 0x2028 && c !== 0x2029;
        }
        if (!ok) continue;
        const r = this.#add(npc, nst, ncount, pc + 1, cst[i]!, q, text, gen);
        if (r < 0) {
          // Matched: threads after this one have lower priority and are dropped.
          ncount = ~r;
          matchStart = cst[i]!;
          if (any) return matchStart;
          break;
        }
        ncount = r;
      }
      p = q;
      if (matchStart < 0 && !anchored) {
        // A thread for a match starting here, after all others in priority.
        const r = this.#add(npc, nst, ncount, 0, p, p, text, gen);
        if (r < 0) {
          ncount = ~r;
          matchStart = p;
          if (any) return p;
        } else {
          ncount = r;
        }
      }
      const tpc = cpc;
      cpc = npc;
      npc = tpc;
      const tst = cst;
      cst = nst;
      nst = tst;
      ccount = ncount;
    }
    return matchStart;
  }

  /** Whether the pattern matches empty at `pos` (scratch lists are overwritten). */
  #emptyAt(lpc: Int32Array, lst: Int32Array, text: string, pos: number): boolean {
    return this.#add(lpc, lst, 0, 0, pos, pos, text, this.#nextGen()) < 0;
  }

  #width(text: string, p: number): number {
    return this.#unicode && (text.charCodeAt(p) & 0xfc00) === 0xd800 &&
        (text.charCodeAt(p + 1) & 0xfc00) === 0xdc00
      ? 2
      : 1;
  }

  /** The first position at or after `q` where a match may start, or -1. */
  #candidate(text: string, q: number): number {
    const len = text.length;
    if (q > len) return -1;
    if (this.#anchored) return q === 0 ? 0 : -1;
    const pre = this.#prefixes;
    if (pre !== null) {
      const at = this.#prefixAt;
      let best = -1;
      for (let i = 0; i < pre.length; i++) {
        let next = at[i]!;
        if (next !== -1 && next < q) at[i] = next = text.indexOf(pre[i]!, q);
        if (next >= 0 && (best < 0 || next < best)) best = next;
      }
      return best;
    }
    const first = this.#first;
    if (first !== null) {
      const nonAscii = this.#firstNonAscii;
      for (; q < len; q++) {
        const c = text.charCodeAt(q);
        if (c < 128 ? first[c] === 1 : nonAscii) {
          if (
            this.#unicode && (c & 0xfc00) === 0xdc00 && q > 0 &&
            (text.charCodeAt(q - 1) & 0xfc00) === 0xd800
          ) continue;
          return q;
        }
      }
      return -1;
    }
    return q;
  }

  /**
   * Follows empty transitions from `pc0` at `pos` in priority order (depth first, preferred branch
   * first), appending the consuming instructions reached to the list. Returns the new count, or
   * its complement (~count) when MATCH was reached: everything after it has lower priority.
   *
   * ECMA-262 fails an optional iteration that matches nothing, so the state of a path is its
   * instruction plus `depth`: how many of the checked loops around it started their current
   * iteration at this position (always the innermost ones). LOOP_START adds one; LOOP_END passes
   * only at 0. Deduplicating on (instruction, depth) rather than the instruction alone keeps an
   * iteration that restarted here from being pruned by a lower-priority visit of the same code.
   * After a character is consumed every depth is 0, so the thread lists hold instructions only.
   */
  #add(
    lpc: Int32Array,
    lst: Int32Array,
    count: number,
    pc0: number,
    start: number,
    pos: number,
    text: string,
    gen: number,
  ): number {
    const ops = this.#ops;
    const base = this.#base;
    const visited = this.#visited;
    if (ops[pc0]! < OP_SPLIT) {
      // The common case: the next instruction consumes.
      const slot = base[pc0]!;
      if (visited[slot] !== gen) {
        visited[slot] = gen;
        lpc[count] = pc0;
        lst[count] = start;
        count++;
      }
      return count;
    }
    const A = this.#a;
    const B = this.#b;
    const stackPc = this.#stackPc;
    const stackDepth = this.#stackDepth;
    stackPc[0] = pc0;
    stackDepth[0] = 0;
    let sp = 1;
    while (sp > 0) {
      sp--;
      let pc = stackPc[sp]!;
      let depth = stackDepth[sp]!;
      for (;;) {
        const op = ops[pc]!;
        if (op < OP_SPLIT) {
          const slot = base[pc]!;
          if (visited[slot] !== gen) {
            visited[slot] = gen;
            lpc[count] = pc;
            lst[count] = start;
            count++;
          }
          break;
        }
        const slot = base[pc]! + depth;
        if (visited[slot] === gen) break;
        visited[slot] = gen;
        if (op === OP_SPLIT) {
          stackPc[sp] = B[pc]!;
          stackDepth[sp] = depth;
          sp++;
          pc = A[pc]!;
        } else if (op === OP_JMP) {
          pc = A[pc]!;
        } else if (op === OP_ASSERT) {
          if (!this.#assert(A[pc]!, text, pos)) break;
          pc++;
        } else if (op === OP_LOOP_START) {
          depth++;
          pc++;
        } else if (op === OP_LOOP_END) {
          if (depth !== 0) break;
          pc++;
        } else { // OP_MATCH
          this.#matchEnd = pos;
          return ~count;
        }
      }
    }
    return count;
  }

  #assert(kind: number, text: string, pos: number): boolean {
    switch (kind) {
      case A_BOL:
        return pos === 0;
      case A_EOL:
        return pos === text.length;
      case A_MBOL:
        return pos === 0 || isLineTerminator(text.charCodeAt(pos - 1));
      case A_MEOL:
        return pos === text.length || isLineTerminator(text.charCodeAt(pos));
      default: {
        const before = pos > 0 && this.#isWord(text.charCodeAt(pos - 1));
        const after = pos < text.length && this.#isWord(text.charCodeAt(pos));
        return (before !== after) === (kind === A_WORD);
      }
    }
  }

  #isWord(c: number): boolean {
    if (c < 128) return WORD_ASCII[c] === 1;
    return this.#wordExtra !== null && contains(this.#wordExtra, c);
  }
}

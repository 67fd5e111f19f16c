/**
 * Rule patterns. A rule is matched against a command's normalised argv joined by single spaces:
 *
 * - `*` matches any text, including spaces and nothing at all;
 * - `?` matches exactly one character;
 * - `\` makes the next character literal (`\*`, `\?`, `\\`);
 * - everything else matches itself (case-sensitive). There are no `[…]` classes and no `**`.
 * - A pattern matches the whole text, not a part of it.
 * - A pattern that ends in ` *` also matches the text before it: `git push *` matches `git push`.
 * - Runs of spaces in a pattern count as one space, and leading or trailing spaces are ignored.
 * - A first word with a `/` (and no wildcard) is reduced to its last part, as commands are:
 *   `/usr/bin/rm *` is `rm *`.
 *
 * Matching is a set-of-states automaton over the pattern: linear in the text for each pattern,
 * with no backtracking (a pattern cannot make matching slow).
 *
 * Text may hold holes — values known only at run time (see `_words.ts`). `matchSome` answers
 * "could some value of the holes match?" (deny and confirm rules), `matchEvery` answers "does every
 * value match?" conservatively: a hole must fall inside a `*` (allow rules).
 */
import { SUBJECT_HOME } from "./_words.ts";

const STAR = -1;
const QUESTION = -2;
const SPACE = 0x20;
const TILDE = 0x7e;

export interface CompiledGlob {
  /** The pattern as written in the config. */
  readonly source: string;
  readonly tokens: Int32Array;
  /** The pattern without its trailing ` *`, when it has one. */
  readonly bare: Int32Array | undefined;
  /**
   * The literal text every match starts with (up to the first wildcard, of `bare` when there
   * is one): literal text that does not start with it cannot match (see `mayMatchLiteral`).
   */
  readonly prefix: string;
}

/** Compiles a pattern; a RangeError for an empty one or a trailing lone backslash. */
export function compileGlob(pattern: string): CompiledGlob {
  const text = normalizePattern(pattern);
  if (text === "") throw new RangeError(`Rule pattern "${pattern}" is empty`);
  const tokens: number[] = [];
  for (let i = 0; i < text.length;) {
    const cp = text.codePointAt(i)!;
    i += cp > 0xffff ? 2 : 1;
    if (cp === 0x5c) {
      if (i >= text.length) {
        throw new RangeError(`Rule pattern "${pattern}" ends with a lone backslash`);
      }
      const next = text.codePointAt(i)!;
      i += next > 0xffff ? 2 : 1;
      tokens.push(next);
    } else if (cp === 0x2a) {
      if (tokens[tokens.length - 1] !== STAR) tokens.push(STAR);
    } else if (cp === 0x3f) {
      tokens.push(QUESTION);
    } else {
      tokens.push(cp);
    }
  }
  const n = tokens.length;
  const bare = n >= 2 && tokens[n - 1] === STAR && tokens[n - 2] === SPACE
    ? Int32Array.from(tokens.slice(0, n - 2))
    : undefined;
  const shortest = bare ?? tokens;
  let end = 0;
  while (end < shortest.length && shortest[end]! >= 0) end++;
  const prefix = String.fromCodePoint(...shortest.slice(0, end));
  return { source: pattern, tokens: Int32Array.from(tokens), bare, prefix };
}

/**
 * False when no literal text like `text` (no holes) can match: it does not start with the
 * pattern's literal prefix. True means "maybe": ask `matchSome`.
 */
export function mayMatchLiteral(glob: CompiledGlob, text: string): boolean {
  return text.startsWith(glob.prefix);
}

function normalizePattern(pattern: string): string {
  const text = pattern.trim().replace(/[ \t]+/g, " ");
  const space = text.indexOf(" ");
  const first = space === -1 ? text : text.slice(0, space);
  if (!first.includes("/") || /[*?\\]/.test(first)) return text;
  const base = first.slice(first.lastIndexOf("/") + 1);
  return base === "" ? text : base + text.slice(first.length);
}

/** True when the literal text matches the pattern. */
export function globMatch(glob: CompiledGlob, text: string): boolean {
  return matchSome(glob, Int32Array.from(Array.from(text, (c) => c.codePointAt(0)!)));
}

/** Could some value of the subject's holes make it match? */
export function matchSome(glob: CompiledGlob, subject: Int32Array): boolean {
  return run(glob.tokens, subject, false) ||
    (glob.bare !== undefined && run(glob.bare, subject, false));
}

/** Does every value of the subject's holes match? (Conservative: holes must fall in a `*`.) */
export function matchEvery(glob: CompiledGlob, subject: Int32Array): boolean {
  return run(glob.tokens, subject, true) ||
    (glob.bare !== undefined && run(glob.bare, subject, true));
}

function run(p: Int32Array, s: Int32Array, every: boolean): boolean {
  const n = p.length;
  // Quick refusal on a literal prefix (most rules start with a program name).
  for (let i = 0; i < n && i < s.length; i++) {
    const t = p[i]!;
    const c = s[i]!;
    if (t < 0 || c < 0) break;
    if (t !== c) return false;
  }
  let cur = new Uint8Array(n + 1);
  let next = new Uint8Array(n + 1);
  cur[0] = 1;
  close(p, cur);
  for (let j = 0; j < s.length; j++) {
    const c = s[j]!;
    next.fill(0);
    let any = false;
    if (c >= 0) {
      for (let i = 0; i < n; i++) {
        if (!cur[i]) continue;
        const t = p[i]!;
        if (t === STAR) next[i] = 1;
        else if (t === QUESTION || t === c) next[i + 1] = 1;
        else continue;
        any = true;
      }
    } else if (!every) {
      // Some value of the hole reaches every state from the first live one on.
      let first = -1;
      for (let i = 0; i <= n; i++) {
        if (cur[i]) {
          first = i;
          break;
        }
      }
      if (first !== -1) {
        next.fill(1, first);
        any = true;
      }
    } else {
      for (let i = 0; i < n; i++) {
        if (!cur[i]) continue;
        const t = p[i]!;
        if (t === STAR) next[i] = 1;
        else if (c === SUBJECT_HOME && t === TILDE) next[i + 1] = 1;
        else continue;
        any = true;
      }
    }
    if (!any) return false;
    close(p, next);
    [cur, next] = [next, cur];
  }
  return cur[n] === 1;
}

/** A `*` may match nothing: its state also reaches the state after it. */
function close(p: Int32Array, states: Uint8Array): void {
  for (let i = 0; i < p.length; i++) {
    if (states[i] && p[i] === STAR) states[i + 1] = 1;
  }
}

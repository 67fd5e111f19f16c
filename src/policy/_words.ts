/**
 * Words as the shell will see them when the command runs. A word is literal text with holes where
 * the value is only known at run time (`$HOME`, `$(cmd)`, a glob, the file `find` passes to
 * `-exec`). Rules are matched against these: a deny rule matches when SOME value of the holes
 * could match it, an allow rule only when EVERY value would.
 */

/** A hole: any text, possibly empty, possibly spaces. */
export const ANY = 0;
/** A hole that is the user's home directory (a leading `~`): a `~` in a rule matches it. */
export const HOME = 1;
export type Hole = typeof ANY | typeof HOME;
export type Piece = string | Hole;

export interface ShellWord {
  readonly pieces: readonly Piece[];
  /** The text when the word has no holes. */
  readonly literal: string | undefined;
  /** How the word is shown in decisions: its text, or its source where it has holes. */
  readonly display: string;
  /** It may become zero or several words at run time (unquoted expansion, glob, braces). */
  readonly splits: boolean;
}

export function literalWord(text: string): ShellWord {
  return { pieces: text === "" ? [] : [text], literal: text, display: text, splits: false };
}

export function holeWord(display: string, splits: boolean): ShellWord {
  return { pieces: [ANY], literal: undefined, display, splits };
}

/** Builds a word, merging adjacent text; `display` defaults to the text when there is no hole. */
export function makeWord(pieces: readonly Piece[], display: string, splits: boolean): ShellWord {
  const merged: Piece[] = [];
  for (const p of pieces) {
    const last = merged[merged.length - 1];
    if (typeof p === "string") {
      if (p === "") continue;
      if (typeof last === "string") merged[merged.length - 1] = last + p;
      else merged.push(p);
    } else if (p === ANY && last === ANY) {
      continue;
    } else {
      merged.push(p);
    }
  }
  const literal = merged.every((p) => typeof p === "string") ? merged.join("") : undefined;
  return { pieces: merged, literal, display: literal ?? display, splits };
}

/** Replaces every `needle` in the word's text by a hole (`find -exec … {}`, `xargs -I {}`). */
export function replaceWithHole(word: ShellWord, needle: string): ShellWord {
  if (needle === "" || !word.pieces.some((p) => typeof p === "string" && p.includes(needle))) {
    return word;
  }
  const pieces: Piece[] = [];
  for (const p of word.pieces) {
    if (typeof p !== "string") {
      pieces.push(p);
      continue;
    }
    const parts = p.split(needle);
    parts.forEach((text, i) => {
      if (i > 0) pieces.push(ANY);
      pieces.push(text);
    });
  }
  return makeWord(pieces, word.display, word.splits);
}

/** The words joined by single spaces, as code points with holes: what rules are matched against. */
export function subjectOf(words: readonly ShellWord[]): Int32Array {
  const out: number[] = [];
  words.forEach((w, i) => {
    if (i > 0) out.push(0x20);
    for (const p of w.pieces) {
      if (typeof p === "string") {
        for (const ch of p) out.push(ch.codePointAt(0)!);
      } else {
        out.push(p === ANY ? SUBJECT_ANY : SUBJECT_HOME);
      }
    }
  });
  return Int32Array.from(out);
}

export const SUBJECT_ANY = -1;
export const SUBJECT_HOME = -2;

/** Decodes the body of bash's `$'…'` quoting. A NUL ends the string, as in bash. */
export function decodeAnsiC(body: string): string {
  let out = "";
  let i = 0;
  const hex = (max: number) => {
    let j = i;
    while (j < body.length && j - i < max && /[0-9A-Fa-f]/.test(body[j]!)) j++;
    const digits = body.slice(i, j);
    i = j;
    return digits;
  };
  while (i < body.length) {
    const ch = body[i++]!;
    if (ch !== "\\" || i >= body.length) {
      out += ch;
      continue;
    }
    const e = body[i++]!;
    let code: number | undefined;
    switch (e) {
      case "a":
        code = 7;
        break;
      case "b":
        code = 8;
        break;
      case "e":
      case "E":
        code = 27;
        break;
      case "f":
        code = 12;
        break;
      case "n":
        code = 10;
        break;
      case "r":
        code = 13;
        break;
      case "t":
        code = 9;
        break;
      case "v":
        code = 11;
        break;
      case "\\":
      case "'":
      case '"':
      case "?":
        code = e.codePointAt(0)!;
        break;
      case "x": {
        const d = hex(2);
        if (d === "") {
          out += "\\x";
          continue;
        }
        code = parseInt(d, 16);
        break;
      }
      case "u":
      case "U": {
        const d = hex(e === "u" ? 4 : 8);
        if (d === "") {
          out += "\\" + e;
          continue;
        }
        code = parseInt(d, 16);
        if (code > 0x10ffff) code = 0xfffd;
        break;
      }
      case "c": {
        if (i >= body.length) {
          out += "\\c";
          continue;
        }
        const c = body[i++]!;
        code = c === "?" ? 0x7f : c.toUpperCase().codePointAt(0)! & 0x1f;
        break;
      }
      default:
        if (e >= "0" && e <= "7") {
          let j = i;
          while (j < body.length && j - i < 2 && body[j]! >= "0" && body[j]! <= "7") j++;
          code = parseInt(e + body.slice(i, j), 8) & 0xff;
          i = j;
        } else {
          out += "\\" + e;
          continue;
        }
    }
    if (code === 0) break;
    out += String.fromCodePoint(code);
  }
  return out;
}

/**
 * True when the unquoted, unescaped characters of a word (`active`: quoted or escaped characters
 * and expansions replaced by NUL) hold a brace expansion: `{a,b}` or `{1..9}`.
 */
export function hasBraceExpansion(active: string): boolean {
  for (let open = active.indexOf("{"); open !== -1; open = active.indexOf("{", open + 1)) {
    let depth = 0;
    for (let i = open; i < active.length; i++) {
      const c = active[i];
      if (c === "{") depth++;
      else if (c === "}") {
        depth--;
        if (depth === 0) {
          const inner = active.slice(open + 1, i);
          if (/^[^{}]*\.\.[^{}]*$/.test(inner) && !inner.includes(",")) return true;
          break;
        }
      } else if (c === "," && depth === 1) {
        // A comma at the top level of a closed pair is an expansion; an unclosed pair is literal.
        if (active.indexOf("}", i) !== -1) return true;
      }
    }
  }
  return false;
}

/**
 * GNU `env -S` splitting: spaces separate, `'…'` and `"…"` quote, backslash escapes, `#` starts a
 * comment. Returns the words, or a reason when they cannot be known (`${VAR}`) or are invalid.
 */
export function splitEnvString(text: string): string[] | { reason: string } {
  const words: string[] = [];
  let cur = "";
  let inWord = false;
  let quote: "'" | '"' | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote === "'") {
      if (c === "'") quote = undefined;
      else if (c === "\\" && (text[i + 1] === "\\" || text[i + 1] === "'")) cur += text[++i];
      else cur += c;
      continue;
    }
    if (c === "$") return { reason: `"env -S" expands a variable in "${text}"` };
    if (quote === '"' && c === '"') {
      quote = undefined;
      continue;
    }
    if (c === "\\") {
      const e = text[++i];
      const simple: Record<string, string> = {
        "\\": "\\",
        '"': '"',
        "'": "'",
        "#": "#",
        "$": "$",
        f: "\f",
        n: "\n",
        r: "\r",
        t: "\t",
        v: "\v",
      };
      if (e === undefined) return { reason: `"env -S" string ends with a backslash` };
      if (e === "c") {
        if (quote) return { reason: `"env -S" has \\c inside quotes` };
        break;
      }
      if (e === "_") {
        if (quote) {
          cur += " ";
        } else if (inWord) {
          words.push(cur);
          cur = "";
          inWord = false;
        }
        continue;
      }
      const out = simple[e];
      if (out === undefined) return { reason: `"env -S" has an invalid escape "\\${e}"` };
      cur += out;
      inWord = true;
      continue;
    }
    if (quote === '"') {
      cur += c;
      continue;
    }
    if (c === " " || c === "\t" || c === "\n" || c === "\v" || c === "\f" || c === "\r") {
      if (inWord) {
        words.push(cur);
        cur = "";
        inWord = false;
      }
      continue;
    }
    if (c === "#" && !inWord) break;
    if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
      continue;
    }
    cur += c;
    inWord = true;
  }
  if (quote) return { reason: `"env -S" string has an unclosed quote` };
  if (inWord) words.push(cur);
  return words;
}

/** The part after the last `/`, as the shell finds a program by name (`/usr/bin/rm` → `rm`). */
export function programName(name: string): string {
  const base = name.slice(name.lastIndexOf("/") + 1);
  // zsh `=rm` expands to the path of `rm`.
  return base.startsWith("=") && base.length > 1 ? base.slice(1) : base;
}

/**
 * Key names to terminal input bytes, for driving full-screen programs (`exec_write {keys}`).
 *
 * Names follow tmux `send-keys` (case-insensitive: `Enter`, `C-c`, `M-x`, `S-Up`, `F5`); a string
 * that is not a key name is typed as it is (UTF-8), so `["i", "hello", "Escape", ":wq", "Enter"]`
 * edits a file in vi. The bytes are those xterm sends with its default settings (xterm ctlseqs,
 * "PC-Style Function Keys"; `metaSendsEscape`, `backarrowKey` DEL, `modifyOtherKeys` off): cursor
 * keys follow DECCKM (`CSI ? 1 h`, application mode → `SS3 A`), modified keys carry xterm's
 * modifier parameter (`CSI 1 ; 5 C` for `C-Right`), Alt on a character is an ESC prefix.
 *
 * Unlike tmux, a modifier prefix (`C-`, `M-`, `S-`, upper case) on something that has no bytes in
 * such a terminal (`C-1`, `C-Enter`, `S-a`) is an error naming the key rather than literal text:
 * a program could not tell `C-Enter` from `Enter`, and an agent should learn that instead of
 * typing "C-Enter" into a file. `{ text }` types anything literally, `{ paste }` pastes it.
 */
import { TermadaError } from "../shared/mod.ts";

/** At most this many entries per call. */
export const MAX_KEYS = 256;
/** At most this many bytes once encoded. */
export const MAX_KEYS_BYTES = 64 * 1024;

/**
 * One entry: a key name or literal text (`"Enter"`, `"C-c"`, `":wq"`); `{ text }` for text that
 * must not be read as a key name (`{ text: "Enter" }` types the word); `{ paste }` for text
 * pasted as a terminal would (bracketed when the program enabled it, see {@link pasteText}).
 */
export type KeyInput = string | { text: string } | { paste: string };

export interface KeyModes {
  /** DECCKM (`CSI ? 1 h`) is on: unmodified cursor keys, Home and End send `SS3 …`. */
  applicationCursor?: boolean;
  /** DEC mode 2004 is on: `{ paste }` entries are wrapped in `ESC [ 200 ~` … `ESC [ 201 ~`. */
  bracketedPaste?: boolean;
}

const ESC = "\x1b";
const CSI = "\x1b[";
const SS3 = "\x1bO";
const PASTE_START = "\x1b[200~";
const PASTE_END = "\x1b[201~";

/**
 * Keys with an xterm "PC-style" sequence. `csi` keys end in a letter (`CSI 1 ; m X` when
 * modified), `tilde` keys are `CSI n ~` (`CSI n ; m ~`). `ss3` keys send `SS3 X` unmodified
 * (always for F1–F4, in application cursor mode for the cursor keys, Home and End).
 */
type Special =
  | { kind: "csi"; final: string; app: boolean }
  | { kind: "ss3"; final: string }
  | { kind: "tilde"; code: number };

const SPECIAL: ReadonlyMap<string, Special> = new Map<string, Special>([
  ["up", { kind: "csi", final: "A", app: true }],
  ["down", { kind: "csi", final: "B", app: true }],
  ["right", { kind: "csi", final: "C", app: true }],
  ["left", { kind: "csi", final: "D", app: true }],
  ["home", { kind: "csi", final: "H", app: true }],
  ["end", { kind: "csi", final: "F", app: true }],
  ["insert", { kind: "tilde", code: 2 }],
  ["ic", { kind: "tilde", code: 2 }],
  ["delete", { kind: "tilde", code: 3 }],
  ["dc", { kind: "tilde", code: 3 }],
  ["pageup", { kind: "tilde", code: 5 }],
  ["pgup", { kind: "tilde", code: 5 }],
  ["ppage", { kind: "tilde", code: 5 }],
  ["pagedown", { kind: "tilde", code: 6 }],
  ["pgdn", { kind: "tilde", code: 6 }],
  ["npage", { kind: "tilde", code: 6 }],
  ["f1", { kind: "ss3", final: "P" }],
  ["f2", { kind: "ss3", final: "Q" }],
  ["f3", { kind: "ss3", final: "R" }],
  ["f4", { kind: "ss3", final: "S" }],
  ["f5", { kind: "tilde", code: 15 }],
  ["f6", { kind: "tilde", code: 17 }],
  ["f7", { kind: "tilde", code: 18 }],
  ["f8", { kind: "tilde", code: 19 }],
  ["f9", { kind: "tilde", code: 20 }],
  ["f10", { kind: "tilde", code: 21 }],
  ["f11", { kind: "tilde", code: 23 }],
  ["f12", { kind: "tilde", code: 24 }],
]);

/** Keys that are one control character (or a short fixed sequence). */
const PLAIN: ReadonlyMap<string, string> = new Map([
  ["enter", "\r"],
  ["escape", ESC],
  ["esc", ESC],
  ["tab", "\t"],
  ["btab", `${CSI}Z`],
  ["space", " "],
  ["bspace", "\x7f"],
]);

/** `C-` + a character that is not a letter: the control characters xterm sends for them. */
const CTRL_PUNCT: ReadonlyMap<string, string> = new Map([
  ["@", "\x00"],
  [" ", "\x00"],
  ["2", "\x00"],
  ["[", "\x1b"],
  ["\\", "\x1c"],
  ["]", "\x1d"],
  ["^", "\x1e"],
  ["_", "\x1f"],
  ["/", "\x1f"],
  ["?", "\x7f"],
]);

interface Mods {
  ctrl: boolean;
  meta: boolean;
  shift: boolean;
}

function invalidKey(key: string, index: number, why: string, hint?: string): TermadaError {
  return new TermadaError("INVALID_ARGUMENT", `Unknown key "${key}" (keys[${index}]): ${why}`, {
    hint: hint ??
      'Use a key name such as "Enter", "C-c", "M-x", "S-Up" or "F5", or {"text": …} to type it literally',
    details: { key },
  });
}

/** xterm's modifier parameter: 1 + Shift(1) + Alt(2) + Ctrl(4). */
function modParam(m: Mods): number {
  return 1 + (m.shift ? 1 : 0) + (m.meta ? 2 : 0) + (m.ctrl ? 4 : 0);
}

function special(s: Special, m: Mods, appCursor: boolean): string {
  const mod = modParam(m);
  if (s.kind === "tilde") return mod === 1 ? `${CSI}${s.code}~` : `${CSI}${s.code};${mod}~`;
  if (mod !== 1) return `${CSI}1;${mod}${s.final}`;
  if (s.kind === "ss3" || s.app && appCursor) return `${SS3}${s.final}`;
  return `${CSI}${s.final}`;
}

/** A key name with its modifiers, or undefined when `name` is literal text. */
function resolveKey(name: string, index: number, appCursor: boolean): string | undefined {
  const mods: Mods = { ctrl: false, meta: false, shift: false };
  let rest = name;
  let prefixed = false;
  // Upper-case prefixes only: "c-style" or "s-expression" stay text (tmux also takes lower case).
  while (rest.length > 2 && rest[1] === "-" && "CMS".includes(rest[0]!)) {
    const flag = rest[0] === "C" ? "ctrl" : rest[0] === "M" ? "meta" : "shift";
    if (mods[flag]) throw invalidKey(name, index, `"${rest[0]}-" appears twice`);
    mods[flag] = true;
    prefixed = true;
    rest = rest.slice(2);
  }
  const lower = rest.toLowerCase();
  const sp = SPECIAL.get(lower);
  if (sp !== undefined) return special(sp, mods, appCursor);

  const plain = PLAIN.get(lower);
  if (plain !== undefined) {
    if (!prefixed) return plain;
    const esc = mods.meta ? ESC : "";
    if (lower === "tab" && mods.shift && !mods.ctrl) return `${esc}${CSI}Z`;
    if (lower === "space" && mods.ctrl && !mods.shift) return `${esc}\x00`;
    if (lower === "bspace" && mods.ctrl && !mods.shift) return `${esc}\x08`;
    if (!mods.ctrl && !mods.shift) return `${esc}${plain}`; // M-Enter, M-Escape, M-Tab…
    throw invalidKey(
      name,
      index,
      `a terminal sends the same bytes as "${mods.meta ? "M-" : ""}${rest}"`,
      `Send "${mods.meta ? "M-" : ""}${rest}" (programs cannot tell the difference)`,
    );
  }

  if (!prefixed) return undefined; // literal text
  // One character (a code point) after the modifiers.
  const chars = [...rest];
  if (chars.length !== 1) {
    throw invalidKey(name, index, "not a key name and not a single character after the modifiers");
  }
  const ch = chars[0]!;
  if (mods.shift) {
    throw invalidKey(
      name,
      index,
      '"S-" applies to named keys only (S-Up, S-F5, S-Tab)',
      `Type the shifted character itself (for example "A" instead of "S-a")`,
    );
  }
  let out = ch;
  if (mods.ctrl) {
    const code = ch.charCodeAt(0);
    if ((code >= 0x61 && code <= 0x7a) || (code >= 0x41 && code <= 0x5a)) {
      out = String.fromCharCode(code & 0x1f);
    } else {
      const c = CTRL_PUNCT.get(ch);
      if (c === undefined) {
        throw invalidKey(
          name,
          index,
          "no control character exists for it",
          'Control keys are "C-a"…"C-z", "C-@" ("C-Space"), "C-[", "C-\\", "C-]", "C-^", "C-_", "C-?"',
        );
      }
      out = c;
    }
  }
  return mods.meta ? ESC + out : out;
}

/**
 * Text pasted the way a terminal pastes it: line ends become CR (as xterm sends them), and with
 * `bracketed` (the program enabled DEC mode 2004) the text is wrapped in `ESC [ 200 ~` …
 * `ESC [ 201 ~`. Paste markers inside the text are removed, so pasted text can never end the
 * paste early and have the rest read as typed keys.
 */
export function pasteText(text: string, bracketed: boolean): string {
  let body = text.replace(/\r\n?|\n/g, "\r");
  // Removing one marker may join two halves into another: repeat until none is left.
  while (body.includes(PASTE_START) || body.includes(PASTE_END)) {
    body = body.replaceAll(PASTE_START, "").replaceAll(PASTE_END, "");
  }
  return bracketed ? PASTE_START + body + PASTE_END : body;
}

/**
 * Encodes `keys` into the bytes to write to the terminal, in order. Throws INVALID_ARGUMENT
 * (naming the key in the message and `details.key`) for a modified key with no bytes, for more
 * than {@link MAX_KEYS} entries, an empty entry, or more than {@link MAX_KEYS_BYTES} bytes.
 */
export function encodeKeys(keys: readonly KeyInput[], modes: KeyModes = {}): Uint8Array {
  if (keys.length > MAX_KEYS) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `Cannot send ${keys.length} keys: at most ${MAX_KEYS} per call`,
      { hint: 'Split the keys over several calls, or paste long text with {"paste": …}' },
    );
  }
  const appCursor = modes.applicationCursor ?? false;
  const parts: string[] = [];
  let units = 0;
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    let s: string;
    if (typeof k === "string") {
      if (k.length === 0) throw invalidKey(k, i, "it is empty");
      s = resolveKey(k, i, appCursor) ?? k;
    } else if ("text" in k && typeof k.text === "string") {
      s = k.text;
    } else if ("paste" in k && typeof k.paste === "string") {
      s = pasteText(k.paste, modes.bracketedPaste ?? false);
    } else {
      throw new TypeError(`keys[${i}] must be a string, {text} or {paste}`);
    }
    // UTF-16 units ≤ UTF-8 bytes: stop before encoding megabytes only to refuse them.
    units += s.length;
    if (units > MAX_KEYS_BYTES) throw tooLong();
    parts.push(s);
  }
  const bytes = new TextEncoder().encode(parts.join(""));
  if (bytes.length > MAX_KEYS_BYTES) throw tooLong();
  return bytes;
}

function tooLong(): TermadaError {
  return new TermadaError(
    "INVALID_ARGUMENT",
    `Cannot send the keys: they encode to more than ${MAX_KEYS_BYTES} bytes`,
    { hint: "Split them over several calls" },
  );
}

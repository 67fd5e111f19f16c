/**
 * Turning an agent's command into one line a shell reads. Multi-word argv is quoted word by
 * word (argv-exact: no expansion, no globbing, reserved words and assignments stay plain
 * words); a single word is a shell command line the agent wrote (pipes, `&&`, `cd`, heredocs).
 */

export type ShellKind = "bash" | "zsh" | "sh";

const SAFE_WORD = /^[A-Za-z0-9_@%+:,./-]+$/;
const RESERVED = new Set([
  "!",
  "[[",
  "]]",
  "{",
  "}",
  "case",
  "coproc",
  "do",
  "done",
  "elif",
  "else",
  "esac",
  "fi",
  "for",
  "function",
  "if",
  "in",
  "select",
  "then",
  "time",
  "until",
  "while",
  "foreach",
  "repeat",
  "nocorrect",
  "noglob",
]);
// deno-lint-ignore no-control-regex
const CONTROL = /[\x00-\x1f\x7f]/;

/** True when the text holds characters a terminal line cannot carry literally. */
export function hasControlChars(s: string): boolean {
  return CONTROL.test(s);
}

/**
 * Quotes one word so every POSIX shell reads it back exactly. Words with control characters
 * need ANSI-C quoting (`$'…'`), which bash and zsh support; `allowAnsiC: false` (POSIX sh)
 * makes them a RangeError so the caller stages the command in a file instead.
 */
export function quoteWord(
  word: string,
  options: { allowAnsiC?: boolean; posix?: boolean } = {},
): string {
  if (word !== "" && SAFE_WORD.test(word)) return word;
  // POSIX single quotes keep every byte but NUL literally (newlines and \r too): the only form
  // every sh reads the same (dash has no `$'…'`).
  if (options.posix || !CONTROL.test(word)) return `'${word.replaceAll("'", `'\\''`)}'`;
  if (options.allowAnsiC === false) throw new RangeError("word has control characters");
  let out = "$'";
  for (const ch of word) {
    const c = ch.codePointAt(0)!;
    if (ch === "\\") out += "\\\\";
    else if (ch === "'") out += "\\'";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\r") out += "\\r";
    else if (c < 0x20 || c === 0x7f) out += "\\" + c.toString(8).padStart(3, "0");
    else out += ch;
  }
  return out + "'";
}

/** The argv as shell source: one word = the agent's own command line, more = quoted words. */
export function argvToScript(argv: readonly string[], options: { posix?: boolean } = {}): string {
  if (argv.length === 1) return argv[0]!;
  return quoteArgv(argv, options);
}

/**
 * Every word quoted, the first one also when it would read as a reserved word or an assignment:
 * a line that runs exactly this argv. `posix`: single quotes only (every sh reads them alike).
 */
export function quoteArgv(argv: readonly string[], options: { posix?: boolean } = {}): string {
  return argv.map((w, i) =>
    i === 0 && (RESERVED.has(w) || w.includes("="))
      ? `'${w.replaceAll("'", `'\\''`)}'`
      : quoteWord(w, options)
  ).join(" ");
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function isEnvName(name: string): boolean {
  return ENV_NAME.test(name);
}

/**
 * Wraps a script so a working directory and environment apply to this command only: it runs in
 * a subshell, so nothing leaks into the session.
 */
export function scopeScript(
  script: string,
  options: { cwd?: string; env?: Record<string, string>; posix?: boolean },
): string {
  const q = (w: string) => quoteWord(w, { posix: options.posix });
  const parts: string[] = [];
  if (options.cwd !== undefined) parts.push(`cd -- ${q(options.cwd)}`);
  for (const [k, v] of Object.entries(options.env ?? {})) {
    if (!isEnvName(k)) throw new RangeError(`Bad environment variable name "${k}"`);
    parts.push(`export ${k}=${q(v)}`);
  }
  if (parts.length === 0) return script;
  return `(${parts.join(" && ")} && eval ${q(script)})`;
}

/**
 * Programs whose arguments or input are code: shells (`bash -c PAYLOAD`, `sh` reading a here-doc),
 * interpreters (`python -c`, `node -e`, `perl -e`, …), awk and sed programs, and `find -exec`.
 * Shell payloads are parsed and checked like any command line; code in other languages cannot be
 * read, so it makes the command opaque.
 */
import { optionTable, scanOptions } from "./_wrappers.ts";
import { replaceWithHole, type ShellWord } from "./_words.ts";

export type CodeUse =
  /** Runs this shell text (`bash -c TEXT`). */
  | { kind: "script"; script: ShellWord }
  /** Reads its program from standard input. */
  | { kind: "stdin" }
  /** Runs a program file (the policy judges the command, not the file). */
  | { kind: "file"; path: ShellWord }
  /** Interactive, or nothing runs. */
  | { kind: "none" }
  | { kind: "opaque"; reason: string };

const opaque = (reason: string): CodeUse => ({ kind: "opaque", reason });

/** POSIX-family shells whose `-c` text we parse (with the bash parser). */
export const SHELLS: ReadonlySet<string> = new Set([
  "bash",
  "sh",
  "zsh",
  "dash",
  "ksh",
  "ksh93",
  "mksh",
  "lksh",
  "pdksh",
  "ash",
  "yash",
  "posh",
  "rbash",
]);

/** Shells with another language: their code is opaque. */
export const FOREIGN_SHELLS: ReadonlySet<string> = new Set([
  "fish",
  "csh",
  "tcsh",
  "pwsh",
  "powershell",
  "nu",
  "elvish",
  "xonsh",
  "rc",
  "es",
]);

const BASH_LETTERS = "abefhkmnptuvxBCEHPTilrsDc";
const BASH_LONG = new Set([
  "debug",
  "debugger",
  "dump-po-strings",
  "dump-strings",
  "help",
  "login",
  "noediting",
  "noprofile",
  "norc",
  "posix",
  "pretty-print",
  "restricted",
  "verbose",
  "version",
  "wordexp",
]);

/** How a POSIX-family shell invocation gets its commands. */
export function shellUse(shell: string, argv: readonly ShellWord[]): CodeUse {
  let command = false;
  let stdin = false;
  let i = 1;
  while (i < argv.length) {
    const w = argv[i]!;
    const s = w.literal;
    if (s === undefined) {
      return opaque(`an argument of "${shell}" is only known at run time ("${w.display}")`);
    }
    if (s === "--" || s === "-") {
      i++;
      break;
    }
    if (s.startsWith("--")) {
      const name = s.slice(2);
      if (name === "rcfile" || name === "init-file") {
        i += 2;
        continue;
      }
      // zsh takes any option name in long form (--errexit); bash has a fixed list.
      if (shell === "zsh" ? /^[a-z_-]+$/i.test(name) : BASH_LONG.has(name)) {
        i++;
        continue;
      }
      return opaque(`"${shell}" has no option "${s}" we know`);
    }
    if ((s[0] !== "-" && s[0] !== "+") || s.length < 2) break;
    let values = 0;
    for (const c of s.slice(1)) {
      if (c === "c") command = true;
      else if (c === "s") stdin = true;
      else if (c === "o" || c === "O" || ((shell === "ksh" || shell === "mksh") && c === "T")) {
        values++;
      } else if (
        shell === "bash" || shell === "rbash" ? !BASH_LETTERS.includes(c) : !/[a-zA-Z0-9]/.test(c)
      ) {
        return opaque(`"${shell}" has no option "-${c}" we know`);
      }
    }
    i += 1 + values;
  }
  const rest = argv.slice(i);
  if (command) {
    const script = rest[0];
    return script === undefined ? { kind: "none" } : { kind: "script", script };
  }
  if (stdin || rest.length === 0) return { kind: "stdin" };
  return { kind: "file", path: rest[0]! };
}

/** fish, csh, PowerShell…: a script file is a command like any other; inline code is opaque. */
export function foreignShellUse(shell: string, argv: readonly ShellWord[]): CodeUse {
  const first = argv[1];
  if (first === undefined) return { kind: "stdin" };
  if (first.literal === undefined || first.literal.startsWith("-")) {
    return opaque(`"${shell}" is another shell language; its options may carry code`);
  }
  return { kind: "file", path: first };
}

interface InterpreterSpec {
  /** Short options whose argument is program text (`-c`, `-e`). */
  code: string;
  /** Short options that take the next word (or the rest of the word) as a value. */
  value: string;
  /** Short options that take the rest of their word only (perl's `-Mmod`). */
  attached?: string;
  /** Short options followed by optional digits only (perl's `-l`, `-0777`). */
  digits?: string;
  /** Long options carrying program text. */
  codeLong?: readonly string[];
  /** Long options that take the next word as a value. */
  valueLong?: readonly string[];
  /** Short option after which the rest are the arguments of a module (`python -m`). */
  module?: string;
}

const PYTHON: InterpreterSpec = {
  code: "c",
  value: "WX",
  module: "m",
  valueLong: ["check-hash-based-pycs"],
};
const NODE: InterpreterSpec = {
  code: "ep",
  value: "rC",
  codeLong: ["eval", "print"],
  valueLong: [
    "require",
    "import",
    "loader",
    "experimental-loader",
    "conditions",
    "input-type",
    "title",
    "env-file",
  ],
};

const INTERPRETERS: [RegExp, InterpreterSpec][] = [
  [/^(python[0-9.]*|pypy[0-9.]*)$/, PYTHON],
  [/^(node|nodejs|bun)$/, NODE],
  [/^perl[0-9.]*$/, { code: "eE", value: "", attached: "IMmdDxCiF", digits: "l0" }],
  [/^ruby[0-9.]*$/, { code: "e", value: "ICrEF", digits: "0WT" }],
  [/^php[0-9.]*$/, { code: "rRBE", value: "cdzfFtS" }],
  [/^(lua[0-9.]*|luajit)$/, { code: "e", value: "l" }],
  [/^(Rscript|R)$/, { code: "e", value: "" }],
  [/^julia$/, { code: "eE", value: "JC", codeLong: ["eval", "print"] }],
  [/^(osascript|expect)$/, { code: "ec", value: "" }],
  [/^(tclsh[0-9.]*|wish|irb|jshell)$/, { code: "", value: "" }],
];

export function isInterpreter(name: string): boolean {
  return name === "deno" || INTERPRETERS.some(([re]) => re.test(name));
}

/** How an interpreter gets its program: inline code is opaque, stdin depends on the input. */
export function interpreterUse(name: string, argv: readonly ShellWord[]): CodeUse {
  if (name === "deno") return denoUse(argv);
  const spec = INTERPRETERS.find(([re]) => re.test(name))?.[1];
  if (spec === undefined) return { kind: "none" };
  const inline = opaque(`"${name}" runs program text given on its command line`);
  let i = 1;
  while (i < argv.length) {
    const w = argv[i]!;
    const s = w.literal;
    if (s === undefined) {
      return opaque(`an argument of "${name}" is only known at run time ("${w.display}")`);
    }
    if (s === "--") {
      i++;
      break;
    }
    if (s === "-") return { kind: "stdin" };
    if (!s.startsWith("-")) break;
    if (s.startsWith("--")) {
      const eq = s.indexOf("=");
      const long = s.slice(2, eq === -1 ? undefined : eq);
      if (spec.codeLong?.includes(long)) return inline;
      i += spec.valueLong?.includes(long) && eq === -1 ? 2 : 1;
      continue;
    }
    let skip = 1;
    for (let j = 1; j < s.length; j++) {
      const c = s[j]!;
      if (spec.code.includes(c)) return inline;
      if (c === spec.module) return { kind: "none" };
      if (spec.attached?.includes(c)) break;
      if (spec.digits?.includes(c)) {
        while (
          j + 1 < s.length && /[0-9a-fA-Fx]/.test(s[j + 1]!) && !spec.code.includes(s[j + 1]!)
        ) {
          j++;
        }
        continue;
      }
      if (spec.value.includes(c)) {
        if (j === s.length - 1) skip = 2;
        break;
      }
    }
    i += skip;
  }
  const script = argv[i];
  if (script === undefined) return { kind: "stdin" };
  return { kind: "file", path: script };
}

function denoUse(argv: readonly ShellWord[]): CodeUse {
  const sub = argv[1];
  if (sub === undefined) return { kind: "stdin" };
  if (sub.literal === undefined) return opaque(`the "deno" subcommand is only known at run time`);
  if (sub.literal === "eval") return opaque(`"deno eval" runs program text`);
  if (sub.literal === "repl") {
    return argv.slice(2).some((w) => w.literal === undefined || /^--eval/.test(w.literal))
      ? opaque(`"deno repl --eval" runs program text`)
      : { kind: "stdin" };
  }
  if (sub.literal === "run" && argv.slice(2).some((w) => w.literal === "-")) {
    return { kind: "stdin" };
  }
  return { kind: "none" };
}

export const AWKS: ReadonlySet<string> = new Set(["awk", "gawk", "mawk", "nawk", "original-awk"]);

const AWK = optionTable(
  "F|field-separator: v|assign: f|file: e|source: E|exec: i|include: l|load: " +
    "b|characters-as-bytes c|traditional C|copyright d|dump-variables:: D|debug:: " +
    "g|gen-pot h|help I|trace k|csv L|lint:: M|bignum N|use-lc-numeric n|non-decimal-data " +
    "o|pretty-print:: O|optimize p|profile:: P|posix r|re-interval s|no-optimize S|sandbox " +
    "t|lint-old V|version W:",
);

/**
 * The awk program text of this invocation, or a file program (`-f`). A program that can run
 * commands (`system(…)`, `print | "cmd"`, `"cmd" | getline`) or load code is opaque.
 */
export function awkUse(name: string, argv: readonly ShellWord[]): CodeUse {
  const scan = scanOptions(name, argv, 1, AWK);
  if (!scan.ok) return opaque(scan.reason);
  const texts: ShellWord[] = [];
  let file: ShellWord | undefined;
  for (const o of scan.options) {
    if (o.id === "e" && o.value) texts.push(o.value);
    if ((o.id === "f" || o.id === "E" || o.id === "i") && o.value) file = o.value;
    if (o.id === "l") return opaque(`"${name} --load" loads native code`);
  }
  if (texts.length === 0 && file === undefined) {
    const program = argv[scan.next];
    if (program === undefined) return { kind: "none" };
    texts.push(program);
  }
  for (const t of texts) {
    if (t.literal === undefined) return opaque(`the ${name} program is only known at run time`);
    const reason = awkRunsCommands(t.literal);
    if (reason) return opaque(`the ${name} program ${reason}`);
  }
  return file === undefined ? { kind: "none" } : { kind: "file", path: file };
}

function awkRunsCommands(program: string): string | undefined {
  if (/\bsystem\b/.test(program)) return `calls system()`;
  if (program.replaceAll("||", "").includes("|")) return `pipes to or from a command`;
  if (/@(load|include)\b/.test(program)) return `loads other code`;
  return undefined;
}

const SED = optionTable(
  "n|quiet|silent debug e|expression: f|file: follow-symlinks i|in-place:: l|line-length: " +
    "b|binary posix E|r|regexp-extended s|separate sandbox u|unbuffered z|null-data help version",
);

/** GNU sed's `e` command and the `e` flag of `s///` run shell commands. */
export function sedUse(argv: readonly ShellWord[]): CodeUse {
  const scan = scanOptions("sed", argv, 1, SED);
  if (!scan.ok) return opaque(scan.reason);
  const scripts: ShellWord[] = [];
  let file: ShellWord | undefined;
  for (const o of scan.options) {
    if (o.id === "e" && o.value) scripts.push(o.value);
    if (o.id === "f" && o.value) file = o.value;
    if (o.id === "sandbox") return { kind: "none" };
  }
  if (scripts.length === 0 && file === undefined) {
    const script = argv[scan.next];
    if (script === undefined) return { kind: "none" };
    scripts.push(script);
  }
  for (const s of scripts) {
    if (s.literal === undefined) return opaque(`the sed script is only known at run time`);
    if (sedRunsCommands(s.literal)) return opaque(`the sed script can run commands (e)`);
  }
  return file === undefined ? { kind: "none" } : { kind: "file", path: file };
}

/**
 * A small sed reader: addresses, then one command letter; `s` and `y` with their delimiters and
 * flags; text and file-name commands to the end of the line. Anything it cannot follow counts as
 * running commands (fail closed).
 */
export function sedRunsCommands(script: string): boolean {
  let i = 0;
  const n = script.length;
  const skipSpace = () => {
    while (i < n && /[ \t;\n]/.test(script[i]!)) i++;
  };
  /** Reads a delimited part starting after the delimiter; returns false when unclosed. */
  const delimited = (d: string): boolean => {
    while (i < n) {
      const c = script[i++]!;
      if (c === "\\") {
        i++;
        continue;
      }
      if (c === d) return true;
      if (c === "\n" && d !== "\n") return false;
    }
    return false;
  };
  const address = (): boolean => {
    if (i >= n) return true;
    const c = script[i]!;
    if (/[0-9]/.test(c)) {
      while (i < n && /[0-9~]/.test(script[i]!)) i++;
    } else if (c === "$") {
      i++;
    } else if (c === "/" || c === "\\") {
      i++;
      const d = c === "\\" ? script[i++] : "/";
      if (d === undefined || !delimited(d)) return false;
      while (i < n && /[IM]/.test(script[i]!)) i++;
    }
    return true;
  };
  while (true) {
    skipSpace();
    if (i >= n) return false;
    if (script[i] === "#") {
      while (i < n && script[i] !== "\n") i++;
      continue;
    }
    if (!address()) return true;
    if (script[i] === ",") {
      i++;
      if (script[i] === "+" || script[i] === "~") i++;
      if (!address()) return true;
    }
    while (i < n && (script[i] === " " || script[i] === "\t" || script[i] === "!")) i++;
    const cmd = script[i++];
    if (cmd === undefined) return false;
    switch (cmd) {
      case "{":
      case "}":
      case "=":
      case "d":
      case "D":
      case "g":
      case "G":
      case "h":
      case "H":
      case "l":
      case "n":
      case "N":
      case "p":
      case "P":
      case "x":
      case "z":
      case "F":
        continue;
      case "q":
      case "Q":
      case "L":
        while (i < n && /[ 0-9]/.test(script[i]!)) i++;
        continue;
      case "b":
      case "t":
      case "T":
      case ":":
        while (i < n && script[i] !== ";" && script[i] !== "\n") i++;
        continue;
      case "a":
      case "i":
      case "c":
      case "r":
      case "R":
      case "w":
      case "W":
        // Text or a file name up to the end of the line (a `\` continues the text).
        while (i < n && script[i] !== "\n") i += script[i] === "\\" ? 2 : 1;
        continue;
      case "s": {
        const d = script[i++];
        if (d === undefined || d === "\n" || d === "\\") return true;
        if (!delimited(d) || !delimited(d)) return true;
        while (i < n && /[gpiImMe0-9w]/.test(script[i]!)) {
          const f = script[i++]!;
          if (f === "e") return true;
          if (f === "w") {
            while (i < n && script[i] !== "\n") i++;
          }
        }
        continue;
      }
      case "y": {
        const d = script[i++];
        if (d === undefined || d === "\n" || d === "\\") return true;
        if (!delimited(d) || !delimited(d)) return true;
        continue;
      }
      default:
        // `e` runs a command; anything unknown is treated the same way.
        return true;
    }
  }
}

/**
 * The commands `find` runs with `-exec`/`-execdir`/`-ok`/`-okdir` (up to `;` or `{} +`); the file
 * name it passes (`{}`) is a hole.
 */
export function findExecs(argv: readonly ShellWord[]): ShellWord[][] | { reason: string } {
  const commands: ShellWord[][] = [];
  for (let i = 1; i < argv.length; i++) {
    const w = argv[i]!;
    if (w.literal === undefined) {
      if (w.splits) return { reason: `an argument of "find" may split ("${w.display}")` };
      continue;
    }
    if (!/^-(exec|execdir|ok|okdir)$/.test(w.literal)) continue;
    const inner: ShellWord[] = [];
    let j = i + 1;
    for (; j < argv.length; j++) {
      const a = argv[j]!;
      if (a.literal === ";") break;
      if (a.literal === "+" && argv[j - 1]?.literal === "{}") break;
      inner.push(replaceWithHole(a, "{}"));
    }
    if (inner.length > 0) commands.push(inner);
    i = j;
  }
  return commands;
}

/** git configuration that makes git run a command of the caller's choosing. */
const GIT_COMMAND_CONFIG = new RegExp(
  "^(alias\\.|core\\.(pager|sshcommand|editor|fsmonitor|hookspath|askpass|gitproxy)|" +
    "sequence\\.editor|diff\\.external|diff\\..*\\.(textconv|command)|credential\\.|" +
    "gpg\\.(.*\\.)?program|filter\\..*\\.(clean|smudge|process)|merge\\..*\\.driver|pager\\.|" +
    "uploadpack\\.packobjectshook|remote\\..*\\.(uploadpack|receivepack|vcs)|include\\.|" +
    "includeif\\.|protocol\\.)",
  "i",
);

/** `git -c alias.x='!cmd'`, `-c core.pager=cmd`…: configuration that runs commands is opaque. */
export function gitUse(argv: readonly ShellWord[]): CodeUse {
  for (let i = 1; i < argv.length; i++) {
    const s = argv[i]!.literal;
    if (s === undefined) {
      if (argv[i - 1]?.literal === "-c") {
        return opaque(`a "git -c" setting is only known at run time`);
      }
      continue;
    }
    if (!s.startsWith("-")) break; // the subcommand: options after it are its own
    if (s === "--config-env" || s.startsWith("--config-env=")) {
      return opaque(`"git --config-env" sets configuration from the environment`);
    }
    if (s === "--exec-path" || s.startsWith("--exec-path=")) {
      return opaque(`"git --exec-path" chooses where git finds its commands`);
    }
    if (
      s === "-c" || s === "-C" || s === "--git-dir" || s === "--work-tree" || s === "--namespace"
    ) {
      const value = argv[i + 1]?.literal;
      if (s === "-c" && (value === undefined || GIT_COMMAND_CONFIG.test(value))) {
        return opaque(`"git -c ${value ?? "…"}" can make git run a command`);
      }
      i++;
    }
  }
  return { kind: "none" };
}

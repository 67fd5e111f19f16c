/**
 * Wrappers: programs that run another program given in their arguments (`sudo`, `env`, `nice`,
 * `xargs`, …). Each has its option table, so the policy finds the inner command exactly where
 * the wrapper will: `sudo -u root -E -- rm`, `env -S "rm -rf" /`, `timeout -s KILL 5 rm`.
 * Anything the table does not know (an unknown option, an option built at run time) makes the
 * command opaque: a misread option could hide the real command.
 */
import {
  holeWord,
  literalWord,
  replaceWithHole,
  type ShellWord,
  splitEnvString,
} from "./_words.ts";

type Arity = "none" | "required" | "optional";

interface OptionSpec {
  id: string;
  arity: Arity;
}

export interface OptionTable {
  short: ReadonlyMap<string, OptionSpec>;
  long: ReadonlyMap<string, OptionSpec>;
  /** `-10` is an option (nice's old syntax). */
  numeric: boolean;
}

/**
 * Builds a table from entries like `u|user:`: names separated by `|` (one letter = short, more =
 * long), then nothing (a flag), `:` (a required argument: `-uX`, `-u X`, `--user=X`, `--user X`)
 * or `::` (an optional argument, attached only: `-iX`, `--replace=X`). The id is the first name.
 */
export function optionTable(spec: string, options: { numeric?: boolean } = {}): OptionTable {
  const short = new Map<string, OptionSpec>();
  const long = new Map<string, OptionSpec>();
  for (const entry of spec.trim().split(/\s+/)) {
    const m = /^([^:]+)(:{0,2})$/.exec(entry);
    if (!m) throw new RangeError(`Bad option entry "${entry}"`);
    const names = m[1]!.split("|");
    const arity: Arity = m[2] === ":" ? "required" : m[2] === "::" ? "optional" : "none";
    const option = { id: names[0]!, arity };
    for (const name of names) (name.length === 1 ? short : long).set(name, option);
  }
  return { short, long, numeric: options.numeric ?? false };
}

export interface ParsedOption {
  id: string;
  value: ShellWord | undefined;
}

export type OptionScan =
  | { ok: true; options: ParsedOption[]; next: number }
  | { ok: false; reason: string };

/**
 * Reads options from `argv[start]` on, stopping at `--` (consumed), `-`, or the first operand.
 * `stopAfter`: return right after this option (env -S rewrites the words after it); `once`: read
 * one option word only (programs that take options anywhere, like su).
 */
export function scanOptions(
  program: string,
  argv: readonly ShellWord[],
  start: number,
  table: OptionTable,
  options: { stopAfter?: string; once?: boolean } = {},
): OptionScan {
  const found: ParsedOption[] = [];
  const fail = (reason: string): OptionScan => ({ ok: false, reason });
  let i = start;
  while (i < argv.length) {
    const word = argv[i]!;
    const s = word.literal;
    if (s === undefined) {
      return fail(`an argument of "${program}" is only known at run time ("${word.display}")`);
    }
    if (s === "--") {
      i++;
      break;
    }
    if (!s.startsWith("-") || s === "-") break;
    if (table.numeric && /^-[0-9]+$/.test(s)) {
      found.push({ id: "#", value: literalWord(s.slice(1)) });
      i++;
      if (options.once) break;
      continue;
    }
    let stop = false;
    if (s.startsWith("--")) {
      const eq = s.indexOf("=");
      const name = eq === -1 ? s.slice(2) : s.slice(2, eq);
      const spec = longOption(table, name);
      if (spec === undefined) return fail(`"${program}" has no option "--${name}" we know`);
      let value: ShellWord | undefined;
      if (eq !== -1) {
        if (spec.arity === "none") return fail(`"${program}" option "--${name}" takes no value`);
        value = literalWord(s.slice(eq + 1));
      } else if (spec.arity === "required") {
        const next = argv[i + 1];
        if (next === undefined) return fail(`"${program}" option "--${name}" needs a value`);
        if (next.splits) {
          return fail(`the value of "${program} --${name}" may split ("${next.display}")`);
        }
        value = next;
        i++;
      }
      found.push({ id: spec.id, value });
      stop = spec.id === options.stopAfter;
    } else {
      for (let j = 1; j < s.length; j++) {
        const c = s[j]!;
        const spec = table.short.get(c);
        if (spec === undefined) return fail(`"${program}" has no option "-${c}" we know`);
        if (spec.arity === "none") {
          found.push({ id: spec.id, value: undefined });
          if (spec.id === options.stopAfter) stop = true;
          continue;
        }
        const rest = s.slice(j + 1);
        let value: ShellWord | undefined;
        if (rest !== "") {
          value = literalWord(rest);
        } else if (spec.arity === "required") {
          const next = argv[i + 1];
          if (next === undefined) return fail(`"${program}" option "-${c}" needs a value`);
          if (next.splits) {
            return fail(`the value of "${program} -${c}" may split ("${next.display}")`);
          }
          value = next;
          i++;
        }
        found.push({ id: spec.id, value });
        if (spec.id === options.stopAfter) stop = true;
        break;
      }
    }
    i++;
    if (stop || options.once) break;
  }
  return { ok: true, options: found, next: i };
}

/** An exact long name, or an unambiguous prefix of one (as getopt_long accepts). */
function longOption(table: OptionTable, name: string): OptionSpec | undefined {
  const exact = table.long.get(name);
  if (exact) return exact;
  if (name === "") return undefined;
  const specs = new Set<OptionSpec>();
  for (const [long, spec] of table.long) if (long.startsWith(name)) specs.add(spec);
  return specs.size === 1 ? [...specs][0] : undefined;
}

export type Unwrapped =
  /** The wrapper runs `argv` (with these `NAME=value` words set for it). */
  | { kind: "run"; argv: ShellWord[]; assignments: ShellWord[]; stdinClosed?: boolean }
  /** The wrapper runs these texts with a shell (`sh -c`, or a remote shell for ssh). */
  | { kind: "script"; scripts: ShellWord[] }
  /** Nothing else runs (a lookup, `--help`, no command given). */
  | { kind: "none" }
  /** Starts a shell without a command: it reads commands from its input (`sudo -s <<EOF`). */
  | { kind: "shell" }
  | { kind: "opaque"; reason: string };

const none: Unwrapped = { kind: "none" };
const shell: Unwrapped = { kind: "shell" };
const opaque = (reason: string): Unwrapped => ({ kind: "opaque", reason });
const run = (argv: ShellWord[], assignments: ShellWord[] = []): Unwrapped =>
  argv.length === 0 ? none : { kind: "run", argv, assignments };

const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;

/** `NAME=value` words (sudo and env take them before the command). */
function isAssignment(word: ShellWord): boolean {
  const first = word.pieces[0];
  return typeof first === "string" && ASSIGNMENT.test(first);
}

function takeAssignments(
  program: string,
  argv: readonly ShellWord[],
  start: number,
): { assignments: ShellWord[]; next: number } | { reason: string } {
  const assignments: ShellWord[] = [];
  let i = start;
  while (i < argv.length && isAssignment(argv[i]!)) {
    if (argv[i]!.splits) {
      return { reason: `"${program}" gets "${argv[i]!.display}", which may split into more words` };
    }
    assignments.push(argv[i++]!);
  }
  return { assignments, next: i };
}

/** A wrapper whose options are followed by `operands` fixed operands, then the command. */
function simple(
  program: string,
  table: OptionTable,
  spec: { operands?: number; noCommand?: readonly string[]; shell?: boolean } = {},
) {
  return (argv: readonly ShellWord[]): Unwrapped => {
    const scan = scanOptions(program, argv, 1, table);
    if (!scan.ok) return opaque(scan.reason);
    if (scan.options.some((o) => spec.noCommand?.includes(o.id))) return none;
    let i = scan.next;
    for (let k = 0; k < (spec.operands ?? 0); k++, i++) {
      const operand = argv[i];
      if (operand === undefined) return none;
      if (operand.splits) {
        return opaque(`an operand of "${program}" may split ("${operand.display}")`);
      }
    }
    if (i >= argv.length && spec.shell) return shell;
    return run(argv.slice(i));
  };
}

const SUDO = optionTable(
  "A|askpass b|background B|bell E H|set-home i|login K|remove-timestamp k|reset-timestamp " +
    "l|list n|non-interactive N|no-update P|preserve-groups S|stdin s|shell V|version " +
    "v|validate e|edit help preserve-env:: C|close-from: D|chdir: g|group: host: p|prompt: " +
    "R|chroot: r|role: t|type: T|command-timeout: U|other-user: u|user:",
);

function sudo(argv: readonly ShellWord[]): Unwrapped {
  const scan = scanOptions("sudo", argv, 1, SUDO);
  if (!scan.ok) return opaque(scan.reason);
  // -e edits files, -l lists, -v/-K/-V/--help do not run a command.
  if (scan.options.some((o) => ["e", "l", "v", "K", "V", "help"].includes(o.id))) return none;
  const taken = takeAssignments("sudo", argv, scan.next);
  if ("reason" in taken) return opaque(taken.reason);
  const login = scan.options.some((o) => o.id === "s" || o.id === "i");
  if (taken.next >= argv.length) return login ? shell : none;
  return run(argv.slice(taken.next), taken.assignments);
}

const DOAS = optionTable("L n s C: u:");

function doas(argv: readonly ShellWord[]): Unwrapped {
  const scan = scanOptions("doas", argv, 1, DOAS);
  if (!scan.ok) return opaque(scan.reason);
  // -C checks a config file; -L clears persisted auth; -s runs the user's shell.
  if (scan.options.some((o) => o.id === "C" || o.id === "L")) return none;
  if (scan.options.some((o) => o.id === "s")) return shell;
  return run(argv.slice(scan.next));
}

const ENV = optionTable(
  "i|ignore-environment 0|null v|debug list-signal-handling u|unset: C|chdir: " +
    "S|split-string: block-signal:: default-signal:: ignore-signal:: help version",
);

function env(argv: readonly ShellWord[]): Unwrapped {
  let words = argv.slice();
  let i = 1;
  for (let rounds = 0;; rounds++) {
    if (rounds > 64) return opaque(`"env -S" nests too deeply`);
    const scan = scanOptions("env", words, i, ENV, { stopAfter: "S" });
    if (!scan.ok) return opaque(scan.reason);
    if (scan.options.some((o) => o.id === "help" || o.id === "version")) return none;
    const split = scan.options.find((o) => o.id === "S");
    if (split === undefined) {
      i = scan.next;
      break;
    }
    const text = split.value?.literal;
    if (text === undefined) return opaque(`the "env -S" string is only known at run time`);
    const parts = splitEnvString(text);
    if (!Array.isArray(parts)) return opaque(parts.reason);
    words = [...words.slice(0, scan.next), ...parts.map(literalWord), ...words.slice(scan.next)];
    i = scan.next;
  }
  // A lone "-" is -i.
  while (words[i]?.literal === "-") i++;
  const taken = takeAssignments("env", words, i);
  if ("reason" in taken) return opaque(taken.reason);
  return run(words.slice(taken.next), taken.assignments);
}

const COMMAND = optionTable("p v V");

function command(argv: readonly ShellWord[]): Unwrapped {
  const scan = scanOptions("command", argv, 1, COMMAND);
  if (!scan.ok) return opaque(scan.reason);
  // -v / -V describe a command; they do not run it.
  if (scan.options.some((o) => o.id === "v" || o.id === "V")) return none;
  return run(argv.slice(scan.next));
}

const XARGS = optionTable(
  "0|null o|open-tty p|interactive r|no-run-if-empty t|verbose x|exit show-limits " +
    "a|arg-file: d|delimiter: E: I: L: n|max-args: P|max-procs: s|max-chars: " +
    "process-slot-var: e|eof:: i|replace:: l|max-lines:: help version",
);

function xargs(argv: readonly ShellWord[]): Unwrapped {
  const scan = scanOptions("xargs", argv, 1, XARGS);
  if (!scan.ok) return opaque(scan.reason);
  if (scan.options.some((o) => o.id === "help" || o.id === "version" || o.id === "show-limits")) {
    return none;
  }
  let replace: string | undefined;
  for (const o of scan.options) {
    if (o.id === "I") replace = o.value?.literal;
    if (o.id === "i") replace = o.value?.literal ?? "{}";
    if ((o.id === "I" || o.id === "i") && replace === undefined) {
      return opaque(`the "xargs -I" placeholder is only known at run time`);
    }
  }
  let inner = argv.slice(scan.next);
  if (inner.length === 0) inner = [literalWord("echo")];
  // The arguments xargs reads from its input are unknown: a hole (or the placeholder's places).
  inner = replace === undefined
    ? [...inner, holeWord("…", true)]
    : inner.map((w) => replaceWithHole(w, replace!));
  // xargs gives the command /dev/null as its input.
  return { kind: "run", argv: inner, assignments: [], stdinClosed: true };
}

const FLOCK = optionTable(
  "s|shared x|e|exclusive u|unlock n|nb|nonblock o|close F|no-fork verbose " +
    "E|conflict-exit-code: w|wait|timeout: h|help V|version",
);

function flock(argv: readonly ShellWord[]): Unwrapped {
  const scan = scanOptions("flock", argv, 1, FLOCK);
  if (!scan.ok) return opaque(scan.reason);
  if (scan.options.some((o) => o.id === "h" || o.id === "V")) return none;
  const file = argv[scan.next];
  if (file === undefined) return none;
  if (file.splits) return opaque(`the lock file of "flock" may split ("${file.display}")`);
  const after = argv[scan.next + 1];
  if (after === undefined) return none; // flock FD: locks a descriptor, runs nothing
  if (after.literal === "-c" || after.literal === "--command") {
    const script = argv[scan.next + 2];
    return script === undefined ? none : { kind: "script", scripts: [script] };
  }
  return run(argv.slice(scan.next + 1));
}

const WATCH = optionTable(
  "b|beep c|color C|no-color d|differences:: e|errexit g|chgexit t|no-title w|no-wrap " +
    "x|exec p|precise r|no-rerun q|equexit: n|interval: h|help v|version",
);

function watch(argv: readonly ShellWord[]): Unwrapped {
  const scan = scanOptions("watch", argv, 1, WATCH);
  if (!scan.ok) return opaque(scan.reason);
  if (scan.options.some((o) => o.id === "h" || o.id === "v")) return none;
  const rest = argv.slice(scan.next);
  if (rest.length === 0) return none;
  if (scan.options.some((o) => o.id === "x")) return run(rest);
  // Without -x, watch joins its arguments with spaces and runs them with `sh -c`.
  if (rest.some((w) => w.literal === undefined)) {
    return opaque(`the command "watch" runs is only known at run time`);
  }
  return { kind: "script", scripts: [literalWord(rest.map((w) => w.literal).join(" "))] };
}

const SU = optionTable(
  "l|login m|p|preserve-environment f|fast P|pty c|command: session-command: g|group: " +
    "G|supp-group: s|shell: w|whitelist-environment: h|help V|version",
);

/** su and runuser without -u: options anywhere; the command is `-c`; other words go to the shell. */
function su(program: string) {
  return (argv: readonly ShellWord[]): Unwrapped => {
    const operands: ShellWord[] = [];
    let script: ShellWord | undefined;
    let user: ShellWord | undefined;
    let i = 1;
    while (i < argv.length) {
      const w = argv[i]!;
      if (w.literal === "-") {
        i++;
        continue;
      }
      if (w.literal === "--") {
        operands.push(...argv.slice(i + 1));
        break;
      }
      if (w.literal === undefined || !w.literal.startsWith("-")) {
        if (w.literal === undefined && w.splits) {
          return opaque(`an argument of "${program}" may split ("${w.display}")`);
        }
        operands.push(w);
        i++;
        continue;
      }
      const scan = scanOptions(program, argv, i, SU, { once: true });
      if (!scan.ok) return opaque(scan.reason);
      for (const o of scan.options) {
        if (o.id === "h" || o.id === "V") return none;
        if (o.id === "c" || o.id === "session-command") script = o.value;
        if (o.id === "u") user = o.value;
      }
      i = scan.next;
    }
    if (program === "runuser" && user !== undefined && script === undefined) {
      return run(operands);
    }
    if (operands.length > 1) {
      return opaque(`"${program}" passes "${operands[1]!.display}" to the user's shell`);
    }
    return script === undefined ? shell : { kind: "script", scripts: [script] };
  };
}

const RUNUSER = optionTable(
  "l|login m|p|preserve-environment f|fast P|pty c|command: session-command: g|group: " +
    "G|supp-group: s|shell: w|whitelist-environment: u|user: h|help V|version",
);

function runuser(argv: readonly ShellWord[]): Unwrapped {
  // `runuser -u USER [--] COMMAND…` runs the command directly; other forms behave like su.
  const scan = scanOptions("runuser", argv, 1, RUNUSER);
  if (scan.ok && scan.options.some((o) => o.id === "u")) {
    if (scan.options.some((o) => o.id === "c" || o.id === "session-command")) {
      return su("runuser")(argv);
    }
    return run(argv.slice(scan.next));
  }
  return su("runuser")(argv);
}

const SCRIPT = optionTable(
  "a|append c|command: E|echo: e|return f|flush B|log-io: I|log-in: O|log-out: " +
    "T|log-timing: t|timing:: m|logging-format: o|output-limit: q|quiet h|help V|version",
);

function script(argv: readonly ShellWord[]): Unwrapped {
  const scan = scanOptions("script", argv, 1, SCRIPT);
  if (!scan.ok) return opaque(scan.reason);
  const command = scan.options.find((o) => o.id === "c")?.value;
  // Without -c, script runs a shell.
  return command === undefined ? shell : { kind: "script", scripts: [command] };
}

function busybox(argv: readonly ShellWord[]): Unwrapped {
  const applet = argv[1];
  if (applet === undefined) return none;
  if (applet.literal?.startsWith("-")) return none; // --list, --help, --install
  return run(argv.slice(1));
}

function builtin(argv: readonly ShellWord[]): Unwrapped {
  return run(argv.slice(1));
}

const SSH = optionTable(
  "4 6 A a C f G g K k M N n q s T t V v X x Y y B: b: c: D: E: e: F: I: i: J: L: l: m: O: o: " +
    "p: Q: R: S: W: w:",
);

/** ssh options that run a local command. */
const SSH_LOCAL_COMMAND = /^\s*(ProxyCommand|LocalCommand|KnownHostsCommand)\s*(=|\s)\s*/i;

/**
 * ssh runs its command words, joined by spaces, in the remote user's shell; `-o ProxyCommand=…`
 * and friends run a local one. Both are checked like any command line.
 */
function ssh(argv: readonly ShellWord[]): Unwrapped {
  const scan = scanOptions("ssh", argv, 1, SSH);
  if (!scan.ok) return opaque(scan.reason);
  const scripts: ShellWord[] = [];
  for (const o of scan.options) {
    if (o.id !== "o" || o.value === undefined) continue;
    if (o.value.literal === undefined) {
      return opaque(`an "ssh -o" option is only known at run time`);
    }
    const m = SSH_LOCAL_COMMAND.exec(o.value.literal);
    if (m) scripts.push(literalWord(o.value.literal.slice(m[0].length)));
  }
  const remote = argv.slice(scan.next + 1);
  if (remote.length > 0) {
    if (remote.some((w) => w.literal === undefined)) {
      return opaque(`the command "ssh" runs remotely is only known at run time`);
    }
    scripts.push(literalWord(remote.map((w) => w.literal).join(" ")));
  }
  // Without a command, the remote shell reads its commands from ssh's input.
  return scripts.length === 0 ? shell : { kind: "script", scripts };
}

const EXEC = optionTable("c l a:");
const NICE = optionTable("n|adjustment: help version", { numeric: true });
const NOHUP = optionTable("help version");
const SETSID = optionTable("c|ctty f|fork w|wait h|help V|version");
const STDBUF = optionTable("i|input: o|output: e|error: help version");
const IONICE = optionTable("c|class: n|classdata: t|ignore p|pid: P|pgid: u|uid: h|help V|version");
const TIME = optionTable(
  "p|portability v|verbose q|quiet a|append o|output: f|format: help V|version",
);
const TIMEOUT = optionTable(
  "k|kill-after: s|signal: v|verbose f|foreground p|preserve-status help version",
);
const CHROOT = optionTable("userspec: groups: skip-chdir help version");
const PKEXEC = optionTable("user: disable-internal-agent keep-cwd help version");
const UNBUFFER = optionTable("p");
const TASKSET = optionTable("a|all-tasks p|pid c|cpu-list h|help V|version");
const CHRT = optionTable(
  "a|all-tasks b|batch d|deadline f|fifo i|idle o|other r|rr R|reset-on-fork m|max p|pid " +
    "v|verbose T|sched-runtime: P|sched-period: D|sched-deadline: h|help V|version",
);

const HELP = ["help", "version", "h", "V"];

/** Every wrapper the policy looks through, by program name. */
export const WRAPPERS: ReadonlyMap<string, (argv: readonly ShellWord[]) => Unwrapped> = new Map([
  ["sudo", sudo],
  ["doas", doas],
  ["env", env],
  ["command", command],
  ["builtin", builtin],
  ["exec", simple("exec", EXEC)],
  ["nice", simple("nice", NICE, { noCommand: ["help", "version"] })],
  ["nohup", simple("nohup", NOHUP, { noCommand: ["help", "version"] })],
  ["setsid", simple("setsid", SETSID, { noCommand: HELP })],
  ["stdbuf", simple("stdbuf", STDBUF, { noCommand: ["help", "version"] })],
  ["ionice", simple("ionice", IONICE, { noCommand: ["p", "P", "u", ...HELP] })],
  ["time", simple("time", TIME, { noCommand: ["help", "V"] })],
  ["timeout", simple("timeout", TIMEOUT, { operands: 1, noCommand: ["help", "version"] })],
  [
    "chroot",
    simple("chroot", CHROOT, { operands: 1, noCommand: ["help", "version"], shell: true }),
  ],
  ["pkexec", simple("pkexec", PKEXEC, { noCommand: ["help", "version"] })],
  ["unbuffer", simple("unbuffer", UNBUFFER)],
  ["taskset", simple("taskset", TASKSET, { operands: 1, noCommand: ["p", ...HELP] })],
  ["chrt", simple("chrt", CHRT, { operands: 1, noCommand: ["p", "m", ...HELP] })],
  ["xargs", xargs],
  ["flock", flock],
  ["watch", watch],
  ["su", su("su")],
  ["runuser", runuser],
  ["script", script],
  ["busybox", busybox],
  ["ssh", ssh],
  // zsh precommand modifiers.
  ["noglob", builtin],
  ["nocorrect", builtin],
  ["-", builtin],
]);

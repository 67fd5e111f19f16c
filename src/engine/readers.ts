/**
 * Which programs run what they read: shells and interpreters, known by name and by content.
 * A line typed into one is a command for the policy (and an `input` action for budgets). The
 * name alone is not enough — a copy of bash under another name runs lines just the same — so
 * the reader's executable (`/proc/<pid>/exe`) is also compared by SHA-256 with the files those
 * names resolve to (PATH and the usual system directories), hashed once per file identity.
 */
import { basename } from "node:path";
import { fileIdentity, programDirs } from "../sandbox/mod.ts";
import { readProcFile } from "../pty/mod.ts";

/** Command names of programs that run what they read. */
export const COMMAND_READER_NAMES: RegExp =
  /^(ba|z|da|k|mk|tc|c|fi|a|)sh$|^(busybox|pwsh|python[0-9.]*|node(js)?|deno|bun|perl|ruby|irb|php|lua[0-9.]*|R|julia|ghci|psql|mysql|sqlite3|redis-cli|mongo(sh)?|ssh|su|sudo|doas|tclsh|wish|expect|gdb)$/;

/** Names looked up to learn the interpreters' content (what COMMAND_READER_NAMES spells). */
const NAMES = [
  "sh",
  "bash",
  "dash",
  "zsh",
  "ksh",
  "mksh",
  "ash",
  "tcsh",
  "csh",
  "fish",
  "busybox",
  "pwsh",
  "python",
  "python3",
  "python2",
  "node",
  "nodejs",
  "deno",
  "bun",
  "perl",
  "ruby",
  "irb",
  "php",
  "lua",
  "R",
  "julia",
  "ghci",
  "psql",
  "mysql",
  "sqlite3",
  "redis-cli",
  "mongo",
  "mongosh",
  "ssh",
  "su",
  "sudo",
  "doas",
  "tclsh",
  "wish",
  "expect",
  "gdb",
];

let known: Set<string> | undefined;

function knownInterpreters(): Set<string> {
  if (known) return known;
  known = new Set();
  const dirs = programDirs(Deno.env.get("PATH"));
  for (const name of NAMES) {
    for (const dir of dirs) {
      const id = fileIdentity(`${dir}/${name}`);
      if (id) known.add(id.sha256);
    }
  }
  return known;
}

/**
 * Script interpreters: given a script file, `-c`/`-e` code or `-m` a module on their command
 * line they run that, not what they read from the terminal (unless `-i`). Shells, ssh, su, sudo
 * and database clients are not among them: with any arguments they may still run what they read.
 */
const SCRIPT_INTERPRETERS =
  /^(python[0-9.]*|node(js)?|deno|bun|perl|ruby|php|lua[0-9.]*|R|julia|tclsh|wish|pwsh)$/;

/**
 * Whether process `pid` runs what it reads: by its command name, or by its file's content — a
 * script interpreter running a script (`python3 app.py`, a curses program) aside.
 */
export function readsCommands(pid: number, comm: string): boolean {
  const byName = COMMAND_READER_NAMES.test(comm) || COMMAND_READER_NAMES.test(basename(comm));
  if (!byName) {
    const id = fileIdentity(`/proc/${pid}/exe`);
    if (id === undefined || !knownInterpreters().has(id.sha256)) return false;
  }
  return !runsAScript(pid);
}

/** An interpreter whose command line names a script or code (and not `-i`). */
function runsAScript(pid: number): boolean {
  const argv = (readProcFile(`/proc/${pid}/cmdline`) ?? "").split("\0").filter((a) => a !== "");
  const name = basename(argv[0] ?? "");
  if (!SCRIPT_INTERPRETERS.test(name)) return false;
  const args = argv.slice(1);
  if (args.includes("-i")) return false;
  return args.some((a) => !a.startsWith("-") || a === "-c" || a === "-e" || a === "-m");
}

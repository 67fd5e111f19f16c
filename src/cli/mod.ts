/**
 * Command-line entry points. `main(args)` dispatches a small command table and returns the exit
 * code; only mod.ts turns it into the process exit status. Errors print as one line on stderr.
 */
import { TermadaError, toTermadaError } from "../shared/mod.ts";
import type { OperatorContext } from "./operator.ts";

export const VERSION = "0.1.0";

const HELP = `termada ${VERSION} — a runtime between AI agents and terminals

Usage:
  termada serve [--bind 127.0.0.1:7717] [--config FILE]
      Start the daemon in the foreground (Ctrl-C stops it). State: ~/.local/state/termada
      (or $TERMADA_HOME); config: ~/.config/termada/config.yaml (optional).
  termada serve --stdio [--agent ID | --token TOKEN]
      MCP over stdio for an agent (Claude Code, Codex, …); starts the daemon when needed.
  termada run [--shell bash|zsh|sh] [--cwd DIR] [--timeout MS] [--background] -- COMMAND [ARGS…]
      Run one command in a fresh terminal session and print the structured result (JSON).
      One word is a shell command line ("ls | wc -l"); more words are passed exactly.
  termada status [--json] | termada daemon stop
      The running daemon at a glance (sessions, active jobs, approvals, kill switch, audit
      health, exec gate); stop it gracefully and wait until it is gone.
  termada sessions [--json] | jobs [--all] [-f] [--json]
      Every agent's terminal sessions and jobs (-f re-lists as jobs start and end).
  termada logs JOB [-f] | termada kill JOB [--grace-ms MS]
      A job's output (-f follows it until it ends); stop one job of any agent.
  termada pending | approve ID [--reason TEXT] [--ticket ID]
  termada deny ID [--reason TEXT] [--ticket ID]
      The approval queue: commands the policy sent to an operator.
  termada reconcile [ACTION --succeeded|--failed --note TEXT] | termada policy reload
      Actions whose outcome is unknown (a restart mid-action), settled by an operator; and
      applying an edited config's policies, agents and identity settings without a restart.
  termada stop [--barrier-ms MS] [--grace-ms MS] | termada resume
      Kill switch: refuse new commands for a while and stop every running job.
  termada audit [-n N] [--json] | audit verify [--anchors] | audit anchor | audit resume
      The tamper-evident audit log; verify checks the whole hash chain (works offline);
      resume reopens a log that stopped after a write fault, once the chain verifies.
  termada mission list [--status S] | show ID | report ID [--json] [--out FILE] | cancel ID
      Missions of every agent: plan, runtime-verified steps, the evidence report (its hash is
      recorded in the audit log), or cancel one.
  termada servers [list] | add NAME --host H --user U [--port P] [--tag T]...
  termada servers rm NAME | forget NAME | forwards
      The server inventory (config file and live), host keys, and every open port forward.
  termada plugins [--json] | adapters [--limit N] [--json]
      The config's MCP plugins (state, restarts, tools); the adapters offered and every
      agent's adapter runs (phase, summary, error).
  termada vault init [--identity FILE] | set NAME [--kind K] | [list] | rm NAME | reset --yes
  termada unlock [--identity FILE | --passphrase-file FILE] | termada lock
      The age-encrypted vault (<state>/vault.age): values agents use by reference and never
      see. Values come from stdin or a hidden prompt, never from the command line.
  termada replay SESSION [--speed X] [--max-idle S]
  termada export SESSION [--out FILE|-] [--force] [--json]
      A session's recording (live or closed): played in this terminal with its timing (q
      stops), or saved as one asciicast v2 file for asciinema play and the web player.
  termada dashboard [--open]
      Print (or open) the tokenized URL of the live dashboard.
  termada top
      A live full-screen view: sessions, jobs, approvals, activity; keys to kill, approve,
      deny and stop all (a plain listing when stdout is not a terminal).
  termada snapshot create DIR | list | show ID | restore ID [--delete-extra] | rm ID
      Content-addressed copies of a directory; restore is atomic per file and undoable.
  termada setup [--dry-run] | doctor | service install|uninstall|status
      Add Termada to Claude Code, Codex and Cursor; check this machine (PTY, exec gate,
      cgroups, state permissions, config, port, audit chain…); run the daemon as a user service.
  termada update [--check] [--version V] [--force] [--require-signature]
      Replace this binary with a verified newer release (SHA-256, Ed25519 when signed);
      refuses while jobs run unless --force (docs/INSTALL.md).
  termada version
  termada help | termada COMMAND --help

Exit codes: 0 ok, 1 failure (the daemon refused or is not running), 2 usage error.
`;

const OUT: OperatorContext = { out: (t) => write(Deno.stdout, t) };

// Each command loads only its own modules: `serve --stdio` (started once per agent session)
// must not pay for the daemon's.
const operator = () => import("./operator.ts");
const ops = () => import("./ops.ts");
const extensions = () => import("./extensions.ts");
const COMMANDS: Record<string, (args: string[]) => Promise<number>> = {
  run: async (a) => (await import("./run.ts")).runCommand(a),
  status: async (a) => (await ops()).statusCommand(a, OUT),
  jobs: async (a) => (await ops()).jobsCommand(a, OUT),
  sessions: async (a) => (await ops()).sessionsCommand(a, OUT),
  logs: async (a) => (await ops()).logsCommand(a, OUT),
  kill: async (a) => (await ops()).killCommand(a, OUT),
  daemon: async (a) => (await ops()).daemonCommand(a, OUT),
  pending: async (a) => (await operator()).pendingCommand(a, OUT),
  approve: async (a) => (await operator()).approveCommand(a, OUT),
  deny: async (a) => (await operator()).denyCommand(a, OUT),
  stop: async (a) => (await operator()).stopCommand(a, OUT),
  resume: async (a) => (await operator()).resumeCommand(a, OUT),
  audit: async (a) => (await operator()).auditCommand(a, OUT),
  dashboard: async (a) => (await operator()).dashboardCommand(a, OUT),
  mission: async (a) => (await operator()).missionCommand(a, OUT),
  reconcile: async (a) => (await operator()).reconcileCommand(a, OUT),
  policy: async (a) => (await operator()).policyCommand(a, OUT),
  servers: async (a) => (await import("./servers.ts")).serversCommand(a, OUT),
  plugins: async (a) => (await extensions()).pluginsCommand(a, OUT),
  adapters: async (a) => (await extensions()).adaptersCommand(a, OUT),
  vault: async (a) => (await import("./vault.ts")).vaultCommand(a, OUT),
  unlock: async (a) => (await import("./vault.ts")).unlockCommand(a, OUT),
  lock: async (a) => (await import("./vault.ts")).lockCommand(a, OUT),
  top: async (a) => (await import("./top.ts")).topCommand(a, OUT),
  setup: async (a) => (await import("./setup.ts")).setupCommand(a, OUT),
  doctor: async (a) => (await import("./doctor.ts")).doctorCommand(a, OUT),
  service: async (a) => (await import("./service.ts")).serviceCommand(a, OUT),
  update: async (a) => (await import("./update.ts")).updateCommand(a, OUT),
  snapshot: async (a) => (await import("./snapshot.ts")).snapshotCommand(a, OUT),
  replay: async (a) => (await import("./replay.ts")).replayCommand(a, OUT),
  export: async (a) => (await import("./replay.ts")).exportCommand(a, OUT),
  serve: async (args) =>
    (await import("./serve.ts")).serveCommand(args, {
      version: VERSION,
      print: (t) => void write(Deno.stderr, t),
    }),
  version: async (a) => {
    const { strictArgs } = await import("./_args.ts");
    const { values } = strictArgs("version", a, {
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    }, 0);
    if (values.help) {
      await write(Deno.stdout, "Usage: termada version [--json]\nThis program's version.\n");
      return 0;
    }
    await write(
      Deno.stdout,
      values.json ? JSON.stringify({ version: VERSION }) + "\n" : `termada ${VERSION}\n`,
    );
    return 0;
  },
  help: async () => {
    await write(Deno.stdout, HELP);
    return 0;
  },
};

/** Every command `termada` knows (the tests hold each to --help and strict flags). */
export const COMMAND_NAMES: readonly string[] = Object.keys(COMMANDS);

async function write(to: { write(p: Uint8Array): Promise<number> }, text: string): Promise<void> {
  const bytes = new TextEncoder().encode(text);
  let off = 0;
  while (off < bytes.length) off += await to.write(bytes.subarray(off));
}

/** Runs the CLI; resolves with the process exit code. */
export async function main(args: string[]): Promise<number> {
  const [name = "help", ...rest] = args;
  const command = COMMANDS[name === "--help" || name === "-h" ? "help" : name];
  if (!command) {
    await write(Deno.stderr, `termada: unknown command "${name}"\n\n${HELP}`);
    return 2;
  }
  try {
    return await command(rest);
  } catch (err) {
    const e = err instanceof TermadaError ? err : toTermadaError(err);
    const hint = e.hint ? `\n  hint: ${e.hint}` : "";
    await write(Deno.stderr, `termada: ${e.code}: ${e.message}${hint}\n`);
    return e.code === "INVALID_ARGUMENT" ? 2 : 1;
  }
}

/**
 * `termada service install | uninstall | status`: runs the daemon (`termada serve`) as a user
 * service that starts at login and restarts after a crash. Linux: a systemd user unit
 * (`~/.config/systemd/user/termada.service`), enabled with `systemctl --user` when a user
 * manager answers, else the exact commands are printed. macOS: a LaunchAgent
 * (`~/Library/LaunchAgents/dev.termada.plist`) and the `launchctl` command to load it. The
 * program started is the one `termada setup` writes for agents (setup.ts `resolveLaunch`).
 */
import { isAbsolute, join } from "node:path";
import { daemonAlive } from "../client/mod.ts";
import { TermadaError } from "../shared/mod.ts";
import { strictArgs, subcommand } from "./_args.ts";
import { type OperatorContext, paths } from "./operator.ts";
import {
  type Env,
  findOnPath,
  type Launch,
  readIfExists,
  resolveLaunch,
  tildify,
  writeAtomic,
} from "./setup.ts";

export const UNIT_NAME = "termada.service";
export const LAUNCHD_LABEL = "dev.termada";
/** How long one `systemctl --user` call may take. */
const SYSTEMCTL_TIMEOUT_MS = 3000;

export type Platform = "linux" | "darwin";

/** Values the service file takes from the environment it is installed from. */
export interface UnitInputs {
  launch: Launch;
  env: Env;
  /** The state directory (the LaunchAgent's log goes there). */
  stateDir: string;
}

/** A word of ExecStart: quoted when needed; `%` and `$` escaped (systemd expands them). */
function execWord(word: string): string {
  const escaped = word.replaceAll("%", "%%").replaceAll("$", "$$$$");
  return /^[A-Za-z0-9_@%+=:,./$-]+$/.test(escaped)
    ? escaped
    : `"${escaped.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}

/** `Environment="NAME=value"` (specifiers expanded there too, `$` not). */
function envLine(name: string, value: string): string {
  const v = `${name}=${value}`.replaceAll("%", "%%").replaceAll("\\", "\\\\").replaceAll(
    '"',
    '\\"',
  );
  return `Environment="${v}"`;
}

/** The environment the service passes on: TERMADA_HOME when set, DENO_DIR for a source run. */
function serviceEnv(i: UnitInputs): [string, string][] {
  const out: [string, string][] = [];
  if (i.env.TERMADA_HOME) out.push(["TERMADA_HOME", i.env.TERMADA_HOME]);
  if (i.launch.source === "source" && i.env.DENO_DIR) out.push(["DENO_DIR", i.env.DENO_DIR]);
  return out;
}

/** The systemd user unit `install` writes. */
export function systemdUnit(i: UnitInputs): string {
  return [
    "# Written by termada service install; termada service status compares it.",
    "[Unit]",
    "Description=Termada daemon (a runtime between AI agents and terminals)",
    "",
    "[Service]",
    "Type=simple",
    `ExecStart=${[i.launch.command, ...i.launch.args].map(execWord).join(" ")}`,
    "Restart=on-failure",
    "RestartSec=2s",
    // SIGTERM to the daemon alone: it stops its sessions itself (audited, gracefully) before
    // systemd signals what is left.
    "KillMode=mixed",
    "TimeoutStopSec=30s",
    // The daemon makes a cgroup per session below its own.
    "Delegate=yes",
    // No NoNewPrivileges: the service behaves like `termada serve` by hand (sessions behind the
    // exec gate get no_new_privs from seccomp anyway; without the gate, sudo keeps working).
    "StandardOutput=journal",
    "StandardError=journal",
    ...serviceEnv(i).map(([k, v]) => envLine(k, v)),
    "",
    "[Install]",
    "WantedBy=default.target",
    "",
  ].join("\n");
}

const xml = (s: string) =>
  s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll(
    '"',
    "&quot;",
  );

/** The LaunchAgent `install` writes on macOS. */
export function launchdPlist(i: UnitInputs): string {
  const env = serviceEnv(i);
  const str = (s: string) => `<string>${xml(s)}</string>`;
  const log = join(i.stateDir, "launchd.log");
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" ' +
    '"http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
    '<plist version="1.0">',
    "<dict>",
    `  <key>Label</key>${str(LAUNCHD_LABEL)}`,
    "  <key>ProgramArguments</key>",
    "  <array>",
    ...[i.launch.command, ...i.launch.args].map((a) => `    ${str(a)}`),
    "  </array>",
    "  <key>RunAtLoad</key><true/>",
    // Restarted when it fails, not after `termada daemon stop` (a clean exit).
    "  <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>",
    `  <key>StandardOutPath</key>${str(log)}`,
    `  <key>StandardErrorPath</key>${str(log)}`,
    ...(env.length === 0 ? [] : [
      "  <key>EnvironmentVariables</key>",
      "  <dict>",
      ...env.map(([k, v]) => `    <key>${xml(k)}</key>${str(v)}`),
      "  </dict>",
    ]),
    "</dict>",
    "</plist>",
    "",
  ].join("\n");
}

/** `systemctl --user`, injectable for tests. */
export interface Systemctl {
  /** Whether a user manager answers; `reason` says why not. */
  available(): Promise<{ ok: true } | { ok: false; reason: string }>;
  run(args: string[]): Promise<{ code: number; out: string }>;
}

export function systemctlFor(env: Env): Systemctl {
  const bin = findOnPath("systemctl", env);
  const run = async (args: string[]) => {
    if (!bin) return { code: 127, out: "systemctl is not installed" };
    try {
      const r = await new Deno.Command(bin, {
        args: ["--user", ...args],
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(SYSTEMCTL_TIMEOUT_MS),
      }).output();
      const dec = new TextDecoder();
      return { code: r.code, out: (dec.decode(r.stdout) + dec.decode(r.stderr)).trim() };
    } catch (err) {
      return { code: 1, out: `systemctl --user ${args.join(" ")}: ${(err as Error).message}` };
    }
  };
  return {
    async available() {
      if (!bin) return { ok: false, reason: "systemctl is not installed" };
      const r = await run(["show-environment"]);
      return r.code === 0
        ? { ok: true }
        : { ok: false, reason: r.out.split("\n")[0] || `exit code ${r.code}` };
    },
    run,
  };
}

export interface ServiceContext {
  platform: Platform;
  home: string;
  env: Env;
  uid: number;
  inputs: UnitInputs;
  systemctl: Systemctl;
}

/** Where the service file lives. */
export function serviceFile(c: Pick<ServiceContext, "platform" | "home" | "env">): string {
  if (c.platform === "darwin") {
    return join(c.home, "Library", "LaunchAgents", `${LAUNCHD_LABEL}.plist`);
  }
  const xdg = c.env.XDG_CONFIG_HOME;
  const config = xdg && isAbsolute(xdg) ? xdg : join(c.home, ".config");
  return join(config, "systemd", "user", UNIT_NAME);
}

function expected(c: ServiceContext): string {
  return c.platform === "darwin" ? launchdPlist(c.inputs) : systemdUnit(c.inputs);
}

export interface ServiceReport {
  platform: Platform;
  file: string;
  /** What happened to the file (install/uninstall) or its state (status). */
  file_action:
    | "written"
    | "unchanged"
    | "would write"
    | "removed"
    | "would remove"
    | "absent";
  installed: boolean;
  /** The file says what install would write now. */
  current: boolean;
  /** systemctl --user calls made, with their outcome. */
  ran: { command: string; code: number; out: string }[];
  /** Commands left to the operator (no user manager here, macOS, or --dry-run). */
  todo: string[];
  /** Why the commands were not run, when they were not. */
  warning?: string;
  /** `systemctl --user is-active termada.service`, when it could be asked. */
  active?: string;
  /** The text written (or that would be). */
  text?: string;
  ok: boolean;
}

const sc = (args: string) => `systemctl --user ${args}`;

async function runAll(
  c: ServiceContext,
  steps: string[][],
  report: ServiceReport,
  dryRun: boolean,
): Promise<void> {
  const commands = steps.map((s) => sc(s.join(" ")));
  if (c.platform === "darwin") {
    report.todo.push(...commands);
    return;
  }
  if (dryRun) {
    report.todo.push(...commands);
    return;
  }
  const avail = await c.systemctl.available();
  if (!avail.ok) {
    report.warning = `systemctl --user is not available (${avail.reason})`;
    report.todo.push(...commands);
    return;
  }
  for (const s of steps) {
    const r = await c.systemctl.run(s);
    report.ran.push({ command: sc(s.join(" ")), code: r.code, out: r.out });
    if (r.code !== 0) {
      report.ok = false;
      return;
    }
  }
}

/** Writes the service file (if it differs) and enables it. */
export async function install(c: ServiceContext, dryRun = false): Promise<ServiceReport> {
  const file = serviceFile(c);
  const text = expected(c);
  const same = readIfExists(file) === text;
  const report: ServiceReport = {
    platform: c.platform,
    file,
    file_action: dryRun ? (same ? "unchanged" : "would write") : same ? "unchanged" : "written",
    installed: same || !dryRun,
    current: same || !dryRun,
    ran: [],
    todo: [],
    text,
    ok: true,
  };
  if (!same && !dryRun) await writeAtomic(file, text, 0o644);
  if (c.platform === "darwin") {
    report.todo.push(`launchctl bootstrap gui/${c.uid} ${file}`);
    return report;
  }
  await runAll(c, [["daemon-reload"], ["enable", "--now", UNIT_NAME]], report, dryRun);
  return report;
}

/** Stops and disables the service where possible and removes its file; idempotent. */
export async function uninstall(c: ServiceContext, dryRun = false): Promise<ServiceReport> {
  const file = serviceFile(c);
  const present = readIfExists(file) !== undefined;
  const report: ServiceReport = {
    platform: c.platform,
    file,
    file_action: present ? (dryRun ? "would remove" : "removed") : "absent",
    installed: present && dryRun,
    current: false,
    ran: [],
    todo: [],
    ok: true,
  };
  if (!present) return report;
  if (c.platform === "darwin") {
    report.todo.push(`launchctl bootout gui/${c.uid}/${LAUNCHD_LABEL}`);
  } else await runAll(c, [["disable", "--now", UNIT_NAME]], report, dryRun);
  if (dryRun) return report;
  await Deno.remove(file);
  if (c.platform === "linux") {
    // The link `enable` makes, when systemctl could not be asked to remove it.
    const wants = join(file, "..", "default.target.wants", UNIT_NAME);
    try {
      if (Deno.readLinkSync(wants) === file) Deno.removeSync(wants);
    } catch {
      // no such link
    }
    if (report.warning === undefined && report.ok) {
      await runAll(c, [["daemon-reload"]], report, false);
    }
  }
  return report;
}

/** Whether the service is installed, current, and (with a user manager) active. */
export async function status(c: ServiceContext): Promise<ServiceReport> {
  const file = serviceFile(c);
  const text = readIfExists(file);
  const report: ServiceReport = {
    platform: c.platform,
    file,
    file_action: text === undefined ? "absent" : "unchanged",
    installed: text !== undefined,
    current: text === expected(c),
    ran: [],
    todo: [],
    ok: text !== undefined && text === expected(c),
  };
  if (c.platform === "linux") {
    const avail = await c.systemctl.available();
    if (avail.ok) {
      const r = await c.systemctl.run(["is-active", UNIT_NAME]);
      report.active = r.out.split("\n")[0] || (r.code === 0 ? "active" : "inactive");
      if (report.installed && report.active !== "active") report.ok = false;
    } else report.warning = `systemctl --user is not available (${avail.reason})`;
  }
  return report;
}

/** The human-readable lines of a report. */
export function formatReport(
  sub: "install" | "uninstall" | "status",
  r: ServiceReport,
  home: string,
  dryRun: boolean,
): string {
  const where = tildify(r.file, home);
  const lines: string[] = [];
  if (sub === "status") {
    lines.push(
      r.installed
        ? `installed: ${where} (${
          r.current ? "up to date" : "differs from what install writes: termada service install"
        })`
        : `not installed (no ${where}): termada service install`,
    );
    if (r.active !== undefined) lines.push(`${UNIT_NAME}: ${r.active}`);
  } else {
    const verb = {
      written: "wrote",
      unchanged: "unchanged:",
      "would write": "would write",
      removed: "removed",
      "would remove": "would remove",
      absent: "not installed: nothing to remove at",
    }[r.file_action];
    lines.push(`${verb} ${where}`);
    if (dryRun && r.text !== undefined) lines.push("", r.text.trimEnd(), "");
  }
  for (const x of r.ran) {
    lines.push(
      `${x.code === 0 ? "ran" : "FAILED"} ${x.command}${x.code === 0 ? "" : `: ${x.out}`}`,
    );
  }
  if (r.warning !== undefined) {
    lines.push(
      `WARN  ${r.warning}` + (r.todo.length > 0 ? "; run these in your login session:" : ""),
    );
  } else if (r.todo.length > 0) lines.push(dryRun ? "would run:" : "run:");
  for (const t of r.todo) lines.push(`  ${t}`);
  return lines.join("\n") + "\n";
}

const USAGE = "Usage: termada service install | uninstall | status [--command PATH] " +
  "[--dry-run] [--json]\n" +
  "Runs the daemon as a user service: a systemd user unit (~/.config/systemd/user/\n" +
  "termada.service, enabled with systemctl --user when a user manager runs, else the commands\n" +
  "are printed) or on macOS a LaunchAgent (~/Library/LaunchAgents/dev.termada.plist).\n" +
  "uninstall stops and removes it (nothing to do is fine); status says whether it is\n" +
  "installed, matches what install writes now, and is active (exit 1 when not).\n" +
  "--dry-run prints the file and the commands without changing anything.\n";

export async function serviceCommand(args: string[], ctx: OperatorContext): Promise<number> {
  type Sub = "install" | "uninstall" | "status";
  const subs: Record<Sub, 1> = { install: 1, uninstall: 1, status: 1 };
  const picked = subcommand<Sub>("service", args, subs, "status");
  const { values } = strictArgs("service", picked?.rest ?? [], {
    command: { type: "string" },
    "dry-run": { type: "boolean" },
    json: { type: "boolean" },
    help: { type: "boolean" },
  }, 0);
  if (picked === undefined || values.help) {
    await ctx.out(USAGE);
    return 0;
  }
  const platform = Deno.build.os;
  if (platform !== "linux" && platform !== "darwin") {
    throw new TermadaError("NOT_SUPPORTED", `termada service does not support ${platform}`);
  }
  const env = Deno.env.toObject();
  const home = env.HOME;
  if (!home || !isAbsolute(home)) {
    throw new TermadaError("INVALID_ARGUMENT", "Cannot find the user's service directory", {
      hint: "Set HOME to an absolute path",
    });
  }
  const p = await paths();
  const launch = resolveLaunch(["serve"], { command: values.command, env });
  const c: ServiceContext = {
    platform,
    home,
    env,
    uid: Deno.uid() ?? 0,
    inputs: { launch, env, stateDir: p.stateDir },
    systemctl: systemctlFor(env),
  };
  const dryRun = values["dry-run"] === true;
  // A daemon running before the service starts holds the state's lock: the service's daemon
  // would fail (and be restarted) until that one stops.
  const before = picked.sub === "install" && !dryRun && await daemonAlive(p.socketPath);
  const report = picked.sub === "install"
    ? await install(c, dryRun)
    : picked.sub === "uninstall"
    ? await uninstall(c, dryRun)
    : await status(c);
  let note = "";
  if (before) {
    note = "note: a daemon already runs here; if it is not the service's, stop it " +
      "(termada daemon stop) so the service can take over\n";
  }
  if (values.json) {
    // The file's text only where it is the point (--dry-run).
    await ctx.out(
      JSON.stringify({ ...report, text: dryRun ? report.text : undefined }, null, 2) + "\n",
    );
  } else await ctx.out(formatReport(picked.sub, report, home, dryRun) + note);
  return report.ok ? 0 : 1;
}

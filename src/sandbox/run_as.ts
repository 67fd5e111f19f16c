/**
 * `security.run_as`, daemon side: who the configured user is (from /etc/passwd and /etc/group,
 * read as files: no NSS, so what the daemon resolves is what those files say), whether this
 * daemon may become it (root, or the capabilities the launcher needs), and the `setpriv` prefix
 * used when no launcher runs. The drop itself happens in the launcher (drop.ts).
 */
import { sys } from "../../ffi/mod.ts";
import { readProcFile } from "../pty/mod.ts";
import { TermadaError } from "../shared/mod.ts";

/** `security.run_as` as configured: names or numeric ids. */
export interface RunAsSpec {
  user: string;
  group?: string;
}

/** The resolved user sessions run as (what the launcher and `setpriv` are given). */
export interface RunAsUser {
  user: string;
  uid: number;
  gid: number;
  /** The group's name (its number when /etc/group has none). */
  group: string;
  home: string;
  shell: string;
  /** Group the session terminal is given (mode 0620): `tty`, else the user's group. */
  ttyGid: number;
}

export interface PasswdEntry {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
}

export interface GroupEntry {
  name: string;
  gid: number;
}

/** The files the user is resolved from (injectable for tests). */
export interface AccountFiles {
  passwd: string;
  group: string;
}

/** Where `setpriv` (util-linux) is expected when no launcher runs. */
export const SETPRIV = "/usr/bin/setpriv";

const ID = /^(0|[1-9][0-9]{0,9})$/;

function id(text: string | undefined): number | undefined {
  if (text === undefined || !ID.test(text)) return undefined;
  const n = Number(text);
  return n <= 0xfffffffe ? n : undefined;
}

/** `name:x:uid:gid:gecos:home:shell` lines; malformed ones are skipped. */
export function parsePasswd(text: string): PasswdEntry[] {
  const out: PasswdEntry[] = [];
  for (const line of text.split("\n")) {
    const f = line.split(":");
    if (f.length < 7 || f[0] === "" || line.startsWith("#")) continue;
    const uid = id(f[2]);
    const gid = id(f[3]);
    if (uid === undefined || gid === undefined) continue;
    out.push({ name: f[0]!, uid, gid, home: f[5]!, shell: f[6]!.trim() });
  }
  return out;
}

/** `name:x:gid:members` lines; malformed ones are skipped. */
export function parseGroup(text: string): GroupEntry[] {
  const out: GroupEntry[] = [];
  for (const line of text.split("\n")) {
    const f = line.split(":");
    if (f.length < 3 || f[0] === "" || line.startsWith("#")) continue;
    const gid = id(f[2]);
    if (gid !== undefined) out.push({ name: f[0]!, gid });
  }
  return out;
}

/** Reads /etc/passwd and /etc/group (Deno's file API: they are ordinary files). */
export function readAccountFiles(): AccountFiles {
  return {
    passwd: Deno.readTextFileSync("/etc/passwd"),
    group: Deno.readTextFileSync("/etc/group"),
  };
}

function configError(where: string, key: string, text: string, hint: string): TermadaError {
  return new TermadaError("INVALID_ARGUMENT", `${where}: security.run_as.${key}: ${text}`, {
    hint,
    details: { key: `security.run_as.${key}` },
  });
}

/**
 * The user `spec` names, or a config error naming the field. Refused: a user or group missing
 * from the files, root (uid 0 or gid 0), and the daemon's own uid — sessions as the daemon's
 * user are what run_as exists to avoid, so a config that asks for it is a mistake, not a no-op.
 */
export function resolveRunAs(
  spec: RunAsSpec,
  files: AccountFiles,
  options: { daemonUid: number; where?: string },
): RunAsUser {
  const where = options.where ?? "Config";
  const users = parsePasswd(files.passwd);
  const groups = parseGroup(files.group);
  const byUid = id(spec.user);
  const entry = byUid === undefined
    ? users.find((u) => u.name === spec.user)
    : users.find((u) => u.uid === byUid);
  if (!entry) {
    throw configError(
      where,
      "user",
      byUid === undefined
        ? `no user "${spec.user}" in /etc/passwd`
        : `no user with uid ${byUid} in /etc/passwd`,
      "Create the user first (useradd --create-home NAME), or name an existing one",
    );
  }
  let gid = entry.gid;
  let group = groups.find((g) => g.gid === gid)?.name ?? String(gid);
  if (spec.group !== undefined) {
    const byGid = id(spec.group);
    const g = byGid === undefined
      ? groups.find((x) => x.name === spec.group)
      : groups.find((x) => x.gid === byGid) ?? { name: String(byGid), gid: byGid };
    if (!g) {
      throw configError(
        where,
        "group",
        `no group "${spec.group}" in /etc/group`,
        "Name an existing group, or leave `group` out for the user's own primary group",
      );
    }
    gid = g.gid;
    group = g.name;
  }
  if (entry.uid === 0) {
    throw configError(
      where,
      "user",
      `"${spec.user}" is root (uid 0): sessions must run as an unprivileged user`,
      "Create a user for the sessions (useradd --create-home termada-agent)",
    );
  }
  if (gid === 0) {
    throw configError(
      where,
      spec.group === undefined ? "user" : "group",
      `the group is root's (gid 0): sessions must run with an unprivileged group`,
      "Name another group, or give the user a primary group of its own",
    );
  }
  if (entry.uid === options.daemonUid) {
    throw configError(
      where,
      "user",
      `"${spec.user}" is the daemon's own user (uid ${entry.uid}): sessions would reach its ` +
        "tokens, vault and audit log",
      "Name another user than the one the daemon runs as, or remove security.run_as",
    );
  }
  const tty = groups.find((g) => g.name === "tty")?.gid;
  return {
    user: entry.name,
    uid: entry.uid,
    gid,
    group,
    home: entry.home || "/",
    shell: entry.shell || "/bin/sh",
    ttyGid: tty ?? gid,
  };
}

/**
 * Capabilities a daemon needs for run_as (bit numbers): CHOWN (scratch files and the terminal
 * are handed to the user), DAC_OVERRIDE (the daemon still writes and removes them), KILL
 * (signals to the user's processes), SETGID and SETUID (the drop), SYS_PTRACE (the exec gate
 * and the input watcher read the processes' /proc files, and take the filter's listener).
 */
const NEEDED: readonly [number, string][] = [
  [0, "CAP_CHOWN"],
  [1, "CAP_DAC_OVERRIDE"],
  [5, "CAP_KILL"],
  [6, "CAP_SETGID"],
  [7, "CAP_SETUID"],
  [19, "CAP_SYS_PTRACE"],
];
/** What the launcher itself uses (it is a new program: it inherits only ambient ones). */
const LAUNCHER_NEEDS = new Set(["CAP_CHOWN", "CAP_SETGID", "CAP_SETUID"]);

function capWord(status: string, name: string): bigint {
  const m = new RegExp(`^${name}:\\s*([0-9a-fA-F]+)\\s*$`, "m").exec(status);
  return m ? BigInt(`0x${m[1]}`) : 0n;
}

/**
 * Why this daemon cannot become the run_as user, or undefined when it can. `status` is the text
 * of /proc/self/status; `euid` the daemon's effective uid.
 */
export function runAsPrivilegeProblem(status: string, euid: number): string | undefined {
  const eff = capWord(status, "CapEff");
  const amb = capWord(status, "CapAmb");
  const has = (set: bigint, bit: number) => (set & (1n << BigInt(bit))) !== 0n;
  const missing = NEEDED.filter(([bit]) => !has(eff, bit)).map(([, n]) => n);
  // A root daemon's launcher is root too; another's gets only the ambient set across exec.
  const notAmbient = euid === 0
    ? []
    : NEEDED.filter(([bit, n]) => LAUNCHER_NEEDS.has(n) && !has(amb, bit)).map(([, n]) => n);
  if (missing.length === 0 && notAmbient.length === 0) return undefined;
  const all = NEEDED.map(([, n]) => n).join(", ");
  const parts = [
    ...(missing.length ? [`lacks ${missing.join(", ")}`] : []),
    ...(notAmbient.length
      ? [`does not hold ${notAmbient.join(", ")} as ambient capabilities`]
      : []),
  ];
  return `security.run_as needs the daemon to be root with its capabilities, or to hold ${all} ` +
    `(CAP_CHOWN, CAP_SETGID and CAP_SETUID also as ambient capabilities, for its launcher); ` +
    `this daemon (uid ${euid}) ${parts.join(" and ")}`;
}

/** The startup check: throws a clear error when this daemon cannot become the user. */
export function assertCanRunAs(user: RunAsUser, euid: number): void {
  const status = readProcFile("/proc/self/status");
  const problem = status === undefined
    ? "security.run_as: cannot read /proc/self/status to check the daemon's capabilities"
    : runAsPrivilegeProblem(status, euid);
  if (problem !== undefined) {
    throw new TermadaError("NOT_SUPPORTED", `Cannot run sessions as "${user.user}": ${problem}`, {
      hint: "Start the daemon as root, with no capability taken away (sessions still run as " +
        "the run_as user), or remove security.run_as from the config",
    });
  }
}

/**
 * The daemon's start: resolves `spec` from /etc/passwd and /etc/group and checks that this
 * daemon may become that user. Throws a config error (unknown user or group, root, the daemon's
 * own user) or NOT_SUPPORTED (not root, capabilities missing), each saying what is needed.
 */
export function runAsForDaemon(spec: RunAsSpec, options: { where?: string } = {}): RunAsUser {
  const euid = sys().geteuid();
  let files: AccountFiles;
  try {
    files = readAccountFiles();
  } catch (err) {
    throw new TermadaError(
      "NOT_SUPPORTED",
      `Cannot resolve security.run_as: /etc/passwd or /etc/group is unreadable`,
      { cause: err },
    );
  }
  const user = resolveRunAs(spec, files, { daemonUid: euid, ...options });
  assertCanRunAs(user, euid);
  return user;
}

/**
 * `setpriv` in front of `argv` (when no launcher runs): real and effective ids of the user,
 * supplementary groups cleared, no inheritable or ambient capability left.
 */
export function setprivArgv(user: RunAsUser, argv: readonly string[]): string[] {
  return [
    SETPRIV,
    `--reuid=${user.uid}`,
    `--regid=${user.gid}`,
    "--clear-groups",
    "--inh-caps=-all",
    "--ambient-caps=-all",
    "--",
    ...argv,
  ];
}

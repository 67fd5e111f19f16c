/**
 * `termada doctor`: checks that this machine can run Termada well, one line per check
 * (`OK|WARN|FAIL  <check>  <detail>`, a `fix:` line under each WARN/FAIL): PTYs, shells, the
 * session boundary (exec gate, Landlock, cgroups, hiding the control plane), configured
 * servers' sshd, state and token permissions, the config file, the TCP port, the audit chain,
 * the clock and whether a daemon runs. A check never throws: an expected failure is a line,
 * an unexpected one too (FAIL with its message), and each has a deadline.
 *
 * The boundary is what a daemon detects, never a second implementation of it: the running
 * daemon's `GET /api/status`, else that of a short-lived probe daemon in a temp home (the CLI
 * may not import the sandbox, see tests/architecture_test.ts).
 */
import { join } from "node:path";
import { verifyAudit } from "../audit/mod.ts";
import { daemonAlive } from "../client/mod.ts";
import {
  type Config,
  effectivePaths,
  loadConfig,
  parseBind,
  resolvePaths,
  type TermadaPaths,
} from "../config/mod.ts";
import { type Logger, TermadaError } from "../shared/mod.ts";
import type { Boundary, DaemonStatus } from "../wire/mod.ts";
import { check as checkFd, checkRc, LINUX, sys } from "../../ffi/mod.ts";
import { strictArgs } from "./_args.ts";
import { VERSION } from "./mod.ts";
import { call, type OperatorContext } from "./operator.ts";
import { selfCommand } from "./serve.ts";
import { type Env, findOnPath, statIfExists } from "./setup.ts";

export type CheckStatus = "OK" | "WARN" | "FAIL";

export interface CheckResult {
  check: string;
  status: CheckStatus;
  detail: string;
  /** What to do about a WARN or FAIL. */
  fix?: string;
  ms: number;
}

/** Each check's deadline. */
export const CHECK_TIMEOUT_MS = 3000;
/**
 * The probe daemon's: starting one takes about 1 s from source (measured here), more on a busy
 * machine; it replaces the boundary checks' own deadlines.
 */
export const PROBE_TIMEOUT_MS = 6000;
/** The default TCP port a daemon prefers (config `server.bind` unset). */
export const PREFERRED_PORT = 7717;

/** Where the boundary report came from. */
export interface BoundaryProbe {
  boundary: Boundary;
  source: string;
}

export interface RunningDaemon {
  pid: number;
  version: string;
  port?: number;
}

/** Everything a check asks the machine, injectable for tests. */
export interface Probes {
  /** Opens a PTY and closes it again; returns its slave's name. */
  openPty(): string;
  which(name: string): string | undefined;
  /** `major.minor` of a shell (bash or zsh), or undefined when it does not run. */
  shellVersion(path: string, kind: "bash" | "zsh"): Promise<string | undefined>;
  /** The running daemon, when one answers on the socket. */
  daemon(p: TermadaPaths): Promise<RunningDaemon | undefined>;
  boundary(p: TermadaPaths, running: RunningDaemon | undefined): Promise<BoundaryProbe>;
  /** The first line a TCP server sends (an sshd's banner). */
  banner(host: string, port: number, ms: number): Promise<string>;
  /** Whether 127.0.0.1-style `host:port` can be bound now. */
  portFree(host: string, port: number): boolean;
  /** Wall clock (ms since the epoch) and a monotonic one (ms). */
  now(): number;
  monotonic(): number;
  sleep(ms: number): Promise<void>;
  uid(): number | null;
}

export interface DoctorInputs {
  env: Env;
  /** `--config`. */
  configFile?: string;
  probes: Probes;
}

// ---- the probes this machine answers ----------------------------------------------------------

function openPty(): string {
  const flags = LINUX.O_RDWR | LINUX.O_NOCTTY | LINUX.O_CLOEXEC;
  const libc = sys();
  const fd = checkFd(libc.posix_openpt(flags), "posix_openpt");
  try {
    checkFd(libc.grantpt(fd), "grantpt");
    checkFd(libc.unlockpt(fd), "unlockpt");
    const buf = new Uint8Array(128);
    checkRc(libc.ptsname_r(fd, buf, BigInt(buf.length)), "ptsname_r");
    return new TextDecoder().decode(buf.subarray(0, buf.indexOf(0)));
  } finally {
    libc.close(fd);
  }
}

async function output(
  program: string,
  args: string[],
  options: { env?: Record<string, string>; ms: number },
): Promise<{ code: number; stdout: string; stderr: string }> {
  const r = await new Deno.Command(program, {
    args,
    env: options.env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(options.ms),
  }).output();
  const dec = new TextDecoder();
  return { code: r.code, stdout: dec.decode(r.stdout), stderr: dec.decode(r.stderr) };
}

async function shellVersion(path: string, kind: "bash" | "zsh"): Promise<string | undefined> {
  const args = kind === "bash"
    ? ["--noprofile", "--norc", "-c", 'echo "${BASH_VERSINFO[0]}.${BASH_VERSINFO[1]}"']
    : ["-f", "-c", 'echo "$ZSH_VERSION"'];
  try {
    const r = await output(path, args, { ms: CHECK_TIMEOUT_MS });
    const v = r.stdout.trim();
    return r.code === 0 && /^\d+\.\d+/.test(v) ? v : undefined;
  } catch {
    return undefined; // it does not run
  }
}

async function runningDaemon(p: TermadaPaths): Promise<RunningDaemon | undefined> {
  if (!(await daemonAlive(p.socketPath))) return undefined;
  const s = await call(p, "GET", "/status") as unknown as DaemonStatus;
  return { pid: s.pid, version: s.version, port: s.port };
}

/**
 * The boundary a daemon detects here: the running one's, else a probe daemon's, started from
 * this same program in a temp home on a free port and stopped again.
 */
async function probeBoundary(
  p: TermadaPaths,
  running: RunningDaemon | undefined,
): Promise<BoundaryProbe> {
  if (running) {
    const s = await call(p, "GET", "/status") as unknown as DaemonStatus;
    return { boundary: s.boundary, source: `the running daemon (pid ${running.pid})` };
  }
  const home = await Deno.makeTempDir({ prefix: "termada-doctor-" });
  const probe = resolvePaths({ env: {}, home });
  const self = selfCommand(["serve", "--bind", "127.0.0.1:0"]);
  const env = Object.fromEntries(
    Object.entries(Deno.env.toObject()).filter(([k]) => !k.startsWith("TERMADA_")),
  );
  const child = new Deno.Command(self.program, {
    args: self.args,
    env: { ...env, TERMADA_HOME: home },
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let err = "";
  const pump = (async () => {
    const dec = new TextDecoder();
    for await (const chunk of child.stderr) err += dec.decode(chunk, { stream: true });
  })();
  let exited = false;
  const status = child.status.then((s) => {
    exited = true;
    return s;
  });
  try {
    const deadline = Date.now() + PROBE_TIMEOUT_MS;
    while (!(await daemonAlive(probe.socketPath))) {
      if (exited) {
        throw new Error(`a daemon cannot start here: ${lastLine(err) || "it exited"}`);
      }
      if (Date.now() > deadline) {
        throw new Error(`a probe daemon did not start within ${PROBE_TIMEOUT_MS / 1000} s`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const s = await call(probe, "GET", "/status") as unknown as DaemonStatus;
    return { boundary: s.boundary, source: "a probe daemon" };
  } finally {
    if (!exited) child.kill("SIGTERM");
    // Its last log line comes after the shutdown's work (lock released, cgroups removed); the
    // process itself may take seconds more to exit, which doctor need not wait for.
    const deadline = Date.now() + 5000;
    while (!exited && !/daemon stopped/.test(err) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    if (!exited) child.kill("SIGKILL");
    await status;
    await pump;
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
}

function lastLine(text: string): string {
  return text.trim().split("\n").filter((l) => l.trim() !== "").at(-1) ?? "";
}

async function banner(host: string, port: number, ms: number): Promise<string> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms / 1000} s`)), ms);
  });
  const connecting = Deno.connect({ hostname: host, port });
  let conn: Deno.TcpConn | undefined;
  try {
    conn = await Promise.race([connecting, timeout]);
    const buf = new Uint8Array(256);
    let got = "";
    while (!got.includes("\n") && got.length < 255) {
      const n = await Promise.race([conn.read(buf), timeout]);
      if (n === null) break;
      got += new TextDecoder().decode(buf.subarray(0, n));
    }
    return got.split(/\r?\n/)[0]!;
  } finally {
    clearTimeout(timer);
    if (conn) conn.close();
    // A connect still pending at the deadline: closed when it completes.
    else connecting.then((c) => c.close(), () => {});
  }
}

function portFree(hostname: string, port: number): boolean {
  try {
    Deno.listen({ hostname, port }).close();
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.AddrInUse) return false;
    throw err;
  }
}

export function machineProbes(): Probes {
  return {
    openPty,
    which: (name) => findOnPath(name, Deno.env.toObject()),
    shellVersion,
    daemon: runningDaemon,
    boundary: probeBoundary,
    banner,
    portFree,
    now: () => Date.now(),
    monotonic: () => performance.now(),
    sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
    uid: () => Deno.uid(),
  };
}

// ---- the checks --------------------------------------------------------------------------------

type Verdict = Omit<CheckResult, "ms">;

const ok = (check: string, detail: string): Verdict => ({ check, status: "OK", detail });
const warn = (check: string, detail: string, fix: string): Verdict => ({
  check,
  status: "WARN",
  detail,
  fix,
});
const fail = (check: string, detail: string, fix: string): Verdict => ({
  check,
  status: "FAIL",
  detail,
  fix,
});

const message = (err: unknown) => err instanceof Error ? err.message : String(err);

/** Runs one check within `ms`; a throw or the deadline becomes its line. */
async function timed(
  check: string,
  ms: number,
  run: () => Verdict | Verdict[] | Promise<Verdict | Verdict[]>,
  onError: (err: unknown) => Verdict = (err) =>
    fail(check, `the check failed: ${message(err)}`, "Report this with the output of doctor"),
): Promise<CheckResult[]> {
  const started = performance.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let v: Verdict | Verdict[];
  try {
    v = await Promise.race([
      Promise.resolve().then(run),
      new Promise<Verdict>((resolve) => {
        timer = setTimeout(
          () =>
            resolve(
              warn(check, `no answer within ${ms / 1000} s`, "Run termada doctor again"),
            ),
          ms,
        );
      }),
    ]);
  } catch (err) {
    v = onError(err);
  } finally {
    clearTimeout(timer);
  }
  const elapsed = Math.round(performance.now() - started);
  return (Array.isArray(v) ? v : [v]).map((x) => ({ ...x, ms: elapsed }));
}

/** State directory: private (0700) and ours. The daemon tightens a loose mode at start. */
export function checkStateDir(
  dir: string,
  st: Deno.FileInfo | undefined,
  uid: number | null,
): Verdict {
  const name = "state dir";
  if (!st) return ok(name, `${dir} not created yet (the daemon creates it 0700)`);
  if (!st.isDirectory) {
    return fail(name, `${dir} is not a directory`, `Move it aside; the daemon creates ${dir}`);
  }
  if (uid !== null && st.uid !== uid) {
    return fail(
      name,
      `${dir} is owned by uid ${st.uid}, not ${uid}`,
      `sudo chown ${uid} ${dir}, or set TERMADA_HOME to a directory of yours`,
    );
  }
  const mode = (st.mode ?? 0) & 0o777;
  if (mode !== 0o700) {
    return warn(
      name,
      `${dir} has mode 0${mode.toString(8)}, not 0700` +
        ((mode & 0o077) !== 0 ? ": other users may read the daemon's state" : ""),
      `chmod 700 ${dir} (the daemon also does at its next start)`,
    );
  }
  return ok(name, `${dir} (0700, yours)`);
}

/** The operator token: readable by this user only. */
export function checkToken(
  file: string,
  st: Deno.FileInfo | undefined,
  uid: number | null,
): Verdict {
  const name = "token";
  if (!st) return ok(name, `${file} not created yet (the daemon writes it 0600)`);
  const mode = (st.mode ?? 0) & 0o777;
  if (uid !== null && st.uid !== uid) {
    return fail(name, `${file} is owned by uid ${st.uid}, not ${uid}`, `sudo chown ${uid} ${file}`);
  }
  if ((mode & 0o077) !== 0) {
    return fail(
      name,
      `${file} has mode 0${mode.toString(8)}: other users can read the operator token`,
      `chmod 600 ${file}, then restart the daemon to get a new token (termada daemon stop)`,
    );
  }
  return ok(name, `${file} (0${mode.toString(8)})`);
}

/** A shell sessions may use: bash ≥ 4.4 (PS0), zsh any version (precmd). */
export function checkShell(
  kind: "bash" | "zsh",
  path: string | undefined,
  version: string | undefined,
  required: boolean,
): Verdict {
  const install = `Install ${kind} (e.g. apt-get install ${kind}, brew install ${kind})`;
  if (!path || !version) {
    const what = path ? `${path} does not run` : `${kind} is not on PATH`;
    if (!required) return ok(kind, `${what} (optional: sessions can use it once installed)`);
    return fail(kind, `${what}; sessions start ${kind} by default`, install);
  }
  const [major = 0, minor = 0] = version.split(".").map(Number);
  if (kind === "bash" && (major < 4 || (major === 4 && minor < 4))) {
    return fail(
      kind,
      `bash ${version} at ${path}: the shell integration needs bash ≥ 4.4 (PS0)`,
      install,
    );
  }
  return ok(kind, `${kind} ${version} at ${path}`);
}

/** The boundary features, from a daemon's report, seen against the configured mode. */
export function checkBoundary(
  b: Boundary,
  source: string,
  mode: Config["security"]["exec_gate"],
): Verdict[] {
  const from = `(from ${source})`;
  const out: Verdict[] = [];
  const gate = b.exec_gate;
  if (mode === "off") {
    out.push(
      warn(
        "exec gate",
        "security.exec_gate is off in the config: commands are not checked at exec",
        "Set security.exec_gate: auto (the default) in the config",
      ),
    );
  } else if (gate.active) {
    out.push(ok("exec gate", `seccomp user notification works ${from}`));
  } else {
    const fix = "Linux ≥ 5.9 with seccomp (CONFIG_SECCOMP_FILTER); not inside a container " +
      "that blocks seccomp(2)";
    out.push(
      mode === "required"
        ? fail(
          "exec gate",
          `unavailable: ${gate.reason} — security.exec_gate: required refuses sessions`,
          fix,
        )
        : warn("exec gate", `unavailable: ${gate.reason}; sessions run without it ${from}`, fix),
    );
  }
  out.push(
    b.landlock.active ? ok("landlock", `ABI ${b.landlock.abi} ${from}`) : warn(
      "landlock",
      `unavailable: ${b.landlock.reason} ${from}`,
      "Linux ≥ 5.13 with landlock in the lsm= boot parameter (CONFIG_LSM)",
    ),
  );
  out.push(
    b.cgroup.active ? ok("cgroups", `cgroup v2, delegated and writable ${from}`) : warn(
      "cgroups",
      `unavailable: ${b.cgroup.reason}; kill ends process trees instead ${from}`,
      "Run the daemon as a user service with a delegated cgroup (termada service install)",
    ),
  );
  out.push(
    b.hiding.active
      ? ok("hiding", `the control plane is out of sessions' reach (${b.hiding.how}) ${from}`)
      : warn(
        "hiding",
        `the control plane is reachable from sessions: ${b.hiding.reason} ${from}`,
        "Needs Landlock (or a root daemon with mount namespaces)",
      ),
  );
  out.push(
    b.terminals.active
      ? ok("terminals", `each session has a devpts instance of its own ${from}`)
      : warn(
        "terminals",
        `sessions share the host's terminals: ${b.terminals.reason} ${from}`,
        "A root daemon (security.run_as for the sessions' user) gives each session its own",
      ),
  );
  return out;
}

/** The TCP port a daemon will listen on: free, or ours. */
export function checkPort(
  bind: string | null,
  free: (host: string, port: number) => boolean,
  daemonPort: number | undefined,
): Verdict {
  const name = "port";
  const b = bind === null
    ? { hostname: "127.0.0.1", port: PREFERRED_PORT }
    : parseBind(bind) ?? { hostname: "127.0.0.1", port: -1 };
  if (b.port < 0) {
    return fail(name, `server.bind "${bind}" is not a loopback HOST:PORT`, "Fix server.bind");
  }
  if (b.port === 0) return ok(name, "server.bind asks for any free port");
  const at = `${b.hostname}:${b.port}`;
  if (daemonPort === b.port) return ok(name, `${at} is served by this Termada daemon`);
  if (free(b.hostname, b.port)) return ok(name, `${at} is free`);
  if (bind === null) {
    return warn(
      name,
      `${at} is used by another program: the daemon will listen on a free port instead`,
      "Clients find the port in the daemon's info file; to pin one, set server.bind",
    );
  }
  return fail(
    name,
    `${at} (server.bind) is used by another program: the daemon will not start`,
    "Stop that program or set server.bind to another port (port 0 = any free port)",
  );
}

/** The audit chain, verified offline. */
export function checkAudit(auditDir: string): Verdict {
  const name = "audit";
  let r: ReturnType<typeof verifyAudit>;
  try {
    r = verifyAudit(auditDir);
  } catch (err) {
    if (err instanceof TermadaError && err.code === "NOT_FOUND") {
      return ok(name, `no audit log yet (${auditDir})`);
    }
    throw err;
  }
  if (!r.ok) {
    const b = r.firstBroken!;
    return fail(
      name,
      `chain BROKEN at seq ${b.seq ?? "-"} (${b.segment} line ${b.line}): ${b.reason}`,
      "termada audit verify shows it; keep the directory for inspection and move the damaged " +
        "segment aside to start a new chain",
    );
  }
  return ok(
    name,
    `${r.records} records verified in ${r.segments} segment(s)` +
      (r.tornTail ? `; a torn last line (${r.tornTail.bytes} bytes) will be cut at start` : ""),
  );
}

/** Wall clock: a sane year, and moving with the monotonic clock. */
export function checkClock(wall: [number, number], mono: [number, number]): Verdict {
  const name = "clock";
  const year = new Date(wall[1]).getUTCFullYear();
  if (year < 2024) {
    return fail(
      name,
      `the system clock says ${new Date(wall[1]).toISOString()}`,
      "Set the clock (timedatectl set-ntp true): audit records and tokens carry times",
    );
  }
  const drift = Math.abs((wall[1] - wall[0]) - (mono[1] - mono[0]));
  if (drift > 1000) {
    return warn(
      name,
      `the wall clock moved ${Math.round(drift)} ms apart from the monotonic clock`,
      "Check time synchronisation (timedatectl status)",
    );
  }
  return ok(name, new Date(wall[1]).toISOString());
}

/** One line per configured server: its sshd answers with an SSH banner. */
async function checkServers(
  servers: Config["servers"],
  probes: Probes,
): Promise<CheckResult[]> {
  if (servers.length === 0) {
    return [{ check: "servers", status: "OK", detail: "none configured", ms: 0 }];
  }
  const lines = await Promise.all(
    servers.map((s) =>
      timed(`server ${s.name}`, CHECK_TIMEOUT_MS + 500, async () => {
        const at = `${s.user}@${s.host}:${s.port}`;
        try {
          const line = await probes.banner(s.host, s.port, CHECK_TIMEOUT_MS);
          return line.startsWith("SSH-") ? ok(`server ${s.name}`, `${at} ${line}`) : fail(
            `server ${s.name}`,
            `${at} answered but not as sshd: ${JSON.stringify(line.slice(0, 60))}`,
            "Check the host and port in the config's servers entry",
          );
        } catch (err) {
          return fail(
            `server ${s.name}`,
            `${at} unreachable: ${message(err)}`,
            "Check that sshd runs there and the host and port are right (termada servers)",
          );
        }
      })
    ),
  );
  return lines.flat();
}

/** Every check, in the order they are shown. Never throws. */
export async function runDoctor(inputs: DoctorInputs): Promise<CheckResult[]> {
  const { env, probes } = inputs;
  const results: Promise<CheckResult[]>[] = [];
  // Config first: everything else reads it (the defaults when it is broken).
  const warnings: string[] = [];
  const quiet: Logger = {
    debug() {},
    info() {},
    warn: (m) => void warnings.push(m),
    error: (m) => void warnings.push(m),
  };
  let config: Config | undefined;
  let p: TermadaPaths | undefined;
  const configLine = await timed("config", CHECK_TIMEOUT_MS, async () => {
    const base = resolvePaths({ env, home: env.TERMADA_HOME, configFile: inputs.configFile });
    p = base;
    const loaded = await loadConfig(base.configFile, env, {
      required: inputs.configFile !== undefined,
      logger: quiet,
    });
    config = loaded.config;
    p = effectivePaths(base, loaded.config);
    if (loaded.source === "defaults") {
      return ok("config", `no ${base.configFile}: the embedded defaults apply`);
    }
    const summary = `${base.configFile} is valid (${loaded.config.servers.length} server(s))`;
    return warnings.length > 0
      ? warn("config", `${summary}; ${warnings.join("; ")}`, "See the warning above")
      : ok("config", summary);
  }, (err) =>
    fail(
      "config",
      message(err),
      "Fix the file (termada serve refuses to start with it); docs/CONFIG.md",
    ));
  if (p === undefined) {
    return configLine; // HOME itself is unusable: nothing else can be found
  }
  const paths: TermadaPaths = p;
  const cfg = config;
  results.push(Promise.resolve(configLine));

  // Asked once: the daemon line, the boundary and the port all depend on it.
  const known = probes.daemon(paths).then(
    (d) => ({ d, err: undefined }),
    (err: unknown) => ({ d: undefined, err }),
  );
  const daemon = timed("daemon", CHECK_TIMEOUT_MS, async () => {
    const { d, err } = await known;
    if (err !== undefined) {
      return warn(
        "daemon",
        `a daemon answers but its status could not be read: ${message(err)}`,
        "Run termada status to see why",
      );
    }
    if (!d) {
      return ok("daemon", "not running (agents start it on demand; termada serve runs it)");
    }
    if (d.version !== VERSION) {
      return warn(
        "daemon",
        `running (pid ${d.pid}) version ${d.version}, this termada is ${VERSION}`,
        "Restart it to run this version: termada daemon stop",
      );
    }
    return ok("daemon", `running (pid ${d.pid}, version ${d.version}, port ${d.port ?? "none"})`);
  });

  results.push(timed("pty", CHECK_TIMEOUT_MS, () => {
    try {
      return ok("pty", `${probes.openPty()} opened and closed`);
    } catch (err) {
      return fail(
        "pty",
        `cannot open a PTY: ${message(err)}`,
        "Mount devpts (/dev/pts) and check /dev/ptmx; in a container, allocate PTYs",
      );
    }
  }));
  const shell = cfg?.sessions.shell ?? "bash";
  for (const kind of ["bash", "zsh"] as const) {
    results.push(timed(kind, CHECK_TIMEOUT_MS, async () => {
      const path = probes.which(kind);
      const version = path ? await probes.shellVersion(path, kind) : undefined;
      return checkShell(kind, path, version, shell === kind);
    }));
  }
  results.push(timed("boundary", PROBE_TIMEOUT_MS + 6000, async () => {
    const probe = await probes.boundary(paths, (await known).d);
    return checkBoundary(probe.boundary, probe.source, cfg?.security.exec_gate ?? "auto");
  }, (err) =>
    warn(
      "boundary",
      `not checked: ${message(err)}`,
      "termada serve in a terminal shows why a daemon cannot start",
    )));
  results.push(checkServers(cfg?.servers ?? [], probes));
  results.push(
    timed(
      "state dir",
      CHECK_TIMEOUT_MS,
      () => checkStateDir(paths.stateDir, statIfExists(paths.stateDir), probes.uid()),
    ),
  );
  results.push(
    timed(
      "token",
      CHECK_TIMEOUT_MS,
      () => checkToken(paths.tokenFile, statIfExists(paths.tokenFile), probes.uid()),
    ),
  );
  results.push(timed("port", CHECK_TIMEOUT_MS, async () => {
    return checkPort(cfg?.server.bind ?? null, probes.portFree, (await known).d?.port);
  }));
  results.push(timed("audit", CHECK_TIMEOUT_MS, () => checkAudit(join(paths.stateDir, "audit"))));
  results.push(timed("clock", CHECK_TIMEOUT_MS, async () => {
    const w0 = probes.now();
    const m0 = probes.monotonic();
    await probes.sleep(100);
    return checkClock([w0, probes.now()], [m0, probes.monotonic()]);
  }));
  results.push(daemon);
  return (await Promise.all(results)).flat();
}

/** The lines `termada doctor` prints. */
export function formatChecks(results: CheckResult[], ms: number): string {
  const width = Math.max(...results.map((r) => r.check.length));
  const lines = results.flatMap((r) => [
    `${r.status.padEnd(4)}  ${r.check.padEnd(width)}  ${r.detail}`,
    ...(r.fix && r.status !== "OK" ? [`${"".padEnd(6 + width)}  fix: ${r.fix}`] : []),
  ]);
  const count = (s: CheckStatus) => results.filter((r) => r.status === s).length;
  lines.push(
    `${count("OK")} ok, ${count("WARN")} warning(s), ${count("FAIL")} failure(s) in ${ms} ms`,
  );
  return lines.join("\n") + "\n";
}

const USAGE = "Usage: termada doctor [--config FILE] [--json]\n" +
  "Checks this machine for Termada: PTYs, bash/zsh, the session boundary (exec gate,\n" +
  "Landlock, cgroups, hiding), configured servers' sshd, state and token permissions, the\n" +
  "config, the TCP port, the audit chain, the clock, the daemon. One line per check:\n" +
  "OK | WARN | FAIL, with a fix for the last two. Exit code 1 when any check FAILs.\n" +
  "Without a running daemon, a probe daemon (temp home, free port) reports the boundary.\n";

export async function doctorCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values } = strictArgs("doctor", args, {
    config: { type: "string" },
    json: { type: "boolean" },
    help: { type: "boolean" },
  }, 0);
  if (values.help) {
    await ctx.out(USAGE);
    return 0;
  }
  const started = performance.now();
  const results = await runDoctor({
    env: Deno.env.toObject(),
    configFile: values.config,
    probes: machineProbes(),
  });
  const ms = Math.round(performance.now() - started);
  const failed = results.some((r) => r.status === "FAIL");
  if (values.json) {
    await ctx.out(JSON.stringify({ ok: !failed, ms, checks: results }, null, 2) + "\n");
  } else await ctx.out(formatChecks(results, ms));
  return failed ? 1 : 0;
}

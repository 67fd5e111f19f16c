/**
 * Where Termada keeps its files. Pure path arithmetic from the environment (XDG base directories,
 * `TERMADA_HOME`, `--config`), plus `ensurePrivateDir` for the directories the daemon creates.
 * Nothing here reads the config file itself.
 */
import { createHash } from "node:crypto";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { invalidArgument, logger, TermadaError } from "../shared/mod.ts";

export interface TermadaPaths {
  /** The YAML config file (may not exist: then the embedded defaults apply). */
  configFile: string;
  /** Private state directory (0700): everything below lives here unless noted. */
  stateDir: string;
  /** Unix socket of the daemon (HTTP); outside `stateDir` when that path would be too long. */
  socketPath: string;
  /** The daemon's MCP socket (newline-delimited JSON-RPC: the stdio shim, `termada run`). */
  mcpSocketPath: string;
  /** Lock file that guarantees a single daemon. */
  lockPath: string;
  /** SQLite database. */
  dbPath: string;
  /** Daemon log when it runs detached. */
  logPath: string;
  /** Asciicast recordings of sessions. */
  recordingsDir: string;
  /** Job output spooled to disk. */
  spoolDir: string;
  /** Per-session scratch: rc files, staged commands. */
  runtimeDir: string;
  /** Dashboard / CLI token. */
  tokenFile: string;
  /** What the running daemon bound (pid, socket, TCP port), for clients. */
  infoFile: string;
}

export interface ResolvePathsOptions {
  /** Usually `Deno.env.toObject()`; injected so tests never touch the real home. */
  env: Record<string, string | undefined>;
  /** One directory for everything (config and state); wins over `TERMADA_HOME` in `env`. */
  home?: string;
  /** `--config`: overrides only the config file. */
  configFile?: string;
}

/** `sun_path` is 108 bytes on Linux, including the terminating NUL. */
export const MAX_SOCKET_PATH_BYTES = 107;

const log = logger("config");
const encoder = new TextEncoder();

function byteLength(s: string): number {
  return encoder.encode(s).length;
}

/** An XDG variable counts only when it is set to an absolute path (the spec says to ignore others). */
function xdgDir(env: Record<string, string | undefined>, name: string): string | undefined {
  const value = env[name];
  return value && isAbsolute(value) ? value : undefined;
}

function userHome(env: Record<string, string | undefined>, needed: string): string {
  const home = env.HOME;
  if (!home || !isAbsolute(home)) {
    throw invalidArgument(
      `Cannot find the ${needed} directory: HOME is not set to an absolute path`,
      "Set HOME, or TERMADA_HOME to keep all of Termada's files in one directory",
    );
  }
  return home;
}

/** Short stable name for a state dir, so two homes never share a fallback socket. */
function shortHash(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 12);
}

/**
 * The socket normally sits in the state dir. When that path exceeds the kernel limit, it moves to
 * `$XDG_RUNTIME_DIR/termada-<hash>.sock` (a private per-user dir by spec), else to
 * `/tmp/termada-<uid>-<hash>/termada.sock`: a directory of its own, which the daemon makes 0700
 * and refuses if another user owns it, so nobody else can squat the socket path.
 */
function socketPathFor(
  stateDir: string,
  env: Record<string, string | undefined>,
  name = "termada",
): string {
  const normal = join(stateDir, `${name}.sock`);
  if (byteLength(normal) <= MAX_SOCKET_PATH_BYTES) return normal;
  const hash = shortHash(stateDir);
  const runtime = xdgDir(env, "XDG_RUNTIME_DIR");
  if (runtime) {
    const candidate = join(runtime, `${name}-${hash}.sock`);
    if (byteLength(candidate) <= MAX_SOCKET_PATH_BYTES) return candidate;
  }
  // Only here do we need the uid (and the `sys` permission that reads it).
  const uid = Deno.uid() ?? 0;
  return join("/tmp", `termada-${uid}-${hash}`, `${name}.sock`);
}

/** The MCP (newline-delimited JSON-RPC) socket that sits beside the HTTP socket `socket`. */
export function mcpSocketBeside(socket: string): string {
  return socket.replace(/(\.sock)?$/, "-mcp.sock");
}

/** Resolves every path Termada uses; creates nothing. */
export function resolvePaths(options: ResolvePathsOptions): TermadaPaths {
  const { env } = options;
  // Set but empty means unset (never "the current directory").
  const homeOption = options.home || env.TERMADA_HOME || undefined;
  const home = homeOption === undefined ? undefined : resolve(homeOption);

  const configFile = options.configFile !== undefined
    ? resolve(options.configFile)
    : home !== undefined
    ? join(home, "config.yaml")
    : join(
      xdgDir(env, "XDG_CONFIG_HOME") ?? join(userHome(env, "config"), ".config"),
      "termada",
      "config.yaml",
    );

  const stateDir = home ??
    join(
      xdgDir(env, "XDG_STATE_HOME") ?? join(userHome(env, "state"), ".local", "state"),
      "termada",
    );

  return {
    configFile,
    stateDir,
    socketPath: socketPathFor(stateDir, env),
    mcpSocketPath: socketPathFor(stateDir, env, "termada-mcp"),
    lockPath: join(stateDir, "termada.lock"),
    dbPath: join(stateDir, "termada.db"),
    logPath: join(stateDir, "daemon.log"),
    recordingsDir: join(stateDir, "recordings"),
    spoolDir: join(stateDir, "spool"),
    runtimeDir: join(stateDir, "run"),
    tokenFile: join(stateDir, "token"),
    infoFile: join(stateDir, "daemon.json"),
  };
}

function refuse(path: string, reason: string): TermadaError {
  return invalidArgument(
    `Cannot use "${path}" as a private directory: ${reason}`,
    "Move it out of the way, or point TERMADA_HOME / XDG_STATE_HOME elsewhere",
  );
}

function mode(info: Deno.FileInfo): number {
  return (info.mode ?? 0) & 0o7777;
}

/**
 * `mkdir -p` whose last component ends up mode 0700 and owned by this user. An existing directory
 * with a looser mode is tightened (not an error). Refused: something that is not a directory, a
 * symlink owned by another user, or a directory owned by another user.
 */
export function ensurePrivateDir(path: string): void {
  let info = lstatOrNull(path);
  if (info === null) {
    // Parents we create are private too (XDG: create missing base directories 0700); parents
    // that exist are left as they are.
    Deno.mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    try {
      Deno.mkdirSync(path, { mode: 0o700 });
    } catch (err) {
      // Created by someone else meanwhile: the checks below decide whether we can use it.
      if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
    }
    info = Deno.lstatSync(path);
  }

  const uid = Deno.uid();
  if (info.isSymlink) {
    if (uid !== null && info.uid !== uid) {
      throw refuse(path, `it is a symlink owned by another user (uid ${info.uid})`);
    }
    info = Deno.statSync(path);
  }
  if (!info.isDirectory) throw refuse(path, "it is not a directory");
  if (uid !== null && info.uid !== uid) {
    throw refuse(path, `it is owned by another user (uid ${info.uid}, not ${uid})`);
  }
  const current = mode(info);
  if (current !== 0o700) {
    Deno.chmodSync(path, 0o700);
    if ((current & 0o077) !== 0) {
      log.warn("Tightened directory permissions to 0700", {
        path,
        was: `0${current.toString(8)}`,
      });
    }
  }
}

/**
 * Where the scratch directories of `security.run_as` sessions go: outside the state directory
 * (0700, the daemon's: that user must never enter it) and outside the daemon user's home
 * (often 0700 too). `/run/termada-<hash of the state dir>` (only root can create entries in
 * /run, so nobody can take the name first), else `/tmp/termada-<uid>-<hash>-sessions`, which
 * `ensureSharedDir` refuses when someone else made it.
 */
export function runAsSessionsDir(stateDir: string, runDir = "/run"): string {
  const hash = shortHash(stateDir);
  const run = lstatOrNull(runDir);
  if (run?.isDirectory && run.uid === 0 && ((run.mode ?? 0) & 0o022) === 0) {
    return join(runDir, `termada-${hash}`);
  }
  return join("/tmp", `termada-${Deno.uid() ?? 0}-${hash}-sessions`);
}

/**
 * Makes `path` a directory of this user with mode 0711: anyone may pass through to an entry
 * whose name they know, nobody but its owner may list or change it. Refused like
 * `ensurePrivateDir`: not a directory, a symlink, or owned by someone else.
 */
export function ensureSharedDir(path: string): void {
  let info = lstatOrNull(path);
  if (info === null) {
    try {
      Deno.mkdirSync(path, { mode: 0o711 });
    } catch (err) {
      if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
    }
    info = Deno.lstatSync(path);
  }
  if (info.isSymlink) throw refuse(path, "it is a symlink");
  if (!info.isDirectory) throw refuse(path, "it is not a directory");
  const uid = Deno.uid();
  if (uid !== null && info.uid !== uid) {
    throw refuse(path, `it is owned by another user (uid ${info.uid}, not ${uid})`);
  }
  if (mode(info) !== 0o711) Deno.chmodSync(path, 0o711);
}

function lstatOrNull(path: string): Deno.FileInfo | null {
  try {
    return Deno.lstatSync(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
}

/**
 * Creates (or tightens) every directory the daemon writes to: the state dir, recordings, spool,
 * runtime scratch and the socket's directory. The config file's directory is the user's and is
 * left alone — except that Termada's own one (`~/.config/termada`) is created when missing, so
 * sessions find it hidden rather than free to create (a config.yaml an agent wrote there would
 * be the next daemon's policy).
 */
export function ensureStateDirs(paths: TermadaPaths): void {
  const dirs = [
    paths.stateDir,
    paths.recordingsDir,
    paths.spoolDir,
    paths.runtimeDir,
    dirname(paths.socketPath),
    dirname(paths.mcpSocketPath),
  ];
  for (const dir of new Set(dirs)) ensurePrivateDir(dir);
  const configDir = dirname(paths.configFile);
  if (/^\.?termada/.test(basename(configDir))) {
    Deno.mkdirSync(configDir, { recursive: true, mode: 0o700 });
  }
}

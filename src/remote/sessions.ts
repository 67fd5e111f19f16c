/**
 * Sessions on a server: the launcher the engine uses to start a session's shell there. The
 * shell integration is the local one — the same rc files (written into a private directory in
 * the remote user's `~/.cache/termada/sessions/<id>`, mode 0700/0600), the same markers with a
 * per-session nonce — run by `exec` on an SSH channel with a PTY. The session's environment is
 * passed on the command line (`env K=V … bash …`): sshd refuses most `env` requests.
 */
import type { PtySpawnOptions } from "../pty/mod.ts";
import type { RemoteLauncher, Session } from "../engine/mod.ts";
import { TermadaError } from "../shared/mod.ts";
import type { ServerBinding } from "./binding.ts";
import type { SshLease, SshPool } from "./pool.ts";
import type { SshClient } from "./ssh2.ts";
import { RemoteTerm } from "./term.ts";

/** Bytes of output kept from a helper command (mkdir, rm): its error message. */
const HELPER_OUTPUT_BYTES = 4096;

export interface RemoteSessionOptions {
  pool: SshPool;
  binding: ServerBinding;
  reconnectAttempts: number;
  /** Helper commands (file writes, cleanup) give up after this long. */
  helperTimeoutMs?: number;
  onLinkLost?(s: Session, reason: string, jobId: string | undefined): void;
  onReconnected?(s: Session, attempt: number): void;
}

/** Builds the launcher of one remote session (engine.openSession's `remote`). */
export function remoteLauncher(o: RemoteSessionOptions): (id: string) => Promise<RemoteLauncher> {
  const b = o.binding;
  return async (id) => {
    const lease = await o.pool.acquire(b);
    let home: string;
    try {
      const r = await run(lease.client, 'printf %s "$HOME"', { timeoutMs: o.helperTimeoutMs });
      home = r.stdout.trim();
      if (r.code !== 0 || !home.startsWith("/")) {
        throw new TermadaError(
          "SERVER_UNREACHABLE",
          `Cannot start a session on "${b.name}": the remote home is not known`,
          { details: { server: b.name }, hint: r.stderr.slice(0, 300) || undefined },
        );
      }
    } finally {
      lease.release();
    }
    const dir = `${home}/.cache/termada/sessions/${id}`;
    const helper = async (command: string, stdin?: string) => {
      const l = await o.pool.acquire(b);
      try {
        const r = await run(l.client, command, { stdin, timeoutMs: o.helperTimeoutMs });
        if (r.code !== 0) {
          throw new TermadaError(
            "SERVER_UNREACHABLE",
            `A helper command on "${b.name}" failed (exit ${r.code}): ${
              r.stderr.trim().slice(0, 300)
            }`,
            { details: { server: b.name } },
          );
        }
      } finally {
        l.release();
      }
    };
    return {
      dir,
      hooks: {
        server: b.name,
        reconnectAttempts: o.reconnectAttempts,
        writeFiles: async (files) => {
          for (const f of files) {
            await helper(
              `umask 077 && mkdir -p -- ${q(dirOf(f.path))} && cat > ${q(f.path)}`,
              f.content,
            );
          }
        },
        removeDir: (d) => helper(`rm -rf -- ${q(d)}`),
        onLinkLost: (s, reason, job) => o.onLinkLost?.(s, reason, job?.id),
        onReconnected: (s, attempt) => o.onReconnected?.(s, attempt),
      },
      spawn: async (req: PtySpawnOptions) => {
        const l = await o.pool.acquire(b);
        try {
          const term = await RemoteTerm.open(l, shellCommand(req), {
            cols: req.cols ?? 120,
            rows: req.rows ?? 40,
          });
          return { pty: term, detach() {} };
        } catch (err) {
          l.release();
          throw new TermadaError("SERVER_UNREACHABLE", `Cannot open a terminal on "${b.name}"`, {
            cause: err,
            details: { server: b.name },
          });
        }
      },
    };
  };
}

/** `cd <cwd> && exec env K=V … <argv>` (no cd when cwd is "": the remote home). */
export function shellCommand(req: PtySpawnOptions): string {
  const env = Object.entries(req.env ?? {})
    .filter(([k]) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(k))
    .map(([k, v]) => q(`${k}=${v}`));
  const exec = `exec env ${env.join(" ")} ${req.argv.map(q).join(" ")}`;
  return req.cwd ? `cd ${q(req.cwd)} && ${exec}` : exec;
}

/**
 * POSIX single quotes, whatever the word holds (newlines too): the line is read by the remote
 * user's login shell, which may be dash, where bash's `$'…'` does not exist.
 */
function q(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

function dirOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i <= 0 ? "/" : path.slice(0, i);
}

/** Runs one command without a PTY; stdin written then closed; output bounded. */
export function run(
  client: SshClient,
  command: string,
  o: { stdin?: string; timeoutMs?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    client.exec(command, (err, ch) => {
      if (err) return reject(err);
      let stdout = "", stderr = "";
      const timer = setTimeout(() => {
        try {
          ch.close();
        } catch {
          // closed
        }
        reject(new TermadaError("SERVER_UNREACHABLE", `A remote command did not finish in time`));
      }, o.timeoutMs ?? 15_000);
      let code: number | null = null;
      ch.on("data", (d: Uint8Array) => {
        if (stdout.length < HELPER_OUTPUT_BYTES) stdout += new TextDecoder().decode(d);
      });
      ch.stderr.on("data", (d: Uint8Array) => {
        if (stderr.length < HELPER_OUTPUT_BYTES) stderr += new TextDecoder().decode(d);
      });
      ch.on("exit", (c: number | null) => code = typeof c === "number" ? c : null);
      ch.on("close", () => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
      if (o.stdin !== undefined) ch.end(o.stdin);
      else ch.end();
    });
  });
}

export type { SshLease };

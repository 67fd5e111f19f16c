/**
 * file_read / file_write as the edges call them: the path resolved against the session's cwd
 * (the caller's session, or the daemon's default directory without one), where the session
 * runs (local, or its server over SFTP on the binding pinned when the session opened), one
 * gateway decision (`file.read` / `file.write` with the resolved path), then the read or the
 * atomic write, and an outcome record with size and SHA-256 (never the content). Text read
 * back passes the session's redactor like any output.
 */
import type { Engine, Session } from "../engine/mod.ts";
import {
  type FileBackend,
  isLoopbackHost,
  localFiles,
  sftpFiles,
  sftpHome,
} from "../remote/mod.ts";
import { TermadaError, toTermadaError } from "../shared/mod.ts";
import type {
  FileReadInput,
  FileReadResult,
  FileWriteInput,
  FileWriteResult,
} from "../wire/mod.ts";
import { REMOTE_LIMITS } from "../wire/mod.ts";
import type { ActionKind, AdmittedAction, Gateway } from "./gateway.ts";
import type { RemoteOps } from "./remote.ts";
import type { ApprovalBook } from "./approvals.ts";

export interface FileOpsOptions {
  engine: Engine;
  gateway: Gateway;
  approvals: ApprovalBook;
  remote?: RemoteOps;
  /**
   * Paths of this machine agents never read or write through the file tools, whatever the
   * policy: Termada's control plane (state, config, tokens, sockets), the daemon's SSH
   * credentials; and `write`: its own code (what the launcher runs).
   */
  forbidden?: { all: readonly string[]; write: readonly string[] };
}

/** Kernel views of processes and devices: never through the file tools. */
const KERNEL_VIEWS = ["/proc", "/sys"];

interface Where {
  session: Session | undefined;
  target: string;
  /** The files are this machine's (local, or a server on a loopback address). */
  thisMachine: boolean;
  cwd: string;
  backend: FileBackend;
  release(): void;
}

export class FileOps {
  readonly #o: FileOpsOptions;
  /** The forbidden paths with their real paths too (resolved once, on first use). */
  #resolved: Promise<{ all: string[]; write: string[] }> | undefined;

  constructor(o: FileOpsOptions) {
    this.#o = o;
  }

  async #forbidden(
    kind: "file.read" | "file.write",
    paths: (string | undefined)[],
  ): Promise<boolean> {
    this.#resolved ??= (async () => {
      const withReal = async (list: readonly string[]) => {
        const out = new Set<string>();
        for (const p of list) {
          out.add(p);
          try {
            out.add(await Deno.realPath(p));
          } catch {
            // not there (yet): its lexical path stands
          }
        }
        return [...out];
      };
      return {
        all: await withReal([...KERNEL_VIEWS, ...(this.#o.forbidden?.all ?? [])]),
        write: await withReal(this.#o.forbidden?.write ?? []),
      };
    })();
    const f = await this.#resolved;
    const list = kind === "file.write" ? [...f.all, ...f.write] : f.all;
    const inside = (x: string) =>
      list.some((h) => x === h || x.startsWith(h.endsWith("/") ? h : `${h}/`));
    return paths.some((x) => x !== undefined && inside(x));
  }

  /**
   * For a walk of `dir` on this machine (snapshots): whether `dir` itself is in a forbidden
   * place, and the forbidden paths below it (to leave out), by lexical and real path.
   */
  async forbiddenAround(dir: string): Promise<{ inside: boolean; below: string[] }> {
    const inside = await this.#forbidden("file.read", [dir]);
    const f = await this.#resolved!;
    const prefix = dir.endsWith("/") ? dir : `${dir}/`;
    return { inside, below: [...new Set(f.all.filter((p) => p.startsWith(prefix)))] };
  }

  async read(owner: string, req: FileReadInput): Promise<FileReadResult> {
    const w = await this.#where(owner, req.session);
    try {
      const path = w.backend.resolve(w.cwd, req.path);
      const { action, real } = await this.#admit(owner, "file.read", w, path, ["read", path]);
      try {
        // Where the check found it leads: a symlink swapped after the check is not followed.
        const r = await w.backend.read(real, {
          offset: req.offset ?? 0,
          maxBytes: req.max_bytes ?? REMOTE_LIMITS.readPageBytes,
        });
        this.#o.gateway.actionDone(action, {
          ok: true,
          facts: {
            target: w.target,
            path: r.path,
            size: r.size,
            offset: r.offset,
            bytes: r.bytes.length,
            sha256: r.sha256 ?? null,
          },
        });
        const text = utf8(r.bytes);
        const content = text === undefined
          ? (r.bytes as Uint8Array & { toBase64(): string }).toBase64()
          : new TextDecoder().decode(
            (w.session?.redactor ?? this.#o.engine.newRedactor()).redact(r.bytes),
          );
        return {
          path: r.path,
          target: w.target,
          size: r.size,
          offset: r.offset,
          bytes: r.bytes.length,
          eof: r.eof,
          encoding: text === undefined ? "base64" : "utf8",
          content,
          ...(r.sha256 ? { sha256: r.sha256 } : {}),
          ...(r.eof ? {} : { next_offset: r.offset + r.bytes.length }),
        };
      } catch (err) {
        this.#o.gateway.actionDone(action, { ok: false, error: toTermadaError(err).message });
        throw err;
      }
    } finally {
      w.release();
    }
  }

  async write(owner: string, req: FileWriteInput): Promise<FileWriteResult> {
    if ((req.content === undefined) === (req.base64 === undefined)) {
      throw new TermadaError("INVALID_ARGUMENT", 'Give exactly one of "content" or "base64"');
    }
    const data = req.content !== undefined
      ? new TextEncoder().encode(req.content)
      : (Uint8Array as unknown as { fromBase64(s: string): Uint8Array }).fromBase64(req.base64!);
    if (data.length > REMOTE_LIMITS.writeBytes) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot write ${data.length} bytes: at most ${REMOTE_LIMITS.writeBytes} per file_write`,
      );
    }
    const mode = req.mode === undefined
      ? undefined
      : typeof req.mode === "number"
      ? req.mode
      : parseInt(req.mode, 8);
    const w = await this.#where(owner, req.session);
    try {
      const path = w.backend.resolve(w.cwd, req.path);
      const { action, real } = await this.#admit(owner, "file.write", w, path, [
        "write",
        path,
        `${data.length} bytes`,
      ]);
      try {
        const r = await w.backend.write(real, data, { mode });
        this.#o.gateway.actionDone(action, {
          ok: true,
          facts: {
            target: w.target,
            path: r.path,
            size: r.size,
            sha256: r.sha256,
            created: r.created,
            mode: r.mode.toString(8),
          },
        });
        return {
          path: r.path,
          target: w.target,
          size: r.size,
          sha256: r.sha256,
          created: r.created,
          mode: r.mode.toString(8).padStart(4, "0"),
        };
      } catch (err) {
        this.#o.gateway.actionDone(action, { ok: false, error: toTermadaError(err).message });
        throw err;
      }
    } finally {
      w.release();
    }
  }

  /**
   * The gate, on the path asked and on the path it really reaches (symlinks resolved: the file
   * for a read, the directory for a write), so a link under an allowed directory cannot lead
   * the call somewhere the policy forbids. Both must pass; the strictest answer wins.
   */
  async #admit(
    owner: string,
    kind: Extract<ActionKind, "file.read" | "file.write">,
    w: Where,
    path: string,
    summary: string[],
  ): Promise<{ action: AdmittedAction; real: string }> {
    const real = await reached(w.backend, kind, path);
    const subjects = [{ kind, target: w.target, path }];
    if (real !== undefined && real !== path) subjects.push({ kind, target: w.target, path: real });
    // The daemon reads and writes as itself: its own state, config, tokens, sockets and SSH
    // credentials (and, to write, its code) are out of reach whatever the policy says. A server
    // on a loopback address is this machine.
    const forbidden = w.thisMachine && (await this.#forbidden(kind, [path, real]))
      ? `"${path}" is part of Termada's own control plane (state, config, tokens, credentials` +
        `${kind === "file.write" ? ", code" : ""}) or a kernel view: never reachable by agents`
      : undefined;
    if (real === undefined && !forbidden) {
      // Nothing to decide by: the path (or its directory) is missing now. Going ahead by the
      // lexical path would let a link created between this check and the access decide where
      // it lands (a race the remote attack review found): the call fails here instead.
      throw new TermadaError(
        "NOT_FOUND",
        kind === "file.read"
          ? `Cannot read "${path}": it does not exist`
          : `Cannot write "${path}": its directory does not exist`,
        { hint: kind === "file.read" ? "Check the path" : "Create the directory first" },
      );
    }
    const action = await this.#o.gateway.admitAction(
      {
        owner,
        kind,
        subjects,
        ...(forbidden ? { forbidden } : {}),
        summary: [...summary, `on ${w.target}`],
        ...(w.session ? { sessionId: w.session.id } : {}),
      },
      (a, c) => this.#o.approvals.askAction(a, c),
    );
    // A forbidden path was refused above (the gateway denies it), so `real` is known here.
    return { action, real: real! };
  }

  async #where(owner: string, sessionId: string | undefined): Promise<Where> {
    const engine = this.#o.engine;
    if (sessionId === undefined) {
      assertLocalFiles(engine);
      return {
        session: undefined,
        target: "local",
        thisMachine: true,
        cwd: engine.defaultCwd(),
        backend: localFiles(),
        release() {},
      };
    }
    const session = engine.registry.ownSession(owner, sessionId);
    if (!session.remote) {
      assertLocalFiles(engine);
      return {
        session,
        target: "local",
        thisMachine: true,
        cwd: session.cwd,
        backend: localFiles(),
        release() {},
      };
    }
    const remote = this.#o.remote;
    const binding = remote?.bindingOf(session.id);
    if (!remote || !binding) {
      throw new TermadaError("NOT_FOUND", `Session "${session.id}" has no server binding`);
    }
    const lease = await remote.pool.acquire(binding);
    try {
      const sftp = await remote.sftp(lease);
      // A session that has not reported its cwd yet is in the login directory.
      const home = session.cwd.startsWith("/") ? undefined : await sftpHome(sftp);
      return {
        session,
        target: binding.name,
        thisMachine: isLoopbackHost(binding.host),
        cwd: session.cwd,
        backend: sftpFiles(sftp, home ? { home } : {}),
        release: () => {
          try {
            sftp.end();
          } catch {
            // closed with its connection
          }
          lease.release();
        },
      };
    } catch (err) {
      lease.release();
      throw err;
    }
  }
}

/**
 * Under `security.run_as` the local file tools are off: they would act as the daemon's user,
 * which is what run_as keeps sessions away from. The session's own commands act as its user.
 */
function assertLocalFiles(engine: Engine): void {
  const runAs = engine.runAs;
  if (runAs === undefined) return;
  throw new TermadaError(
    "NOT_SUPPORTED",
    `Cannot use file tools on this machine: local programs run as "${runAs.user}" ` +
      "(security.run_as) and the file tools would act as the daemon's user",
    { hint: "Use commands in a session (cat, tee, printf > file), which run as that user" },
  );
}

/** Where `path` leads once symlinks are resolved; undefined when it (or its directory) is missing. */
async function reached(
  backend: FileBackend,
  kind: "file.read" | "file.write",
  path: string,
): Promise<string | undefined> {
  try {
    if (kind === "file.read") return await backend.realpath(path);
    const slash = path.lastIndexOf("/");
    const dir = await backend.realpath(slash <= 0 ? "/" : path.slice(0, slash));
    return `${dir === "/" ? "" : dir}/${path.slice(slash + 1)}`;
  } catch {
    return undefined; // the call itself reports what is missing
  }
}

/** The text, when `bytes` is valid UTF-8 without NUL; undefined otherwise. */
function utf8(bytes: Uint8Array): string | undefined {
  try {
    const s = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    return s.includes("\0") ? undefined : s;
  } catch {
    return undefined;
  }
}

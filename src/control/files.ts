/**
 * file_read / file_write as the edges call them: the path resolved against the session's cwd
 * (the caller's session, or the daemon's default directory without one), where the session
 * runs (local, or its server over SFTP on the binding pinned when the session opened), one
 * gateway decision (`file.read` / `file.write` with the resolved path), then the read or the
 * atomic write, and an outcome record with size and SHA-256 (never the content). Text read
 * back passes the session's redactor like any output.
 */
import type { Engine, Session } from "../engine/mod.ts";
import { type FileBackend, localFiles, sftpFiles, sftpHome } from "../remote/mod.ts";
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
}

interface Where {
  session: Session | undefined;
  target: string;
  cwd: string;
  backend: FileBackend;
  release(): void;
}

export class FileOps {
  readonly #o: FileOpsOptions;

  constructor(o: FileOpsOptions) {
    this.#o = o;
  }

  async read(owner: string, req: FileReadInput): Promise<FileReadResult> {
    const w = await this.#where(owner, req.session_id ?? req.session);
    try {
      const path = w.backend.resolve(w.cwd, req.path);
      const action = await this.#admit(owner, "file.read", w, path, ["read", path]);
      try {
        const r = await w.backend.read(path, {
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
          : w.session
          ? new TextDecoder().decode(w.session.redactor.redact(r.bytes))
          : text;
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
    const w = await this.#where(owner, req.session_id ?? req.session);
    try {
      const path = w.backend.resolve(w.cwd, req.path);
      const action = await this.#admit(owner, "file.write", w, path, [
        "write",
        path,
        `${data.length} bytes`,
      ]);
      try {
        const r = await w.backend.write(path, data, { mode });
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

  #admit(
    owner: string,
    kind: Extract<ActionKind, "file.read" | "file.write">,
    w: Where,
    path: string,
    summary: string[],
  ): Promise<AdmittedAction> {
    return this.#o.gateway.admitAction(
      {
        owner,
        kind,
        subjects: [{ kind, target: w.target, path }],
        summary: [...summary, `on ${w.target}`],
        ...(w.session ? { sessionId: w.session.id } : {}),
      },
      (a, c) => this.#o.approvals.askAction(a, c),
    );
  }

  async #where(owner: string, sessionId: string | undefined): Promise<Where> {
    const engine = this.#o.engine;
    if (sessionId === undefined) {
      return {
        session: undefined,
        target: "local",
        cwd: engine.defaultCwd(),
        backend: localFiles(),
        release() {},
      };
    }
    const session = engine.registry.ownSession(owner, sessionId);
    if (!session.remote) {
      return { session, target: "local", cwd: session.cwd, backend: localFiles(), release() {} };
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

/** The text, when `bytes` is valid UTF-8 without NUL; undefined otherwise. */
function utf8(bytes: Uint8Array): string | undefined {
  try {
    const s = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    return s.includes("\0") ? undefined : s;
  } catch {
    return undefined;
  }
}

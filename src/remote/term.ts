/**
 * A terminal on a server: an SSH channel with a PTY (`exec` of the session's shell with
 * `pty-req`), driven like a local Pty by a session. What the kernel tells us locally (the
 * foreground process group, termios echo, which process reads) is not visible through SSH:
 * those answers are `undefined` and the session falls back to text heuristics. Signals are
 * best effort: INT, QUIT and TSTP are the terminal's own keys (^C, ^\, ^Z), the rest go to the
 * remote shell as SSH `signal` requests (OpenSSH honours them; others may not).
 */
import type { SshLease } from "./pool.ts";
import type { ClientChannel } from "./ssh2.ts";

export interface TermExit {
  code: number | null;
  signal: string | null;
}

/** Bytes written to a channel that is not draining before writes are refused (1 MiB). */
export const MAX_QUEUED_INPUT = 1 << 20;

const KEYS: Record<string, string> = { INT: "\x03", QUIT: "\x1c", TSTP: "\x1a" };

export class RemoteTerm {
  readonly pid = 0;
  readonly ttyPath = "";
  readonly remote = true;
  readonly server: string;
  #ch: ClientChannel;
  #cols: number;
  #rows: number;
  #sink: ((c: Uint8Array) => void) | undefined;
  #onEnd: (() => void) | undefined;
  #early: Uint8Array[] = [];
  #exit: TermExit | undefined;
  #exited = Promise.withResolvers<TermExit>();
  #ended = Promise.withResolvers<void>();
  #endFired = false;
  #queued = 0;
  #closing: Promise<TermExit> | undefined;
  /** Why it ended, when the link (not the shell) went away. */
  linkLost: string | undefined;

  private constructor(server: string, ch: ClientChannel, cols: number, rows: number) {
    this.server = server;
    this.#ch = ch;
    this.#cols = cols;
    this.#rows = rows;
    const onData = (d: Uint8Array) => {
      const c = new Uint8Array(d);
      if (this.#sink) this.#sink(c);
      else this.#early.push(c);
    };
    ch.on("data", onData);
    ch.stderr.on("data", onData);
    ch.on("exit", (code: number | null, signal?: string) => {
      this.#exit ??= { code: typeof code === "number" ? code : null, signal: signal ?? null };
    });
    ch.on("close", () => {
      // A shell that ends sends its status first; a channel that closes without one lost its
      // connection (sshd killed, link cut).
      if (this.#exit === undefined) this.linkLost ??= "the connection dropped";
      this.#exit ??= { code: null, signal: null };
      this.#fireEnd();
      this.#exited.resolve(this.#exit);
    });
  }

  /**
   * Runs `command` (one shell line, for the remote user's login shell) on a PTY of `cols`×`rows`.
   * The lease stays held until the terminal closes.
   */
  static open(
    lease: SshLease,
    command: string,
    o: { cols: number; rows: number; term?: string },
  ): Promise<RemoteTerm> {
    return new Promise((resolve, reject) => {
      lease.client.exec(
        command,
        {
          pty: {
            term: o.term ?? "xterm-256color",
            cols: o.cols,
            rows: o.rows,
            width: 0,
            height: 0,
          },
        },
        (err, ch) => {
          if (err) return reject(err);
          const t = new RemoteTerm(lease.binding.name, ch, o.cols, o.rows);
          lease.lost.then((why) => {
            if (t.#exit === undefined) t.linkLost = why;
            t.#close();
          });
          t.exited.finally(() => lease.release());
          resolve(t);
        },
      );
    });
  }

  get cols(): number {
    return this.#cols;
  }
  get rows(): number {
    return this.#rows;
  }

  setSink(onData: (chunk: Uint8Array) => void, onEnd?: () => void): void {
    if (this.#sink) throw new Error("Terminal output already has a consumer");
    this.#sink = onData;
    this.#onEnd = onEnd;
    for (const c of this.#early) onData(c);
    this.#early = [];
    if (this.#endFired) onEnd?.();
  }

  get exited(): Promise<TermExit> {
    return this.#exited.promise;
  }
  get outputEnded(): Promise<void> {
    return this.#ended.promise;
  }
  get exitStatus(): TermExit | undefined {
    return this.#exit;
  }

  write(data: Uint8Array | string): Promise<void> {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    if (this.#endFired) {
      return Promise.reject(
        new Error(`Cannot write to the terminal on "${this.server}": it is closed`),
      );
    }
    if (this.#queued + bytes.length > MAX_QUEUED_INPUT) {
      return Promise.reject(
        new RangeError(
          `Input queue of the terminal on "${this.server}" is full (${MAX_QUEUED_INPUT} bytes)`,
        ),
      );
    }
    this.#queued += bytes.length;
    return new Promise((resolve, reject) => {
      try {
        this.#ch.write(bytes, (err?: Error | null) => {
          this.#queued -= bytes.length;
          if (err) reject(err);
          else resolve();
        });
      } catch (err) {
        this.#queued -= bytes.length;
        reject(err);
      }
    });
  }

  resize(cols: number, rows: number): void {
    this.#cols = cols;
    this.#rows = rows;
    try {
      this.#ch.setWindow(rows, cols, 0, 0);
    } catch {
      // closed: nothing to resize
    }
  }

  foregroundPgid(): number | undefined {
    return undefined;
  }

  termMode(): { echo: boolean; canonical: boolean } | undefined {
    return undefined;
  }

  /** Best effort (see the module comment); false when the terminal is closed. */
  signal(sig: string | number, _target?: "foreground" | "child" | "group"): boolean {
    if (this.#endFired) return false;
    const name = typeof sig === "number" ? String(sig) : sig;
    const key = KEYS[name];
    if (key) {
      this.write(key).catch(() => {/* closed meanwhile */});
      return true;
    }
    try {
      this.#ch.signal(name);
      return true;
    } catch {
      return false;
    }
  }

  /** Hangs up: closes the channel (sshd sends SIGHUP to the remote shell). */
  close(o: { graceMs?: number } = {}): Promise<TermExit> {
    return this.#closing ??= (async () => {
      this.#close();
      const grace = o.graceMs ?? 500;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const gone = await Promise.race([
        this.exited.then(() => true),
        new Promise<boolean>((r) => timer = setTimeout(() => r(false), grace)),
      ]);
      clearTimeout(timer);
      if (!gone) {
        try {
          this.#ch.destroy();
        } catch {
          // gone
        }
        this.#exit ??= { code: null, signal: null };
        this.#fireEnd();
        this.#exited.resolve(this.#exit);
      }
      return this.#exit!;
    })();
  }

  #close(): void {
    try {
      this.#ch.close();
    } catch {
      // already closed
    }
  }

  #fireEnd(): void {
    if (this.#endFired) return;
    this.#endFired = true;
    this.#ended.resolve();
    this.#onEnd?.();
  }
}

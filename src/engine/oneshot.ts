/**
 * A background (one-shot) job: the argv spawned directly on its own PTY, argv-exact, with no
 * shell in between (a single word is a command line and runs under `<shell> -c`). It does not
 * occupy a session, so long servers and builds can run beside the session's own commands.
 */
import {
  killTree,
  type PtySpawnOptions,
  SIGNAL_NUMBERS,
  signalGroup,
  type SignalName,
  snapshotTree,
} from "../pty/mod.ts";
import { classify } from "../output/mod.ts";
import type { ShellKind } from "../shell/mod.ts";
import { TermadaError, within } from "../shared/mod.ts";
import { InputWatcher } from "./input.ts";
import type { Job } from "./job.ts";
import type { ProcessScope } from "../sandbox/mod.ts";
import type { Terminal } from "./session.ts";

/**
 * A program started on a terminal: a local PTY with its processes (`scope`), or a terminal on
 * a server (a background job in a remote session: no scope, its processes are out of reach).
 */
export interface Spawned {
  pty: Terminal;
  scope?: ProcessScope;
  detach(): void;
}

export class OneShot {
  readonly job: Job;
  readonly #pty: Terminal;
  readonly #input: InputWatcher;

  readonly #scope: ProcessScope | undefined;

  private constructor(job: Job, spawned: Spawned) {
    const pty = spawned.pty;
    this.job = job;
    this.#pty = pty;
    const scope = spawned.scope;
    this.#scope = scope;
    // Its cgroup goes once nothing it started is left in it (else it stays the job's: a later
    // exec_kill ends those and removes it, or the registry's release, or shutdown).
    const release = () => {
      if (scope && scope.all().length === 0) void scope.dispose().catch(() => false);
    };
    if (scope) {
      job.processes = {
        list: () => scope.all(),
        end: async (graceMs) => {
          const r = await scope.end({ wholeCgroup: true, graceMs });
          if (r.survivors.length === 0) await scope.dispose().catch(() => false);
          return r;
        },
        release,
      };
    }
    this.#input = new InputWatcher(pty, pty.pid, () => this.job);
    pty.setSink((c) => {
      job.feed(c, classify(c));
      this.#input.poke();
    });
    this.#input.poke();
    Promise.all([pty.exited, within(pty.outputEnded, 200)]).then(async ([st]) => {
      this.#input.stop();
      const code = st.code ?? (st.signal ? 128 + (SIGNAL_NUMBERS[st.signal] ?? 0) : undefined);
      if (pty.remote && pty.linkLost !== undefined) {
        job.finish("orphaned", {
          reason: `the link dropped (${pty.linkLost}); the remote process may still run there`,
        });
      } else {
        // On a server the status is what sshd reported, not a waitpid of ours.
        job.finish("exited", {
          exitCode: code,
          signal: st.signal ?? undefined,
          source: pty.remote ? "shell" : "kernel",
        });
      }
      await pty.close({ graceMs: 100 });
      spawned.detach();
      release();
    });
  }

  static async start(
    job: Job,
    options: {
      argv: readonly string[];
      shell: ShellKind;
      cwd: string;
      env: Record<string, string>;
      cols: number;
      rows: number;
      spawn: (req: PtySpawnOptions) => Promise<Spawned>;
    },
  ): Promise<OneShot> {
    const argv = options.argv.length === 1 ? [options.shell, "-c", options.argv[0]!] : options.argv;
    let spawned: Spawned;
    try {
      spawned = await options.spawn({
        argv,
        cwd: options.cwd,
        env: options.env,
        cols: options.cols,
        rows: options.rows,
      });
    } catch (err) {
      const blocked = job.blocked[job.blocked.length - 1];
      if (blocked) {
        // The exec gate stopped the program itself at its execve.
        job.finish("denied", { reason: blocked.reason });
        throw new TermadaError("DENIED_BY_POLICY", blocked.reason, {
          retriable: false,
          hint: "Choose a command the policy allows, or ask the operator to change the policy",
          details: blocked.rule ? { rule: blocked.rule } : undefined,
        });
      }
      job.finish("failed", { reason: (err as Error).message });
      if (err instanceof TermadaError) throw err;
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot start "${argv[0]}": ${(err as Error).message}`,
        {
          cause: err,
          hint: "Check the program name (it is looked up in PATH) and the working directory",
        },
      );
    }
    return new OneShot(job, spawned);
  }

  get pty(): Terminal {
    return this.#pty;
  }

  async writeInput(data: string | Uint8Array): Promise<void> {
    await this.#pty.write(data);
    this.job.resumed();
    this.#input.poke();
  }

  signal(sig: SignalName): boolean {
    return this.#pty.signal(sig, "foreground") || this.#pty.signal(sig, "group");
  }

  /** INT → TERM → hang-up and KILL of the whole tree, `graceMs` apart. */
  async stop(graceMs: number, status: "killed" | "timed_out"): Promise<void> {
    const job = this.job;
    if (job.final) return;
    if (this.#pty.remote) {
      // Best effort on a server: ^C, ^\, then hang up the channel (SIGHUP to what it runs).
      for (const sig of ["INT", "QUIT"] as const) {
        job.stopping = { status, signal: sig };
        this.#pty.signal(sig, "foreground");
        if (await waitDone(job, graceMs)) return;
      }
      job.stopping = { status, signal: "HUP" };
      job.reason ??= "best effort on a server: ^C and ^\\ did not end it, so its terminal was " +
        "hung up; a process that ignores SIGHUP may still run there";
      await this.#pty.close({ graceMs: 0 });
      await waitDone(job, 2000);
      return;
    }
    const tree = snapshotTree(this.#pty.pid);
    job.stopping = { status, signal: "INT" };
    this.signal("INT");
    if (await waitDone(job, graceMs)) return;
    job.stopping = { status, signal: "TERM" };
    const fg = this.#pty.foregroundPgid();
    if (fg !== undefined) signalGroup(fg, "TERM");
    this.#pty.signal("TERM", "child");
    killTree(tree, "TERM");
    if (await waitDone(job, graceMs)) return;
    job.stopping = { status, signal: "KILL" };
    await this.#pty.close({ graceMs: 0 });
    killTree(tree, "KILL");
    await waitDone(job, 2000);
  }

  /** Ends the job and its processes without grace (shutdown). */
  async close(): Promise<void> {
    if (!this.job.final) this.job.stopping = { status: "killed", signal: "HUP" };
    this.#input.stop();
    await this.#pty.close({ graceMs: 200 });
    await waitDone(this.job, 1000);
    await this.#scope?.end({ wholeCgroup: true, graceMs: 100 }).catch(() => undefined);
    await this.#scope?.dispose().catch(() => false);
  }
}

/** Resolves true when the job ended within `ms`. */
export async function waitDone(job: Job, ms: number): Promise<boolean> {
  if (job.final) return true;
  await within(job.done, ms);
  return job.final;
}

/**
 * Daemon side of the launcher: how to invoke it (the product's own binary, `termada __launch`;
 * from source, `deno run` of launcher_main.ts with the launcher's permission set), the control
 * socket it finds on fd 3, and the handshake — send the spec, read the launcher's report, take
 * the exec filter's listener with `pidfd_getfd`, say "go", then learn whether `execve` worked
 * (EOF: fd 3 was close-on-exec) or why not.
 *
 * The socket is non-blocking and driven by the shared Poller, so a slow launcher never blocks the
 * daemon's thread. Every wait has a deadline (LAUNCH_TIMEOUT_MS).
 */
import { fileURLToPath } from "node:url";
import { errno, LINUX, sys, syscalls, SysError } from "../../ffi/mod.ts";
import { type Poller, sharedPoller } from "../pty/mod.ts";
import { TermadaError } from "../shared/mod.ts";
import type { LaunchFailed, LaunchReady, LaunchSpec } from "./spec.ts";

/** How long a launcher may take from spawn to exec (a cold `deno run` takes ~0.1–0.4 s). */
export const LAUNCH_TIMEOUT_MS = 15_000;
/** The longest timer the runtime takes (~24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** argv that starts the launcher (before the program's own argv, which travels in the spec). */
export function launcherArgv(): string[] {
  // deno-lint-ignore no-explicit-any
  if ((Deno.build as any).standalone) return [Deno.execPath(), "__launch"];
  return [
    Deno.execPath(),
    "run",
    "--quiet",
    "--no-prompt",
    "--no-config",
    "--no-lock",
    "--allow-ffi",
    "--allow-read",
    "--allow-write",
    "--allow-env",
    fileURLToPath(new URL("./launcher_main.ts", import.meta.url)),
  ];
}

/**
 * The launcher's own environment (the program's travels in the spec). `cacheDir`: its DENO_DIR
 * when it runs from source — one sessions cannot reach, so the compiled modules it runs are not
 * in a cache a session could rewrite.
 */
export function launcherEnv(cacheDir?: string): Record<string, string> {
  const env: Record<string, string> = { DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" };
  for (const k of ["HOME", "PATH", "DENO_DIR", "XDG_CACHE_HOME", "TMPDIR"]) {
    const v = Deno.env.get(k);
    if (v !== undefined) env[k] = v;
  }
  // deno-lint-ignore no-explicit-any
  if (cacheDir !== undefined && !(Deno.build as any).standalone) env.DENO_DIR = cacheDir;
  return env;
}

/** A socketpair: `child` goes to the launcher as fd 3, `parent` stays here (both CLOEXEC). */
export function controlPair(): { parent: number; child: number } {
  const sv = new Int32Array(2);
  const rc = sys().socketpair(
    LINUX.AF_UNIX,
    LINUX.SOCK_STREAM | LINUX.SOCK_CLOEXEC,
    0,
    new Uint8Array(sv.buffer),
  );
  if (rc !== 0) throw new SysError("socketpair", errno());
  const flags = sys().fcntl(sv[0]!, LINUX.F_GETFL, 0);
  sys().fcntl(sv[0]!, LINUX.F_SETFL, flags | LINUX.O_NONBLOCK);
  return { parent: sv[0]!, child: sv[1]! };
}

/** Takes a copy of fd `fd` of process `pid` (pidfd_getfd; needs ptrace rights over it). */
export function takeFd(pid: number, fd: number): number {
  const libc = sys();
  const pidfd = libc.pidfd_open(pid, 0);
  if (pidfd < 0) throw new SysError("pidfd_open", errno());
  try {
    const n = Number(
      libc.syscall6(BigInt(syscalls()!.pidfd_getfd), BigInt(pidfd), BigInt(fd), 0n, 0n, 0n, 0n),
    );
    if (n < 0) throw new SysError("pidfd_getfd", errno());
    return n;
  } finally {
    libc.close(pidfd);
  }
}

/** The daemon's end of one launcher's control socket. */
export class LaunchChannel {
  readonly #fd: number;
  readonly #poller: Poller;
  #out: Uint8Array = new Uint8Array(0);
  #in = "";
  #lines: string[] = [];
  #waiters: ((line: string | undefined) => void)[] = [];
  #eof = false;
  #closed = false;
  #buf = new Uint8Array(4096);

  constructor(fd: number, poller: Poller = sharedPoller()) {
    this.#fd = fd;
    this.#poller = poller;
    poller.register(fd, { ready: (r) => this.#ready(r) });
  }

  send(text: string): void {
    const bytes = new TextEncoder().encode(text);
    const all = new Uint8Array(this.#out.length + bytes.length);
    all.set(this.#out);
    all.set(bytes, this.#out.length);
    this.#out = all;
    this.#flush();
  }

  /** The next line, or undefined at EOF / after `ms`. */
  line(ms: number): Promise<string | undefined> {
    const l = this.#lines.shift();
    if (l !== undefined) return Promise.resolve(l);
    if (this.#eof || this.#closed) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        const i = this.#waiters.indexOf(w);
        if (i >= 0) this.#waiters.splice(i, 1);
        resolve(undefined);
      }, ms);
      const w = (line: string | undefined) => {
        clearTimeout(timer);
        resolve(line);
      };
      this.#waiters.push(w);
    });
  }

  get eof(): boolean {
    return this.#eof;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#poller.unregister(this.#fd, { close: true });
    for (const w of this.#waiters.splice(0)) w(undefined);
  }

  #flush(): void {
    const libc = sys();
    while (this.#out.length > 0 && !this.#closed) {
      const n = Number(libc.write(this.#fd, this.#out, BigInt(this.#out.length)));
      if (n < 0) {
        const e = errno();
        if (e === LINUX.EAGAIN || e === LINUX.EINTR) break;
        this.#out = new Uint8Array(0);
        return;
      }
      this.#out = this.#out.subarray(n);
    }
    if (!this.#closed) {
      this.#poller.setEvents(
        this.#fd,
        this.#out.length > 0 ? LINUX.POLLIN | LINUX.POLLOUT : LINUX.POLLIN,
      );
    }
  }

  #ready(revents: number): void {
    if (revents & LINUX.POLLOUT) this.#flush();
    if (!(revents & (LINUX.POLLIN | LINUX.POLLHUP | LINUX.POLLERR))) return;
    const libc = sys();
    for (;;) {
      const n = Number(libc.read(this.#fd, this.#buf, BigInt(this.#buf.length)));
      if (n > 0) {
        this.#in += new TextDecoder().decode(this.#buf.subarray(0, n));
        if (this.#in.length > 1 << 20) this.#in = "";
        let nl: number;
        while ((nl = this.#in.indexOf("\n")) >= 0) {
          this.#push(this.#in.slice(0, nl));
          this.#in = this.#in.slice(nl + 1);
        }
        continue;
      }
      if (n < 0 && (errno() === LINUX.EAGAIN || errno() === LINUX.EINTR)) return;
      this.#eof = true;
      this.#poller.unregister(this.#fd, { close: true });
      this.#closed = true;
      for (const w of this.#waiters.splice(0)) w(undefined);
      return;
    }
  }

  #push(line: string): void {
    const w = this.#waiters.shift();
    if (w) w(line);
    else if (this.#lines.length < 16) this.#lines.push(line);
  }
}

/** What a finished handshake gives: the listener (daemon fd) and the report. */
export interface Launched {
  listener: number | undefined;
  /** The session's own terminal master (daemon fd), when the launcher made a private devpts. */
  terminal: number | undefined;
  report: LaunchReady;
}

function parse(line: string | undefined): LaunchReady | LaunchFailed | undefined {
  if (line === undefined) return undefined;
  try {
    return JSON.parse(line) as LaunchReady | LaunchFailed;
  } catch {
    return undefined;
  }
}

function launchError(f: LaunchFailed | undefined, program: string): TermadaError {
  if (f === undefined) {
    return new TermadaError("INTERNAL", `The launcher for "${program}" ended without a report`, {
      hint: "The launcher re-invokes termada itself: check that its binary (or deno) still runs",
    });
  }
  if (f.step === "exec") {
    const why = f.errno === LINUX.ENOENT
      ? "no such program"
      : f.errno === LINUX.EACCES
      ? "permission denied (or denied by the exec gate)"
      : f.error;
    return new TermadaError("INVALID_ARGUMENT", `Cannot start "${program}": ${why}`, {
      hint: "Check the program name (it is looked up in PATH) and the working directory",
    });
  }
  if (f.step === "cwd") {
    return new TermadaError("INVALID_ARGUMENT", `Cannot start "${program}": ${f.error}`, {
      hint: "Choose a working directory outside Termada's state, config and socket directories",
    });
  }
  if (f.step === "user") {
    // Never run as the daemon's user instead: the launcher exited.
    return new TermadaError(
      "INTERNAL",
      `Cannot start "${program}" as the security.run_as user: ${f.error}`,
      {
        hint: "The daemon must be root, or hold CAP_SETUID, CAP_SETGID and CAP_CHOWN as ambient " +
          "capabilities its launcher inherits (docs/SECURITY.md, run_as)",
      },
    );
  }
  return new TermadaError(
    "INTERNAL",
    `The session boundary could not be set up (${f.step}): ${f.error}`,
    {
      hint: "security.exec_gate: required refuses to run without it; `auto` degrades and says so",
    },
  );
}

/**
 * Runs the handshake with a launcher just spawned as `pid`. `onListener` receives the filter's
 * listener before "go" (the gate must watch it before the program's first exec).
 */
export async function handshake(
  channel: LaunchChannel,
  pid: number,
  spec: LaunchSpec,
  onListener: (fd: number, report: LaunchReady) => void,
  onTerminal?: (fd: number, tty: string) => void,
): Promise<Launched> {
  const program = spec.argv[0]!;
  try {
    channel.send(JSON.stringify(spec) + "\n");
    const first = parse(await channel.line(LAUNCH_TIMEOUT_MS));
    if (!first || first.ready !== true) {
      throw launchError(first as LaunchFailed | undefined, program);
    }
    let listener: number | undefined;
    let terminal: number | undefined;
    if (first.listener >= 0) {
      listener = takeFd(pid, first.listener);
      onListener(listener, first);
    }
    // Before "go": the launcher's copy of the master closes at its exec.
    if (first.terminal && "fd" in first.terminal) {
      terminal = takeFd(pid, first.terminal.fd);
      if (onTerminal) onTerminal(terminal, first.terminal.tty);
      else sys().close(terminal);
    }
    channel.send("go\n");
    // EOF means execve succeeded (fd 3 closed on exec); a line means it failed. No deadline
    // here: the exec may wait for an operator's approval (confirm at exec), and a launcher that
    // dies closes the socket too.
    const after = parse(await channel.line(MAX_TIMER_MS));
    if (after !== undefined) throw launchError(after as LaunchFailed, program);
    if (!channel.eof) throw launchError(undefined, program);
    return { listener, terminal, report: first };
  } finally {
    channel.close();
  }
}

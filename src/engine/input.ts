/**
 * Is the program in the foreground of a terminal waiting for the user to type?
 *
 * On Linux the kernel answers exactly: a process of the terminal's foreground group blocked in
 * `read()` on the terminal is waiting for input (`/proc/<pid>/syscall`, read through libc).
 * Programs that wait with poll/select (readline, REPLs, editors) are reported when their stdin
 * is the terminal and they left an unfinished line (a prompt) — a kernel fact plus a text hint.
 * Where /proc cannot tell, a text heuristic on the unfinished line is the fallback.
 */
import { currentSyscall, descendantsOf, procStat, readLink } from "../pty/mod.ts";
import type { Terminal } from "./session.ts";
import type { Job } from "./job.ts";
import { readsCommands } from "./readers.ts";

const ARCH = Deno.build.arch;
/** read, readv */
const READ_SYSCALLS = ARCH === "aarch64" ? new Set([63, 65]) : new Set([0, 19]);
/** poll, select, pselect6, ppoll, epoll_wait, epoll_pwait (+ epoll_pwait2) */
const WAIT_SYSCALLS = ARCH === "aarch64"
  ? new Set([72, 73, 22, 441])
  : new Set([7, 23, 270, 271, 232, 281, 441]);

const PROMPT_HINT =
  /(password|passphrase|passcode|pin|otp|token|username|login)[^\n]*[:?]\s*$|[?:>#$\]]\s*$|\[[yY]\/[nN]\]\s*$|\([yY]es\/[nN]o\)\s*$/i;

export interface InputState {
  awaiting: boolean;
  source: "kernel" | "heuristic";
  /** The process reading the terminal, when known (its command name decides whether a line
   * written to it is a command for the policy: shells and interpreters). */
  reader?: { pid: number; comm: string };
}

/**
 * Checks the foreground group of `pty`. `root` is the process the job runs under (the session
 * shell, or the one-shot program); `pending` is the unfinished last line of output.
 */
export function detectInput(pty: Terminal, root: number, pending: string): InputState {
  // A terminal on a server: the kernel there cannot be asked.
  if (pty.remote) return { awaiting: PROMPT_HINT.test(pending), source: "heuristic" };
  const fg = pty.foregroundPgid();
  const tty = pty.ttyPath;
  if (fg === undefined) return { awaiting: false, source: "kernel" };
  const members = [root, ...descendantsOf(root)].filter((p) => procStat(p)?.pgrp === fg);
  let procReadable = false;
  for (const pid of members) {
    const sc = currentSyscall(pid);
    if (sc === undefined) continue;
    procReadable = true;
    if (READ_SYSCALLS.has(sc.nr)) {
      const target = readLink(`/proc/${pid}/fd/${sc.arg0}`);
      if (target === tty || target === "/dev/tty") {
        return {
          awaiting: true,
          source: "kernel",
          reader: { pid, comm: procStat(pid)?.comm ?? "?" },
        };
      }
    } else if (WAIT_SYSCALLS.has(sc.nr) && PROMPT_HINT.test(pending)) {
      const stdin = readLink(`/proc/${pid}/fd/0`);
      const st = procStat(pid);
      if (stdin === tty && st?.state === "S") {
        return { awaiting: true, source: "heuristic", reader: { pid, comm: st.comm } };
      }
    }
  }
  if (procReadable || members.length === 0) return { awaiting: false, source: "kernel" };
  return { awaiting: PROMPT_HINT.test(pending), source: "heuristic" };
}

/** First check after output went quiet; then backing off while nothing moves. */
export const INPUT_CHECK_FIRST_MS = 25;
/** Looks again, this far apart, before a reader without prompt text is awaiting input. */
const EMPTY_PROMPT_LOOKS = 3;
const EMPTY_PROMPT_RETRY_MS = 10;
export const INPUT_CHECK_MAX_MS = 1000;

/**
 * Runs `detectInput` for the running job of one PTY: soon after output goes quiet or input is
 * written, then backing off (25 ms → 1 s) while the job keeps running silently. One timer per
 * PTY at most; `stop()` clears it.
 */
export class InputWatcher {
  #timer: ReturnType<typeof setTimeout> | undefined;
  #delay = INPUT_CHECK_FIRST_MS;
  /** Looks in a row that found a reader but no prompt text yet (see EMPTY_PROMPT_LOOKS). */
  #emptyLooks = 0;
  #pty: Terminal;
  #root: number;
  #current: () => Job | undefined;

  #rootIsHost: boolean;

  /**
   * `current` returns the job to watch, or undefined when nothing should be checked now.
   * `rootIsHost`: the root is the session's own shell, so its reading (the `read` builtin) is a
   * prompt of the job, not a command line; only a program the job started counts as a reader.
   */
  constructor(pty: Terminal, root: number, current: () => Job | undefined, rootIsHost = false) {
    this.#pty = pty;
    this.#root = root;
    this.#current = current;
    this.#rootIsHost = rootIsHost;
  }

  /** Output arrived or input was written: check again soon. */
  poke(): void {
    this.#schedule(INPUT_CHECK_FIRST_MS);
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #schedule(delay: number): void {
    clearTimeout(this.#timer);
    this.#delay = delay;
    this.#timer = setTimeout(() => this.#check(), delay);
  }

  #check(): void {
    this.#timer = undefined;
    const job = this.#current();
    if (!job || job.final || job.status === "awaiting_input") return;
    const pending = job.pendingText();
    const st = detectInput(this.#pty, this.#root, pending);
    const who = st.reader && !(this.#rootIsHost && st.reader.pid === this.#root)
      ? st.reader
      : undefined;
    if (st.awaiting && pending === "" && this.#emptyLooks < EMPTY_PROMPT_LOOKS) {
      // A reader, and no text: the prompt it printed may still be in the terminal, unread by
      // the daemon (a loaded machine). Look again a little later before saying there is none.
      this.#emptyLooks++;
      this.#schedule(EMPTY_PROMPT_RETRY_MS);
      return;
    }
    this.#emptyLooks = 0;
    if (st.awaiting) {
      job.setAwaitingInput(
        pending,
        st.source,
        who?.comm,
        who ? readsCommands(who.pid, who.comm) : false,
      );
    } else this.#schedule(Math.min(this.#delay * 2, INPUT_CHECK_MAX_MS));
  }
}

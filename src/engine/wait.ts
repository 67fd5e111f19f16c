/**
 * Waiting on a job without polling: resolves on the first of exit, prompt (awaiting input), a
 * regex match in new output, an idle period, or the deadline. Progress ticks are reported for
 * clients that asked for them. A wait deadline never affects the job.
 */
import { decodeCursor, encodeCursor } from "../output/mod.ts";
import { type Clock, compileRegex, type LinearRegex } from "../shared/mod.ts";
import type { Job } from "./job.ts";

export type Matched = "exit" | "pattern" | "prompt" | "idle" | "timeout";

export interface WaitConditions {
  exit?: boolean;
  prompt?: boolean;
  pattern?: LinearRegex;
  idleMs?: number;
}

export interface WaitOptions {
  timeoutMs: number;
  /** Byte offset from which output is searched for the pattern. */
  fromOffset: number;
  clock: Clock;
  /** Called about once a second while waiting. */
  onProgress?: (elapsedMs: number, totalMs: number) => void;
  progressEveryMs?: number;
  signal?: AbortSignal;
}

/** Characters kept from earlier text so a match may straddle two arrivals. */
const OVERLAP = 1024;
/** Most bytes searched per change (bounds regex work on floods; older text is skipped). */
const SCAN_WINDOW = 256 * 1024;
/**
 * Most regex VM steps one change may cost (text × program size): the window shrinks for large
 * programs, so no wait check blocks the daemon for more than a few tens of milliseconds.
 */
export const SCAN_STEPS = 16_000_000;
/** Largest program an agent's pattern may compile to (see src/shared/regex.ts). */
export const PATTERN_PROGRAM_LIMIT = 2000;

/**
 * Compiles an agent's pattern with the linear-time engine (multiline, JavaScript syntax without
 * backreferences or lookaround): no pattern can make a wait backtrack. A bad or unsupported one
 * is INVALID_ARGUMENT naming the construct.
 */
export function compilePattern(source: string): LinearRegex {
  return compileRegex(source, {
    flags: "m",
    label: "until.pattern",
    maxProgram: PATTERN_PROGRAM_LIMIT,
  });
}

/** Characters of new text one check may search with `re` (SCAN_STEPS / program size). */
export function scanWindow(re: LinearRegex): number {
  return Math.max(OVERLAP * 2, Math.min(SCAN_WINDOW, Math.floor(SCAN_STEPS / re.programSize)));
}

export function waitForJob(
  job: Job,
  until: WaitConditions,
  options: WaitOptions,
): Promise<{ matched: Matched; match?: string }> {
  const { clock } = options;
  const started = clock.mono();
  let scanned = Math.max(options.fromOffset, job.buffer.startOffset);
  let carry = "";

  const window = until.pattern ? scanWindow(until.pattern) : SCAN_WINDOW;
  const scan = (): string | undefined => {
    const re = until.pattern;
    if (!re) return undefined;
    const total = job.buffer.totalBytes;
    if (total - scanned > window) {
      scanned = total - window;
      carry = "";
    }
    scanned = Math.max(scanned, job.buffer.startOffset);
    let fresh = "";
    while (scanned < total) {
      const page = job.buffer.read(encodeCursor(scanned), 65536);
      if (page.output === "" && !page.gap) break;
      fresh += page.output;
      scanned = decodeCursor(page.nextCursor);
    }
    const text = carry + fresh;
    carry = text.slice(-OVERLAP);
    const m = re.exec(text) ?? re.exec(carry + job.pendingText().slice(0, window));
    return m ? m.match : undefined;
  };

  const check = (): { matched: Matched; match?: string } | undefined => {
    const m = scan();
    if (m !== undefined) return { matched: "pattern", match: m };
    if (until.prompt && job.status === "awaiting_input" && !job.autoAnswering) {
      return { matched: "prompt" };
    }
    if (job.final) return { matched: "exit" };
    return undefined;
  };

  const first = check();
  if (first) return Promise.resolve(first);

  return new Promise((resolve) => {
    let idleTimer: ReturnType<typeof setTimeout> | undefined;
    const finish = (r: { matched: Matched; match?: string }) => {
      unsubscribe();
      clearTimeout(deadline);
      clearTimeout(idleTimer);
      clearInterval(progress);
      options.signal?.removeEventListener("abort", onAbort);
      resolve(r);
    };
    const armIdle = () => {
      if (until.idleMs === undefined) return;
      clearTimeout(idleTimer);
      const quietFor = clock.mono() - job.lastOutputMono;
      idleTimer = setTimeout(() => {
        if (clock.mono() - job.lastOutputMono >= until.idleMs! - 1) finish({ matched: "idle" });
        else armIdle();
      }, Math.max(0, until.idleMs - quietFor));
    };
    const unsubscribe = job.onChange(() => {
      const r = check();
      if (r) finish(r);
      else armIdle();
    });
    const deadline = setTimeout(() => finish({ matched: "timeout" }), options.timeoutMs);
    const progress = options.onProgress
      ? setInterval(
        () => options.onProgress!(Math.round(clock.mono() - started), options.timeoutMs),
        options.progressEveryMs ?? 1000,
      )
      : undefined;
    const onAbort = () => finish({ matched: "timeout" });
    options.signal?.addEventListener("abort", onAbort, { once: true });
    armIdle();
  });
}

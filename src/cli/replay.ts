/**
 * `termada replay SESSION` and `termada export SESSION`: a session's recording (asciicast v2,
 * every rotated part joined by the daemon, `GET /api/sessions/:id/recording`) played back in the
 * operator's terminal with its timing, or saved as a `.cast` file that `asciinema play` and the
 * asciinema web player accept. Both stream: neither holds the whole recording in memory.
 */
import { basename, dirname, join, resolve } from "node:path";
import { TermadaError } from "../shared/mod.ts";
import { RECORDING_HEADERS } from "../wire/mod.ts";
import { strictArgs } from "./_args.ts";
import { type OperatorContext, paths, request } from "./operator.ts";

const REPLAY_USAGE = "Usage: termada replay SESSION [--speed X] [--max-idle S] [--config FILE]\n" +
  "Plays a session's recording (live or closed) in this terminal with its recorded timing:\n" +
  "--speed multiplies it (default 1), --max-idle caps each pause (default 2 s). q or Ctrl-C\n" +
  "stops. When stdout is not a terminal the output is written at once (like asciinema cat).\n";
const EXPORT_USAGE =
  "Usage: termada export SESSION [--out FILE | --out -] [--force] [--json] [--config FILE]\n" +
  "Saves a session's recording as one asciicast v2 file (default ./SESSION.cast; - for stdout),\n" +
  "every rotated part joined; an existing file is kept unless --force. Play it with\n" +
  "termada replay, asciinema play FILE, or the asciinema web player.\n";

/** Longest cast line accepted (the daemon writes far shorter ones). */
const MAX_LINE_CHARS = 64 * 1024 * 1024;
/** Output gathered into one write when events are due at once. */
const WRITE_BATCH_CHARS = 64 * 1024;
/** Waits shorter than this are not slept: the events go out with the next ones. */
const MIN_SLEEP_MS = 2;
const SESSION_ID = /^[A-Za-z0-9_.:-]{1,64}$/;

function sessionArg(command: string, positionals: string[]): string {
  const id = positionals[0];
  if (id === undefined) {
    throw new TermadaError("INVALID_ARGUMENT", `Missing SESSION (termada ${command} --help)`);
  }
  if (!SESSION_ID.test(id)) {
    throw new TermadaError("INVALID_ARGUMENT", `"${id.slice(0, 80)}" is not a session id`);
  }
  return id;
}

function positiveNumber(name: string, raw: string | undefined, fallback: number, max: number) {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || n > max) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `Invalid ${name} "${raw}": it must be a number above 0 and at most ${max}`,
    );
  }
  return n;
}

const recordingPath = (id: string) => `/sessions/${encodeURIComponent(id)}/recording`;

// ── replay ──────────────────────────────────────────────────────────────────

/** Time and waiting for `playCast` (the system's by default; tests pass a manual one). */
export interface PlayClock {
  now(): number;
  /** Resolves after `ms`, or early once `signal` aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

export const SYSTEM_PLAY_CLOCK: PlayClock = {
  now: () => performance.now(),
  sleep: (ms, signal) =>
    new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener("abort", done, { once: true });
    }),
};

export interface PlayOptions {
  /** Honour the recorded timing (a terminal); false writes everything at once. */
  timed: boolean;
  /** Factor on the recorded timing (2 = twice as fast). */
  speed: number;
  /** Longest pause played, in recorded seconds (before `speed`). */
  maxIdle: number;
  write(text: string): Promise<void>;
  /** Stops playback (q, Ctrl-C); what was written stays written. */
  signal?: AbortSignal;
  clock?: PlayClock;
}

export interface PlayResult {
  width: number;
  height: number;
  /** Output events written. */
  events: number;
  /** Played time in ms (as scheduled: recorded time, capped and scaled). */
  playedMs: number;
  stopped: boolean;
}

/**
 * Plays the lines of an asciicast v2 (header first): `"o"` events are written, `"r"` (resize)
 * and `"m"` (marker) events are skipped, since the operator's terminal keeps its own size. Due
 * events are written together; waits follow the schedule from the start, so slow writes do not
 * add up. A line that is not a JSON event is an error naming its number.
 */
export async function playCast(lines: AsyncIterable<string>, o: PlayOptions): Promise<PlayResult> {
  const clock = o.clock ?? SYSTEM_PLAY_CLOCK;
  const signal = o.signal ?? new AbortController().signal;
  const iter = lines[Symbol.asyncIterator]();
  const first = await iter.next();
  const header = first.done ? undefined : parseJson(first.value);
  const h = header as { version?: unknown; width?: unknown; height?: unknown } | undefined;
  if (
    typeof h !== "object" || h === null || h.version !== 2 || typeof h.width !== "number" ||
    typeof h.height !== "number"
  ) {
    await iter.return?.();
    throw new TermadaError("INTERNAL", "The daemon did not send an asciicast v2 recording");
  }
  const start = clock.now();
  let pending = "";
  let events = 0;
  let prev = 0;
  let played = 0;
  let lineNo = 1;
  const flush = async () => {
    if (pending === "") return;
    const text = pending;
    pending = "";
    await o.write(text);
  };
  try {
    while (!signal.aborted) {
      const next = await iter.next();
      if (next.done) break;
      lineNo++;
      if (next.value === "") continue;
      const ev = parseJson(next.value);
      if (!Array.isArray(ev) || typeof ev[0] !== "number" || typeof ev[1] !== "string") {
        throw new TermadaError("INTERNAL", `Line ${lineNo} of the recording is not an event`);
      }
      const [t, code, data] = ev as [number, string, unknown];
      played += Math.min(Math.max(0, t - prev), o.maxIdle) * 1000 / o.speed;
      prev = Math.max(prev, t);
      if (code !== "o" || typeof data !== "string") continue;
      if (o.timed) {
        const wait = start + played - clock.now();
        if (wait >= MIN_SLEEP_MS) {
          await flush();
          await clock.sleep(wait, signal);
          if (signal.aborted) break;
        }
      }
      pending += data;
      events++;
      if (pending.length >= WRITE_BATCH_CHARS) await flush();
    }
    await flush();
  } finally {
    // Stopped early: the rest of the stream is not wanted (this cancels the response body).
    await iter.return?.();
  }
  return { width: h.width, height: h.height, events, playedMs: played, stopped: signal.aborted };
}

function parseJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/** The lines of a UTF-8 byte stream (without their `\n`); cancelling the iteration cancels it. */
export async function* castLines(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let nl: number;
      let start = 0;
      while ((nl = buf.indexOf("\n", start)) >= 0) {
        yield buf.slice(start, nl);
        start = nl + 1;
      }
      buf = buf.slice(start);
      if (buf.length > MAX_LINE_CHARS) {
        throw new TermadaError("INTERNAL", "The recording has a line longer than 64 MiB");
      }
    }
    if (buf !== "") yield buf;
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** What replay needs from the process (tests give their own). */
export interface ReplayIo {
  /** stdout is a terminal: play with timing. */
  stdoutTty: boolean;
  /** stdin is a terminal: raw mode, and q / Ctrl-C stop. */
  stdinTty: boolean;
  clock?: PlayClock;
}

function processIo(): ReplayIo {
  return { stdoutTty: Deno.stdout.isTerminal(), stdinTty: Deno.stdin.isTerminal() };
}

/** `termada replay SESSION [--speed X] [--max-idle S]`. */
export async function replayCommand(
  args: string[],
  ctx: OperatorContext,
  io: ReplayIo = processIo(),
): Promise<number> {
  const { values, positionals } = strictArgs("replay", args, {
    speed: { type: "string" },
    "max-idle": { type: "string" },
    config: { type: "string" },
    help: { type: "boolean", short: "h" },
  }, 1);
  if (values.help) {
    await ctx.out(REPLAY_USAGE);
    return 0;
  }
  const id = sessionArg("replay", positionals);
  const speed = positiveNumber("--speed", values.speed, 1, 1000);
  const maxIdle = positiveNumber("--max-idle", values["max-idle"], 2, 86_400);
  const p = await paths(values.config);
  const stop = new AbortController();
  const quit = () => stop.abort();
  const signals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
  const raw = io.stdoutTty && io.stdinTty;
  let keys: ReadableStreamDefaultReader<Uint8Array> | undefined;
  let keyTask: Promise<void> | undefined;
  const result = await request(p, "GET", recordingPath(id), undefined, async (r) => {
    if (!r.body) throw new TermadaError("INTERNAL", "The daemon sent an empty recording");
    try {
      if (io.stdoutTty) { for (const s of signals) Deno.addSignalListener(s, quit); }
      if (raw) {
        // Raw mode: keys arrive one by one and Ctrl-C is a key (ISIG off), handled below.
        Deno.stdin.setRaw(true);
        keys = Deno.stdin.readable.getReader();
        keyTask = readStopKeys(keys, stop);
      }
      return await playCast(castLines(r.body), {
        timed: io.stdoutTty,
        speed,
        maxIdle,
        write: (t) => ctx.out(t),
        signal: stop.signal,
        ...(io.clock ? { clock: io.clock } : {}),
      });
    } finally {
      if (io.stdoutTty) { for (const s of signals) Deno.removeSignalListener(s, quit); }
      if (raw) {
        // The terminal first: the operator gets a working shell back whatever happened.
        try {
          Deno.stdin.setRaw(false);
        } finally {
          stop.abort();
          await keys?.cancel().catch(() => {});
          await keyTask?.catch(() => {});
          // Attributes the recording may have left on (colours, a hidden cursor).
          await ctx.out("\x1b[0m\x1b[?25h").catch(() => {});
        }
      }
    }
  });
  if (result.stopped && io.stdoutTty) await ctx.out("\r\n");
  return 0;
}

/** Aborts `stop` on q, Q, Ctrl-C or Ctrl-D (or when stdin ends). */
async function readStopKeys(
  keys: ReadableStreamDefaultReader<Uint8Array>,
  stop: AbortController,
): Promise<void> {
  while (!stop.signal.aborted) {
    const { value, done } = await keys.read();
    if (done) return; // stdin closed: keep playing, nothing can stop it but a signal
    if (value.some((b) => b === 0x71 || b === 0x51 || b === 0x03 || b === 0x04)) stop.abort();
  }
}

// ── export ──────────────────────────────────────────────────────────────────

interface ExportResult {
  session_id: string;
  path: string;
  bytes: number;
  parts: number;
  omitted_bytes: number;
  live: boolean;
}

/** `termada export SESSION [--out FILE|-] [--force] [--json]`. */
export async function exportCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values, positionals } = strictArgs("export", args, {
    out: { type: "string", short: "o" },
    force: { type: "boolean" },
    json: { type: "boolean" },
    config: { type: "string" },
    help: { type: "boolean", short: "h" },
  }, 1);
  if (values.help) {
    await ctx.out(EXPORT_USAGE);
    return 0;
  }
  const id = sessionArg("export", positionals);
  if (values.out === "-" && values.json) {
    throw new TermadaError("INVALID_ARGUMENT", "--json needs a file: the cast goes to stdout");
  }
  const p = await paths(values.config);
  if (values.out === "-") {
    await request(p, "GET", recordingPath(id), undefined, async (r) => {
      const dec = new TextDecoder();
      for await (const chunk of r.body ?? []) await ctx.out(dec.decode(chunk, { stream: true }));
      const tail = dec.decode();
      if (tail) await ctx.out(tail);
    });
    return 0;
  }
  const target = resolve(values.out ?? `${id}.cast`);
  const force = values.force === true;
  // Before the download, so a refusal is quick; the final link below decides for real.
  await refuseExisting(target, force);
  const result = await request(p, "GET", recordingPath(id), undefined, async (r) => {
    const bytes = await writeAtomically(target, r.body, force);
    return {
      session_id: id,
      path: target,
      bytes,
      parts: Number(r.headers.get(RECORDING_HEADERS.parts) ?? 0),
      omitted_bytes: Number(r.headers.get(RECORDING_HEADERS.omittedBytes) ?? 0),
      live: r.headers.get(RECORDING_HEADERS.live) === "true",
    } satisfies ExportResult;
  });
  if (values.json) await ctx.out(JSON.stringify(result, null, 2) + "\n");
  else {
    const notes = [
      `${result.bytes} bytes`,
      `${result.parts} part${result.parts === 1 ? "" : "s"}`,
      ...(result.live ? ["the session is still running"] : []),
      ...(result.omitted_bytes > 0 ? [`${result.omitted_bytes} older bytes left out`] : []),
    ];
    await ctx.out(`Wrote ${values.out ?? `${id}.cast`} (${notes.join(", ")})\n`);
  }
  return 0;
}

async function refuseExisting(target: string, force: boolean): Promise<void> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(target);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw err;
  }
  if (info.isDirectory) {
    throw new TermadaError("INVALID_ARGUMENT", `Cannot export to "${target}": it is a directory`, {
      hint: "Name a file with --out",
    });
  }
  if (!force) throw exists(target);
}

function exists(target: string): TermadaError {
  return new TermadaError("INVALID_ARGUMENT", `Cannot export to "${target}": it exists`, {
    hint: "Pass --force to replace it, or name another file with --out",
  });
}

/**
 * Streams `body` into a temp file beside `target` (0600, synced), then puts it in place: a
 * rename with `force`, else a hard link, which fails if `target` appeared meanwhile (no
 * overwrite, even in a race). The temp file never outlives the call. Returns the bytes written.
 */
async function writeAtomically(
  target: string,
  body: ReadableStream<Uint8Array> | null,
  force: boolean,
): Promise<number> {
  const tmp = join(
    dirname(target),
    `.${basename(target)}.termada-${crypto.randomUUID().slice(0, 8)}.tmp`,
  );
  let bytes = 0;
  const file = await Deno.open(tmp, { write: true, createNew: true, mode: 0o600 });
  try {
    try {
      for await (const chunk of body ?? []) {
        let off = 0;
        while (off < chunk.length) off += await file.write(chunk.subarray(off));
        bytes += chunk.length;
      }
      await file.sync();
    } finally {
      file.close();
    }
    if (force) await Deno.rename(tmp, target);
    else {
      try {
        await Deno.link(tmp, target);
      } catch (err) {
        if (err instanceof Deno.errors.AlreadyExists) throw exists(target);
        // No hard links on this filesystem: check, then rename (a small race, no better way).
        await refuseExisting(target, false);
        await Deno.rename(tmp, target);
      }
    }
  } finally {
    await Deno.remove(tmp).catch(() => {/* renamed into place, or never created */});
  }
  return bytes;
}

/**
 * The stderr logger. stdout belongs to MCP in `--stdio` mode, so nothing here ever writes to it.
 * One JSON-free line per event: `time level scope message key=value…`.
 */
export type LogLevel = "debug" | "info" | "warn" | "error";

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };
const encoder = new TextEncoder();

let threshold: number = ORDER.info;
let sink: { writeSync(p: Uint8Array): number } = Deno.stderr;

/** Sends log lines to a file (append) instead of stderr: the detached daemon's log. */
export function setLogFile(path: string): void {
  sink = Deno.openSync(path, { append: true, create: true, mode: 0o600 });
}

/** Sets the lowest level printed (default `info`). */
export function setLogLevel(level: LogLevel): void {
  threshold = ORDER[level];
}

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

function format(v: unknown): string {
  if (v instanceof Error) return JSON.stringify(v.message);
  if (typeof v === "string") return /^[\w./:@-]*$/.test(v) && v !== "" ? v : JSON.stringify(v);
  return JSON.stringify(v) ?? String(v);
}

/** A logger for one scope (usually the folder name). */
export function logger(scope: string): Logger {
  const emit = (level: LogLevel, message: string, fields?: Record<string, unknown>) => {
    if (ORDER[level] < threshold) return;
    let line = `${new Date().toISOString()} ${level.toUpperCase()} ${scope} ${message}`;
    if (fields) {
      for (const [k, v] of Object.entries(fields)) line += ` ${k}=${format(v)}`;
    }
    try {
      sink.writeSync(encoder.encode(line + "\n"));
    } catch {
      // stderr closed (daemon detached from a dead terminal): logging must never take us down.
    }
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
  };
}

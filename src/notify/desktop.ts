/**
 * Desktop notifications through `notify-send` (libnotify), found on PATH. The title and body are
 * separate argv entries after `--` (never a shell, so nothing in them is interpreted), the body's
 * markup characters are escaped, the environment is cut down to what a notification needs, and
 * the process is killed when it takes longer than the timeout.
 */
import { realTimers, type Timers } from "./_timers.ts";
import type { Message } from "./message.ts";
import { DeliveryError, type Sink } from "./sink.ts";

export type Urgency = "auto" | "low" | "normal" | "critical";

/** Variables passed to notify-send: how it finds the session bus and the display. */
const PASSED_ENV = [
  "PATH",
  "HOME",
  "LANG",
  "LC_ALL",
  "DISPLAY",
  "WAYLAND_DISPLAY",
  "DBUS_SESSION_BUS_ADDRESS",
  "XDG_RUNTIME_DIR",
] as const;

export interface DesktopOptions {
  /** The `notify-send` executable (absolute). */
  command: string;
  /** `auto` (default): critical for approvals and stop-all, normal otherwise. */
  urgency?: Urgency;
  /** notify-send is killed after this long (default 5 s). */
  timeoutMs?: number;
  /** Environment given to notify-send (default: PASSED_ENV taken from the daemon's). */
  env?: Record<string, string>;
  timers?: Timers;
}

/** The first executable `name` in the directories of `path` (a PATH value), or undefined. */
export function findOnPath(name: string, path: string): string | undefined {
  for (const dir of path.split(":")) {
    if (!dir.startsWith("/")) continue; // a relative PATH entry depends on the daemon's cwd
    const candidate = `${dir.replace(/\/+$/, "")}/${name}`;
    try {
      const info = Deno.statSync(candidate);
      if (info.isFile && ((info.mode ?? 0) & 0o111) !== 0) return candidate;
    } catch {
      // not in this directory: try the next
    }
  }
  return undefined;
}

export class DesktopSink implements Sink {
  readonly name = "desktop";
  readonly #command: string;
  readonly #urgency: Urgency;
  readonly #timeoutMs: number;
  readonly #env: Record<string, string>;
  readonly #timers: Timers;

  constructor(options: DesktopOptions) {
    if (!options.command.startsWith("/")) throw new TypeError("notify-send must be absolute");
    this.#command = options.command;
    this.#urgency = options.urgency ?? "auto";
    this.#timeoutMs = options.timeoutMs ?? 5000;
    this.#env = options.env ?? passedEnv();
    this.#timers = options.timers ?? realTimers;
  }

  /** The argv after the program name (exposed for tests and docs). */
  argsFor(message: Message): string[] {
    const urgency = this.#urgency === "auto"
      ? (message.urgent ? "critical" : "normal")
      : this.#urgency;
    return [
      "--app-name=Termada",
      `--urgency=${urgency}`,
      "--",
      `Termada: ${message.title}`,
      escapeMarkup(message.body),
    ];
  }

  async send(message: Message, signal: AbortSignal): Promise<void> {
    if (signal.aborted) throw new DeliveryError("notify-send: cancelled", { retriable: false });
    let child: Deno.ChildProcess;
    try {
      child = new Deno.Command(this.#command, {
        args: this.argsFor(message),
        clearEnv: true,
        env: this.#env,
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).spawn();
    } catch (err) {
      throw new DeliveryError(
        `Cannot run notify-send: ${err instanceof Error ? err.message : String(err)}`,
        { retriable: false },
      );
    }
    let timedOut = false;
    const kill = () => {
      try {
        child.kill("SIGKILL");
      } catch {
        // already exited
      }
    };
    const timer = this.#timers.setTimeout(() => {
      timedOut = true;
      kill();
    }, this.#timeoutMs);
    signal.addEventListener("abort", kill, { once: true });
    try {
      const status = await child.status;
      if (timedOut) {
        throw new DeliveryError(`notify-send took longer than ${this.#timeoutMs} ms: killed`, {
          retriable: false,
        });
      }
      if (!status.success) {
        throw new DeliveryError(
          `notify-send failed (exit ${status.code}${status.signal ? `, ${status.signal}` : ""})`,
          { retriable: false },
        );
      }
    } finally {
      this.#timers.clearTimeout(timer);
      signal.removeEventListener("abort", kill);
    }
  }
}

/** The notification spec lets servers read `<b>`, `<a href>`… in the body: show them as text. */
export function escapeMarkup(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function passedEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of PASSED_ENV) {
    const v = Deno.env.get(k);
    if (v !== undefined) env[k] = v;
  }
  return env;
}

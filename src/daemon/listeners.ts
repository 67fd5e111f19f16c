/**
 * The daemon's listeners: loopback TCP (dashboard, HTTP API, MCP over HTTP) and the Unix socket
 * (0600: the shim, the CLI). A failed bind is an immediate, clear error — except the default TCP
 * port, which is a preference: when another program (or another user's daemon) holds it, the
 * daemon takes a free port and says which (daemon.json, the banner, `termada dashboard`).
 */
import { parseBind } from "../config/mod.ts";
import { logger, TermadaError } from "../shared/mod.ts";

const log = logger("daemon");

/** The port tried first when the config names none. */
export const PREFERRED_PORT = 7717;

export interface TcpBind {
  hostname: string;
  port: number;
  /** True when the port was asked for explicitly (--bind, server.bind): a clash is fatal. */
  explicit: boolean;
}

/** Files container runtimes create: Docker, and Podman/Buildah. */
const CONTAINER_MARKERS = ["/.dockerenv", "/run/.containerenv"];

/**
 * `0.0.0.0:PORT`, accepted only inside a container image that asks for it
 * (`TERMADA_CONTAINER=1`, set by our Dockerfile) and only when a container runtime's marker file
 * is there: all interfaces of the container's own network namespace, which `docker run -p
 * 127.0.0.1:7717:7717` publishes on the host's loopback alone. Anywhere else it is refused like
 * any non-loopback address (a variable alone cannot open the daemon to the network).
 */
export function containerBind(
  value: string,
  env: Record<string, string | undefined>,
  markers: readonly string[] = CONTAINER_MARKERS,
): TcpBind | undefined {
  const m = /^0\.0\.0\.0:(0|[1-9][0-9]{0,4})$/.exec(value);
  if (!m || Number(m[1]) > 65535 || env.TERMADA_CONTAINER !== "1") return undefined;
  const marked = markers.some((f) => {
    try {
      return Deno.statSync(f).isFile;
    } catch {
      return false; // not this runtime
    }
  });
  return marked ? { hostname: "0.0.0.0", port: Number(m[1]), explicit: true } : undefined;
}

/** `--bind` / `server.bind`, or the default: 127.0.0.1:7717 if free, else any free port. */
export function tcpBind(value: string | null, env: Record<string, string | undefined>): TcpBind {
  if (value === null) return { hostname: "127.0.0.1", port: PREFERRED_PORT, explicit: false };
  const inContainer = value.startsWith("0.0.0.0:") ? containerBind(value, env) : undefined;
  if (inContainer) return inContainer;
  const b = parseBind(value);
  if (!b) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `Cannot listen on "${value}": not a loopback HOST:PORT`,
      { hint: "Use 127.0.0.1:PORT (or [::1]:PORT); Termada never listens beyond this machine" },
    );
  }
  return { ...b, explicit: true };
}

type Handler = (req: Request) => Response | Promise<Response>;

/** Listens on loopback TCP; resolves with the server and the port it got. */
export async function listenTcp(
  bind: TcpBind,
  signal: AbortSignal,
  handler: Handler,
): Promise<{ server: Deno.HttpServer; port: number }> {
  try {
    return await serveTcp(bind.hostname, bind.port, signal, handler);
  } catch (err) {
    if (!(err instanceof Deno.errors.AddrInUse) || bind.explicit) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot listen on ${bind.hostname}:${bind.port}: ${(err as Error).message}`,
        {
          cause: err,
          hint: err instanceof Deno.errors.AddrInUse
            ? "Another program uses that port: pick another with --bind or server.bind (port 0 = any free port)"
            : "Check --bind / server.bind",
        },
      );
    }
    log.warn("the default port is taken: listening on a free one", {
      wanted: `${bind.hostname}:${bind.port}`,
    });
    return await serveTcp(bind.hostname, 0, signal, handler);
  }
}

async function serveTcp(
  hostname: string,
  port: number,
  signal: AbortSignal,
  handler: Handler,
): Promise<{ server: Deno.HttpServer; port: number }> {
  const ready = Promise.withResolvers<number>();
  const server = Deno.serve({
    hostname,
    port,
    signal,
    onListen: ({ port }) => ready.resolve(port),
  }, handler);
  return { server, port: await ready.promise };
}

/** Listens on the Unix socket (a stale one from a crash is replaced: we hold the lock). */
export async function listenUnix(
  path: string,
  signal: AbortSignal,
  handler: Handler,
): Promise<Deno.HttpServer> {
  try {
    Deno.removeSync(path);
  } catch {
    // no stale socket
  }
  const ready = Promise.withResolvers<void>();
  let server: Deno.HttpServer;
  try {
    server = Deno.serve({ path, signal, onListen: () => ready.resolve() }, handler);
  } catch (err) {
    throw new TermadaError(
      "INTERNAL",
      `Cannot listen on socket "${path}": ${(err as Error).message}`,
      { cause: err },
    );
  }
  await ready.promise;
  Deno.chmodSync(path, 0o600);
  return server;
}

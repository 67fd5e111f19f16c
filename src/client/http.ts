/** The daemon's HTTP Unix socket, for operator commands (the CLI). */

/** A fetch bound to the daemon's HTTP Unix socket. */
export function socketFetch(socketPath: string): {
  fetch: (url: string | URL, init?: RequestInit) => Promise<Response>;
  close: () => void;
} {
  const client = Deno.createHttpClient({ proxy: { transport: "unix", path: socketPath } });
  return {
    fetch: (url, init) => fetch(url, { ...init, client } as RequestInit),
    close: () => client.close(),
  };
}

/** True when a daemon answers on its HTTP socket. */
export async function daemonAlive(socketPath: string): Promise<boolean> {
  const s = socketFetch(socketPath);
  try {
    const r = await s.fetch("http://termada/healthz", { signal: AbortSignal.timeout(1000) });
    await r.body?.cancel();
    return r.ok;
  } catch {
    return false;
  } finally {
    s.close();
  }
}

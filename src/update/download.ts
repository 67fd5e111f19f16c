/**
 * Bounded HTTPS downloads. Every byte is counted as it arrives and the transfer is aborted past
 * `maxBytes`; a body shorter or longer than its Content-Length is an error, as is a redirect to
 * anything but HTTPS. The caller owns the `Deno.HttpClient` (and closes it).
 */
import { UpdateError } from "./error.ts";

export interface DownloadOptions {
  maxBytes: number;
  client?: Deno.HttpClient;
  /** The whole transfer, headers and body (default 120 s). */
  timeoutMs?: number;
  /** Resolve undefined on 404 instead of failing (an optional file such as SHA256SUMS.sig). */
  optional?: boolean;
}

const MAX_REDIRECTS = 5;

/** The HTTP client for release downloads: trusts the PEM CA bundle at `caFile` too, if given. */
export function releaseClient(caFile: string | undefined): Deno.HttpClient | undefined {
  if (!caFile) return undefined;
  let pem: string;
  try {
    pem = Deno.readTextFileSync(caFile);
  } catch (err) {
    throw new UpdateError(
      "DOWNLOAD_FAILED",
      `Cannot read the CA file "${caFile}" (TERMADA_CA_FILE)`,
      {
        cause: err,
      },
    );
  }
  return Deno.createHttpClient({ caCerts: [pem] });
}

export async function download(url: string, options: DownloadOptions): Promise<Uint8Array>;
export async function download(
  url: string,
  options: DownloadOptions & { optional: true },
): Promise<Uint8Array | undefined>;
export async function download(
  url: string,
  options: DownloadOptions,
): Promise<Uint8Array | undefined> {
  const signal = AbortSignal.timeout(options.timeoutMs ?? 120_000);
  let at = url;
  for (let hop = 0;; hop++) {
    if (!at.startsWith("https://")) {
      throw new UpdateError("DOWNLOAD_FAILED", `Refusing to download "${at}": not HTTPS`);
    }
    let r: Response;
    try {
      r = await fetch(at, { client: options.client, redirect: "manual", signal });
    } catch (err) {
      throw new UpdateError("DOWNLOAD_FAILED", `Cannot download "${at}": ${message(err)}`, {
        cause: err,
      });
    }
    if (r.status >= 300 && r.status < 400) {
      await r.body?.cancel();
      const loc = r.headers.get("location");
      if (!loc || hop >= MAX_REDIRECTS) {
        throw new UpdateError("DOWNLOAD_FAILED", `Cannot download "${url}": too many redirects`);
      }
      at = new URL(loc, at).href;
      continue;
    }
    if (r.status === 404) {
      await r.body?.cancel();
      if (options.optional) return undefined;
      throw new UpdateError("NOT_FOUND", `"${at}" does not exist (HTTP 404)`);
    }
    if (!r.ok || !r.body) {
      await r.body?.cancel();
      throw new UpdateError("DOWNLOAD_FAILED", `Cannot download "${at}": HTTP ${r.status}`);
    }
    return await readBounded(r, at, options.maxBytes);
  }
}

async function readBounded(r: Response, url: string, maxBytes: number): Promise<Uint8Array> {
  const header = r.headers.get("content-length");
  const declared = header === null ? undefined : Number(header);
  if (declared !== undefined && !(Number.isSafeInteger(declared) && declared >= 0)) {
    await r.body!.cancel();
    throw new UpdateError("DOWNLOAD_FAILED", `"${url}" sent a malformed Content-Length`);
  }
  if (declared !== undefined && declared > maxBytes) {
    await r.body!.cancel();
    throw new UpdateError("TOO_LARGE", `"${url}" is ${declared} bytes, more than ${maxBytes}`);
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = r.body!.getReader();
  try {
    for (;;) {
      let step: ReadableStreamReadResult<Uint8Array>;
      try {
        step = await reader.read();
      } catch (err) {
        throw new UpdateError(
          "TRUNCATED",
          `The download of "${url}" broke off after ${total} bytes: ${message(err)}`,
          { cause: err },
        );
      }
      if (step.done) break;
      total += step.value.byteLength;
      if (total > maxBytes) {
        throw new UpdateError("TOO_LARGE", `"${url}" is more than ${maxBytes} bytes`);
      }
      chunks.push(step.value);
    }
  } catch (err) {
    await reader.cancel().catch(() => {/* the stream already failed: nothing to release */});
    throw err;
  } finally {
    reader.releaseLock();
  }
  if (declared !== undefined && total !== declared) {
    throw new UpdateError(
      "TRUNCATED",
      `The download of "${url}" is ${total} bytes, its Content-Length said ${declared}`,
    );
  }
  const out = new Uint8Array(total);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.byteLength;
  }
  return out;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

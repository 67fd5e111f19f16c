/**
 * Server-sent events over `fetch` (EventSource cannot send an Authorization header): an
 * incremental parser and a reconnecting reader that resumes with `Last-Event-ID`.
 */

export interface SseMessage {
  id?: string;
  event: string;
  data: string;
}

/** Incremental SSE parser (text in, complete messages out). Comments and retry are ignored. */
export class SseParser {
  #buf = "";

  feed(text: string): SseMessage[] {
    this.#buf += text.replace(/\r\n?/g, "\n");
    const out: SseMessage[] = [];
    let sep: number;
    while ((sep = this.#buf.indexOf("\n\n")) >= 0) {
      const block = this.#buf.slice(0, sep);
      this.#buf = this.#buf.slice(sep + 2);
      let id: string | undefined;
      let event = "message";
      const data: string[] = [];
      let any = false;
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue;
        const i = line.indexOf(":");
        const key = i < 0 ? line : line.slice(0, i);
        const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
        if (key === "id") id = value;
        else if (key === "event") event = value;
        else if (key === "data") data.push(value);
        else continue;
        any = true;
      }
      if (any) out.push({ ...(id === undefined ? {} : { id }), event, data: data.join("\n") });
    }
    return out;
  }
}

export type StreamState = "connecting" | "live" | "reconnecting" | "offline" | "ended";

export interface StreamOptions {
  token: string;
  onMessage: (m: SseMessage) => void;
  onState?: (s: StreamState, detail?: string) => void;
  /** Initial Last-Event-ID (e.g. a cursor). */
  lastEventId?: string;
  /** The server refused our Last-Event-ID (400): we restart from the beginning after this. */
  onReset?: () => void;
  /** Stop for good on this event name (e.g. "end"). */
  endEvent?: string;
  /** First retry delay; doubles up to `maxDelayMs`. */
  minDelayMs?: number;
  maxDelayMs?: number;
}

/** Follows an SSE URL until `signal` aborts, reconnecting with back-off and Last-Event-ID. */
export async function followStream(
  url: string,
  options: StreamOptions,
  signal: AbortSignal,
): Promise<void> {
  let lastId = options.lastEventId;
  const min = options.minDelayMs ?? 500;
  const max = options.maxDelayMs ?? 10_000;
  let delay = min;
  let failures = 0;
  const state = (s: StreamState, d?: string) => options.onState?.(s, d);
  state("connecting");
  while (!signal.aborted) {
    try {
      const headers: Record<string, string> = {
        authorization: `Bearer ${options.token}`,
        accept: "text/event-stream",
      };
      if (lastId !== undefined) headers["last-event-id"] = lastId;
      const res = await fetch(url, { headers, signal, cache: "no-store" });
      if (res.status === 401 || res.status === 404) {
        await res.body?.cancel();
        state(res.status === 401 ? "offline" : "ended", `HTTP ${res.status}`);
        return;
      }
      if (res.status === 400 && lastId !== undefined) {
        await res.body?.cancel();
        lastId = undefined;
        options.onReset?.();
        continue;
      }
      if (!res.ok || !res.body) {
        await res.body?.cancel();
        throw new Error(`HTTP ${res.status}`);
      }
      state("live");
      failures = 0;
      delay = min;
      const parser = new SseParser();
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        for (const m of parser.feed(value)) {
          if (m.id !== undefined) lastId = m.id;
          if (options.endEvent !== undefined && m.event === options.endEvent) {
            await reader.cancel().catch(() => {});
            options.onMessage(m);
            state("ended");
            return;
          }
          options.onMessage(m);
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      failures++;
      state(failures >= 3 ? "offline" : "reconnecting", String(err));
    }
    if (signal.aborted) return;
    if (failures === 0) state("reconnecting");
    await sleep(delay, signal);
    delay = Math.min(max, delay * 2);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}

/** Decodes a base64 payload to bytes. */
export function fromBase64(b64: string): Uint8Array {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

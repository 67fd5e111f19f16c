/**
 * The operator's live streams, each with one owner of its lifecycle (start, keep-alive, abort,
 * backlog bound): the event feed (`/api/events`: SSE with Last-Event-ID resume over the bus's
 * bounded replay window, `resync` when the id fell out of it) and a session's raw terminal
 * (`/api/sessions/:id/stream`: redacted bytes without markers, replay from a ring offset, then
 * live; base64 per message, its id the offset after it; `gap` when bytes before the replay were
 * dropped; `end` when the session closes).
 */
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { Session } from "../control/mod.ts";
import { type EventBus, TermadaError } from "../shared/mod.ts";
import { encodeBase64 } from "../shared/mod.ts";
import type { AppEnv } from "./http.ts";

/** Bytes queued for one slow stream client before it is cut off (it resumes by cursor). */
const MAX_STREAM_BACKLOG = 4 * 1024 * 1024;
/** Raw bytes per SSE message of a terminal stream (base64 makes it 4/3 larger). */
const STREAM_CHUNK = 48 * 1024;

export function eventsStream(c: Context<AppEnv>, bus: EventBus, keepAliveMs = 15_000): Response {
  const raw = c.req.header("last-event-id") ?? c.req.query("since");
  const since = raw === undefined || raw === "" ? undefined : Number(raw);
  if (since !== undefined && (!Number.isInteger(since) || since < 0)) {
    throw new TermadaError("INVALID_ARGUMENT", "Last-Event-ID must be an event id");
  }
  return streamSSE(c, async (stream) => {
    const done = Promise.withResolvers<void>();
    let chain: Promise<void> = Promise.resolve();
    let backlog = 0;
    const send = (id: number, event: string, data: unknown) => {
      const text = JSON.stringify(data);
      backlog += text.length;
      if (backlog > MAX_STREAM_BACKLOG) {
        done.resolve(); // the client does not keep up: it resumes from its last id
        return;
      }
      chain = chain.then(() => stream.writeSSE({ id: String(id), event, data: text })).then(
        () => {
          backlog -= text.length;
        },
      );
    };
    const replay = bus.since(since);
    if (replay.kind === "resync") send(bus.lastId, "resync", { last_id: bus.lastId });
    let last = since ?? 0;
    for (const e of replay.events) {
      send(e.id, e.type, e);
      last = e.id;
    }
    const off = bus.subscribe((e) => {
      if (e.id > last) {
        last = e.id;
        send(e.id, e.type, e);
      }
    });
    const ka = setInterval(() => {
      chain = chain.then(() => stream.write(": keep-alive\n\n")).then(() => {});
    }, keepAliveMs);
    stream.onAbort(() => done.resolve());
    await done.promise;
    clearInterval(ka);
    off();
    await chain.catch(() => {});
  });
}

export function terminalStream(
  c: Context<AppEnv>,
  s: Session,
  keepAliveMs = 15_000,
): Response {
  const raw = c.req.header("last-event-id") ?? c.req.query("cursor");
  const from = raw === undefined || raw === "" ? 0 : Number(raw);
  if (!Number.isInteger(from) || from < 0 || from > s.ring.totalBytes) {
    throw new TermadaError("INVALID_ARGUMENT", "cursor must be an offset of this stream");
  }
  return streamSSE(c, async (stream) => {
    const done = Promise.withResolvers<void>();
    let chain: Promise<void> = Promise.resolve();
    let backlog = 0;
    const sendBytes = (bytes: Uint8Array, endOffset: number) => {
      for (let off = 0; off < bytes.length; off += STREAM_CHUNK) {
        const part = bytes.subarray(off, Math.min(bytes.length, off + STREAM_CHUNK));
        const id = endOffset - bytes.length + off + part.length;
        backlog += part.length;
        if (backlog > MAX_STREAM_BACKLOG) {
          // The client does not keep up: cut it off; it resumes from its last id.
          done.resolve();
          return;
        }
        const data = encodeBase64(part);
        chain = chain.then(() => stream.writeSSE({ id: String(id), event: "data", data }))
          .then(() => {
            backlog -= part.length;
          });
      }
    };
    const { bytes, from: start, truncated } = s.ring.since(from);
    if (truncated) {
      chain = chain.then(() =>
        stream.writeSSE({ event: "gap", data: JSON.stringify({ from: from, to: start }) })
      );
    }
    if (bytes.length > 0) sendBytes(bytes, start + bytes.length);
    const off = s.onRaw((b, end) => sendBytes(b, end));
    const offClose = s.onClose(() => {
      chain = chain.then(() => stream.writeSSE({ event: "end", data: "{}" }));
      done.resolve();
    });
    const ka = setInterval(() => {
      chain = chain.then(() => stream.write(": keep-alive\n\n")).then(() => {});
    }, keepAliveMs);
    stream.onAbort(() => done.resolve());
    await done.promise;
    off();
    offClose();
    clearInterval(ka);
    await chain.catch(() => {});
  });
}

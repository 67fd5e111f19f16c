import assert from "node:assert/strict";
import { captureLog, FakeTimers, ScriptedSink } from "./_test_util.ts";
import type { Notification } from "./message.ts";
import { Notifier, type NotifierOptions } from "./notifier.ts";
import { DeliveryError } from "./sink.ts";

const approval = (i: number): Notification => ({
  kind: "approval_pending",
  approval_id: `apr_${i}`,
  command: "make deploy",
});
const retriable = (retryAfterMs?: number) =>
  new DeliveryError("HTTP 500", { retriable: true, ...(retryAfterMs ? { retryAfterMs } : {}) });

function setup(options: Partial<NotifierOptions> = {}) {
  const timers = new FakeTimers();
  const sink = new ScriptedSink();
  const log = captureLog();
  const notifier = new Notifier([sink], {
    redact: (s) => s,
    timers,
    log,
    random: () => 0.5,
    coalesceMs: 1000,
    ...options,
  });
  return { timers, sink, log, notifier };
}

Deno.test("notify returns at once and a burst within the window becomes one message", async () => {
  const { timers, sink, notifier } = setup();
  await using _ = notifier;
  for (let i = 0; i < 30; i++) notifier.notify(approval(i));
  assert.equal(sink.calls.length, 0, "nothing is sent in the caller's path");
  await timers.advance(999);
  assert.equal(sink.calls.length, 0);
  await timers.advance(1);
  assert.equal(sink.calls.length, 1);
  assert.equal(sink.delivered[0]!.title, "30 approvals waiting");
  assert.equal(notifier.stats().fake!.sent, 1);
});

Deno.test("the token bucket spaces messages: burst first, then per_minute", async () => {
  const { timers, sink, notifier } = setup({ coalesceMs: 0, rate: { perMinute: 6, burst: 2 } });
  await using _ = notifier;
  for (let i = 0; i < 4; i++) {
    notifier.notify(approval(i));
    await timers.advance(0); // each alone: the window is 0
  }
  assert.equal(sink.calls.length, 2, "the burst");
  await timers.advance(9_999);
  assert.equal(sink.calls.length, 2);
  await timers.advance(1); // one token every 10 s, and it takes both waiting ones
  assert.equal(sink.calls.length, 3);
  assert.equal(sink.calls[2]!.count, 2);
});

Deno.test("retriable failures back off exponentially with jitter, then succeed", async () => {
  const { timers, sink, notifier } = setup({
    coalesceMs: 0,
    backoff: { baseMs: 1000, maxMs: 60_000 },
    rate: { perMinute: 600, burst: 100 },
  });
  await using _ = notifier;
  sink.script.push(retriable(), retriable(), retriable());
  notifier.notify(approval(1));
  await timers.advance(0);
  const at: number[] = [timers.now()];
  for (let i = 0; i < 3; i++) {
    const next = timers.nextAt!;
    await timers.advance(next - timers.now());
    at.push(timers.now());
  }
  // random 0.5: half fixed + a quarter → 0.75 of 1 s, 2 s, 4 s.
  assert.deepEqual(at.slice(1).map((t, i) => t - at[i]!), [750, 1500, 3000]);
  assert.equal(sink.calls.length, 4);
  assert.equal(sink.delivered.length, 1);
  assert.deepEqual(notifier.stats().fake, {
    queued: 0,
    sent: 1,
    dropped: 0,
    retries: 3,
    failed: 0,
  });
});

Deno.test("retry_after from the far side is honoured over the back-off", async () => {
  const { timers, sink, notifier } = setup({ coalesceMs: 0 });
  await using _ = notifier;
  sink.script.push(retriable(7000));
  notifier.notify(approval(1));
  await timers.advance(0);
  assert.equal(sink.calls.length, 1);
  await timers.advance(6999);
  assert.equal(sink.calls.length, 1);
  await timers.advance(1);
  assert.equal(sink.delivered.length, 1);
});

Deno.test("a refused message is not retried, is logged, and is reported as dropped", async () => {
  const { timers, sink, log, notifier } = setup({ coalesceMs: 0 });
  await using _ = notifier;
  sink.script.push(new DeliveryError("HTTP 400 chat not found", { retriable: false }));
  notifier.notify(approval(1));
  await timers.advance(60_000);
  assert.equal(sink.calls.length, 1);
  assert.equal(timers.pending, 0);
  assert.ok(log.lines.some((l) => l.startsWith("WARN a notification was refused")));
  notifier.notify(approval(2));
  await timers.advance(0);
  assert.match(sink.delivered[0]!.body, /1 earlier notification was dropped/);
});

Deno.test("after max_retries a message is dropped and the next one says so", async () => {
  const { timers, sink, log, notifier } = setup({ coalesceMs: 0, maxRetries: 2 });
  await using _ = notifier;
  sink.script.push(retriable(), retriable(), retriable());
  notifier.notify(approval(1));
  await timers.advance(3_600_000);
  assert.equal(sink.calls.length, 3);
  assert.equal(timers.pending, 0);
  assert.ok(log.lines.some((l) => l.includes("failed every retry")));
  assert.equal(notifier.stats().fake!.dropped, 1);
  notifier.notify(approval(2));
  await timers.advance(0);
  assert.match(sink.delivered[0]!.body, /1 earlier notification was dropped/);
});

Deno.test("a full queue drops the oldest, counts them and reports them once", async () => {
  const { timers, sink, notifier } = setup({ queueSize: 4 });
  await using _ = notifier;
  for (let i = 0; i < 10; i++) notifier.notify(approval(i));
  assert.equal(notifier.stats().fake!.dropped, 6);
  assert.equal(notifier.stats().fake!.queued, 4);
  await timers.advance(1000);
  const first = sink.delivered[0]!;
  assert.equal(first.count, 4);
  assert.match(first.body, /apr_6/);
  assert.doesNotMatch(first.body, /apr_5\b/);
  assert.match(first.body, /6 earlier notifications were dropped/);
  notifier.notify(approval(11));
  await timers.advance(1000);
  assert.doesNotMatch(sink.delivered[1]!.body, /dropped/);
});

Deno.test("a retry carries what arrived meanwhile in the same message", async () => {
  const { timers, sink, notifier } = setup({ coalesceMs: 0 });
  await using _ = notifier;
  sink.script.push(retriable());
  notifier.notify(approval(1));
  await timers.advance(0);
  notifier.notify(approval(2));
  await timers.advance(10_000);
  assert.equal(sink.delivered.length, 1);
  assert.equal(sink.delivered[0]!.title, "2 approvals waiting");
});

Deno.test("kinds not configured are ignored; notify never throws", async () => {
  const { timers, sink, notifier } = setup({ kinds: ["stop_all"] });
  await using _ = notifier;
  notifier.notify(approval(1));
  notifier.notify(null as unknown as Notification);
  notifier.notify({ kind: "stop_all", outcome: "done" });
  await timers.advance(1000);
  assert.equal(sink.delivered.length, 1);
  assert.equal(sink.delivered[0]!.title, "Stop-all");
});

Deno.test("close stops timers, closes sinks once and ignores later notifications", async () => {
  const { timers, sink, notifier } = setup();
  notifier.notify(approval(1));
  assert.equal(timers.pending, 1);
  await notifier.close();
  await notifier.close();
  assert.equal(timers.pending, 0);
  assert.equal(sink.closed, 1);
  notifier.notify(approval(2));
  assert.equal(timers.pending, 0);
});

Deno.test("close aborts a send in flight and waits for it", async () => {
  const timers = new FakeTimers();
  let aborted = false;
  const notifier = new Notifier([{
    name: "slow",
    send: (_m, signal) =>
      new Promise<void>((_, reject) => {
        signal.addEventListener("abort", () => {
          aborted = true;
          reject(new DeliveryError("cancelled", { retriable: true }));
        });
      }),
  }], { redact: (s) => s, timers, coalesceMs: 0, log: captureLog() });
  notifier.notify(approval(1));
  await timers.advance(0);
  await notifier.close();
  assert.equal(aborted, true);
  assert.equal(timers.pending, 0);
});

Deno.test("bad options are programmer errors", () => {
  assert.throws(() => new Notifier([], { redact: undefined as never }), TypeError);
  assert.throws(() => new Notifier([], { redact: (s) => s, queueSize: 0 }), RangeError);
  const a = new ScriptedSink("same");
  assert.throws(() => new Notifier([a, new ScriptedSink("same")], { redact: (s) => s }), TypeError);
});

import assert from "node:assert/strict";
import { castLines, exportCommand, playCast, type PlayClock, replayCommand } from "./replay.ts";

/** A clock whose sleeps advance it at once, keeping the waits asked for. */
function manualClock(): PlayClock & { waits: number[] } {
  let t = 1000;
  const waits: number[] = [];
  return {
    waits,
    now: () => t,
    sleep: (ms) => {
      waits.push(Math.round(ms));
      t += ms;
      return Promise.resolve();
    },
  };
}

async function* from(lines: string[]): AsyncGenerator<string> {
  for (const l of lines) yield l;
}

const HEADER = JSON.stringify({ version: 2, width: 80, height: 24, timestamp: 1 });
const ev = (t: number, code: string, data: string) => JSON.stringify([t, code, data]);

Deno.test("playCast keeps the recorded timing, scaled by speed and with pauses capped", async () => {
  const clock = manualClock();
  const written: string[] = [];
  const r = await playCast(
    from([
      HEADER,
      ev(0.5, "o", "a"),
      ev(1.5, "o", "b"),
      ev(1.5, "o", "c"), // due with b: written together
      ev(61.5, "m", "job x"), // skipped, but its time counts
      ev(62, "r", "100x30"),
      ev(62.5, "o", "d"),
    ]),
    {
      timed: true,
      speed: 2,
      maxIdle: 10,
      write: (t) => Promise.resolve(void written.push(t)),
      clock,
    },
  );
  // 0.5 s → 250 ms; +1 s → 500 ms; the 60 s pause capped at 10 s → 5000 ms; +0.5 → 250; +0.5 → 250
  assert.deepEqual(clock.waits, [250, 500, 5500]);
  assert.deepEqual(written, ["a", "bc", "d"]);
  assert.equal(r.events, 4);
  assert.equal(r.stopped, false);
  assert.equal(r.width, 80);
});

Deno.test("playCast without timing writes everything at once", async () => {
  const clock = manualClock();
  const written: string[] = [];
  const r = await playCast(from([HEADER, ev(1, "o", "x\r\n"), ev(500, "o", "y\r\n"), ""]), {
    timed: false,
    speed: 1,
    maxIdle: 2,
    write: (t) => Promise.resolve(void written.push(t)),
    clock,
  });
  assert.deepEqual(clock.waits, []);
  assert.deepEqual(written, ["x\r\ny\r\n"]);
  assert.equal(r.events, 2);
});

Deno.test("playCast stops when its signal aborts, and leaves the rest unread", async () => {
  const stop = new AbortController();
  const clock: PlayClock = {
    now: () => 0,
    sleep: () => {
      stop.abort();
      return Promise.resolve();
    },
  };
  let finished = false;
  async function* lines() {
    try {
      yield HEADER;
      yield ev(0, "o", "first");
      yield ev(5, "o", "never");
      yield ev(6, "o", "never");
    } finally {
      finished = true;
    }
  }
  const written: string[] = [];
  const r = await playCast(lines(), {
    timed: true,
    speed: 1,
    maxIdle: 10,
    write: (t) => Promise.resolve(void written.push(t)),
    signal: stop.signal,
    clock,
  });
  assert.deepEqual(written, ["first"]);
  assert.equal(r.stopped, true);
  assert.ok(finished, "the source is closed");
});

Deno.test("playCast refuses what is not an asciicast v2", async (t) => {
  const opts = { timed: false, speed: 1, maxIdle: 1, write: () => Promise.resolve() };
  await t.step("no header", async () => {
    await assert.rejects(() => playCast(from(['{"version":1}']), opts), /not send an asciicast v2/);
  });
  await t.step("a broken event line", async () => {
    await assert.rejects(() => playCast(from([HEADER, "[1,"]), opts), /Line 2 .* not an event/);
  });
});

Deno.test("castLines splits lines across chunks and keeps UTF-8 whole", async () => {
  const bytes = new TextEncoder().encode(`${HEADER}\n${ev(1, "o", "é✓")}\n${ev(2, "o", "z")}`);
  // Three bytes at a time: lines and multibyte characters are cut everywhere.
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      for (let i = 0; i < bytes.length; i += 3) c.enqueue(bytes.slice(i, i + 3));
      c.close();
    },
  });
  const got: string[] = [];
  for await (const l of castLines(body)) got.push(l);
  assert.deepEqual(got, [HEADER, ev(1, "o", "é✓"), ev(2, "o", "z")]);
});

Deno.test("replay and export parse their arguments strictly", async (t) => {
  const out: string[] = [];
  const ctx = { out: (s: string) => Promise.resolve(void out.push(s)) };
  const io = { stdoutTty: false, stdinTty: false };
  await t.step("--help", async () => {
    assert.equal(await replayCommand(["--help"], ctx, io), 0);
    assert.match(out.join(""), /^Usage: termada replay SESSION/);
    assert.equal(await exportCommand(["-h"], ctx), 0);
    assert.match(out.join(""), /Usage: termada export SESSION/);
  });
  const invalid = async (f: () => Promise<number>, message: RegExp) => {
    await assert.rejects(f, (e: Error & { code?: string }) => {
      assert.equal(e.code, "INVALID_ARGUMENT");
      assert.match(e.message, message);
      return true;
    });
  };
  await t.step("unknown option", async () => {
    await invalid(() => replayCommand(["ses_x", "--fast"], ctx, io), /Unknown option "--fast"/);
    await invalid(() => exportCommand(["ses_x", "--overwrite"], ctx), /Unknown option/);
  });
  await t.step("missing or extra session", async () => {
    await invalid(() => replayCommand([], ctx, io), /Missing SESSION/);
    await invalid(() => exportCommand(["a", "b"], ctx), /Unexpected argument "b"/);
    await invalid(() => exportCommand(["../x"], ctx), /is not a session id/);
  });
  await t.step("bad numbers", async () => {
    await invalid(() => replayCommand(["ses_x", "--speed", "0"], ctx, io), /Invalid --speed "0"/);
    await invalid(
      () => replayCommand(["ses_x", "--max-idle", "soon"], ctx, io),
      /Invalid --max-idle "soon"/,
    );
  });
  await t.step("--json with stdout", async () => {
    await invalid(
      () => exportCommand(["ses_x", "--out", "-", "--json"], ctx),
      /--json needs a file/,
    );
  });
});

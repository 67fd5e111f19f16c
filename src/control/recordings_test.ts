import assert from "node:assert/strict";
import { join } from "node:path";
import { AsciicastRecorder } from "../output/mod.ts";
import { Store } from "../store/mod.ts";
import { type LiveSessions, RecordingOps } from "./recordings.ts";
import { rejectsWith, testRuntime } from "./_test_util.ts";

/** A clock the test moves: wall and monotonic time advance together. */
function manualClock(startMs = Date.UTC(2026, 0, 1)) {
  let t = 0;
  return {
    now: () => startMs + t,
    mono: () => t,
    advance(ms: number) {
      t += ms;
    },
  };
}

const NO_LIVE: LiveSessions = { sessionById: () => undefined };

async function text(stream: ReadableStream<Uint8Array>): Promise<string> {
  return await new Response(stream).text();
}

/** Header and events of a cast, checked to be asciicast v2 with times that never go back. */
function parseCast(cast: string): {
  header: Record<string, unknown>;
  events: [number, string, string][];
} {
  assert.ok(cast.endsWith("\n"), "a cast ends with a newline");
  const lines = cast.slice(0, -1).split("\n");
  const header = JSON.parse(lines[0]!) as Record<string, unknown>;
  assert.equal(header.version, 2);
  const events = lines.slice(1).map((l) => JSON.parse(l) as [number, string, string]);
  let last = 0;
  for (const [t, code, data] of events) {
    assert.ok(typeof t === "number" && t >= last, `time ${t} after ${last}`);
    assert.ok(["o", "r", "m"].includes(code));
    assert.equal(typeof data, "string");
    last = t;
  }
  return { header, events };
}

const output = (events: [number, string, string][]) =>
  events.filter((e) => e[1] === "o").map((e) => e[2]).join("");

/** Records `chunks` (one a second) into `<dir>/<id>.cast` with rotation at `maxFileBytes`. */
async function record(
  dir: string,
  id: string,
  chunks: string[],
  o: { maxFileBytes?: number; keepFiles?: number; resizeAt?: number } = {},
): Promise<void> {
  const clock = manualClock();
  const rec = await AsciicastRecorder.open(join(dir, `${id}.cast`), {
    cols: 80,
    rows: 24,
    title: `termada ${id}`,
    maxFileBytes: o.maxFileBytes ?? 1024,
    keepFiles: o.keepFiles ?? 3,
    clock,
  });
  try {
    for (const [i, c] of chunks.entries()) {
      clock.advance(1000);
      if (i === o.resizeAt) rec.resize(100, 30);
      rec.output(new TextEncoder().encode(c));
      await rec.flush();
    }
  } finally {
    await rec.close();
  }
}

async function withDir(f: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "termada-rec-" });
  try {
    await f(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("open joins rotated parts into one cast with one header and times in order", async () => {
  await withDir(async (dir) => {
    const chunks = Array.from({ length: 60 }, (_, i) => `line ${i} ${"x".repeat(60)}\r\n`);
    await record(dir, "ses_a", chunks, { resizeAt: 55 });
    const names = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
    assert.deepEqual(names, ["ses_a.cast", "ses_a.cast.1", "ses_a.cast.2", "ses_a.cast.3"]);
    const ops = new RecordingOps({ dir, enabled: true, sessions: NO_LIVE });
    const cast = await ops.open("ses_a");
    assert.equal(cast.parts, 4);
    assert.equal(cast.omittedBytes, 0);
    const { header, events } = parseCast(await text(cast.body));
    assert.equal(header.width, 80);
    assert.equal(header.title, "termada ses_a");
    // The oldest parts were rotated away by the recorder (keepFiles 3): what is kept is a tail,
    // whole and in order.
    const out = output(events);
    const first = Number(/line (\d+)/.exec(out)![1]);
    assert.equal(out, chunks.slice(first).join(""));
    // One second between chunks, across part boundaries too (headers are whole seconds).
    const times = events.filter((e) => e[1] === "o").map((e) => e[0]);
    for (let i = 1; i < times.length; i++) {
      assert.ok(Math.abs(times[i]! - times[i - 1]! - 1) < 1e-6, `gap at ${i}: ${times}`);
    }
    // The size followed: a resize event precedes output recorded after it.
    const r = events.findIndex((e) => e[1] === "r" && e[2] === "100x30");
    const line55 = events.findIndex((e) => e[1] === "o" && e[2].startsWith("line 55 "));
    assert.ok(r >= 0 && r < line55, `resize at ${r}, line 55 at ${line55}`);
    assert.equal((await ops.info("ses_a")).parts, 4);
  });
});

Deno.test("open keeps the newest bytes under the bound and says what it left out", async () => {
  await withDir(async (dir) => {
    const chunks = Array.from({ length: 20 }, (_, i) => `chunk-${i}-${"y".repeat(50)}\n`);
    await record(dir, "ses_b", chunks, { maxFileBytes: 64 * 1024 });
    const ops = new RecordingOps({ dir, enabled: true, sessions: NO_LIVE, maxBytes: 400 });
    const cast = await ops.open("ses_b");
    assert.ok(cast.omittedBytes > 0);
    const { events } = parseCast(await text(cast.body));
    assert.match(events[0]![2], /^termada: \d+ bytes of older recording left out/);
    assert.equal(events[0]![1], "m");
    const out = output(events);
    assert.ok(out.endsWith(chunks.at(-1)!));
    assert.ok(!out.includes("chunk-0-"));
    // Whole events only: every kept chunk is complete.
    for (const line of out.split("\n").filter(Boolean)) assert.match(line, /^chunk-\d+-y{50}$/);
  });
});

Deno.test("open and info say why a session has no recording", async (t) => {
  await withDir(async (dir) => {
    const store = Store.open(join(dir, "state.db"));
    try {
      store.sessions.insert({
        id: "ses_known",
        owner: "ci",
        shell: "bash",
        target: "local",
        cwd: dir,
        workspace: null,
        cols: 80,
        rows: 24,
        created_at: Date.now(),
      });
      await t.step("unknown session", async () => {
        const ops = new RecordingOps({ dir, enabled: true, sessions: NO_LIVE, store });
        const err = await rejectsWith(() => ops.open("ses_nope"), "NOT_FOUND");
        assert.equal(err.message, 'No session "ses_nope"');
        await rejectsWith(() => ops.info("ses_nope"), "NOT_FOUND");
      });
      await t.step("recording disabled", async () => {
        const ops = new RecordingOps({ dir, enabled: false, sessions: NO_LIVE, store });
        const err = await rejectsWith(() => ops.open("ses_known"), "NOT_FOUND");
        assert.match(err.message, /has no recording: recording is disabled \(sessions.record/);
      });
      await t.step("file missing", async () => {
        const ops = new RecordingOps({ dir, enabled: true, sessions: NO_LIVE, store });
        const err = await rejectsWith(() => ops.open("ses_known"), "NOT_FOUND");
        assert.match(err.message, /could not be written or was removed/);
      });
      await t.step("not an id", async () => {
        const ops = new RecordingOps({ dir, enabled: true, sessions: NO_LIVE, store });
        await rejectsWith(() => ops.open("../etc/passwd"), "INVALID_ARGUMENT");
      });
    } finally {
      store.close();
    }
  });
});

Deno.test("open drops a half-written last line and never follows a symlinked part", async () => {
  await withDir(async (dir) => {
    const outside = join(dir, "outside.cast");
    await Deno.writeTextFile(
      outside,
      '{"version":2,"width":80,"height":24}\n[0.5,"o","SECRET-OUTSIDE"]\n',
    );
    await Deno.symlink(outside, join(dir, "ses_c.cast.1"));
    await Deno.writeTextFile(
      join(dir, "ses_c.cast"),
      '{"version":2,"width":80,"height":24,"timestamp":1}\n[0.1,"o","kept"]\n[0.2,"o","half',
    );
    const ops = new RecordingOps({ dir, enabled: true, sessions: NO_LIVE });
    const cast = await ops.open("ses_c");
    assert.equal(cast.parts, 1);
    const body = await text(cast.body);
    const { events } = parseCast(body);
    assert.deepEqual(events, [[0.1, "o", "kept"]]);
    assert.doesNotMatch(body, /SECRET-OUTSIDE/);
  });
});

Deno.test("list gives owner, times and parts, newest session first, bounded", async () => {
  await withDir(async (dir) => {
    const store = Store.open(join(dir, "state.db"));
    try {
      const base = Date.UTC(2024, 0, 1);
      for (const [i, id] of ["ses_old", "ses_mid", "ses_new"].entries()) {
        store.sessions.insert({
          id,
          owner: `agent${i}`,
          shell: "bash",
          target: "local",
          cwd: dir,
          workspace: null,
          cols: 80,
          rows: 24,
          created_at: base + i * 60_000,
        });
        await record(dir, id, [`hello ${id}\n`]);
      }
      store.sessions.update("ses_old", {
        state: "closed",
        closed_at: base + 30_000,
        close_reason: "closed by agent",
      });
      await record(dir, "ses_orphan", ["no row\n"]);
      await Deno.writeTextFile(join(dir, "notes.txt"), "not a recording");
      const live: LiveSessions = {
        sessionById: (id) =>
          id === "ses_new"
            ? { owner: "agent2", createdAt: base + 120_000, state: "ready" }
            : undefined,
      };
      const ops = new RecordingOps({ dir, enabled: true, sessions: live, store });
      const all = await ops.list();
      assert.equal(all.total, 4);
      assert.equal(all.enabled, true);
      // No row: sorted by its file's age (now, after 2024-01-01).
      assert.deepEqual(all.recordings.map((r) => r.session_id), [
        "ses_orphan",
        "ses_new",
        "ses_mid",
        "ses_old",
      ]);
      const old = all.recordings.find((r) => r.session_id === "ses_old")!;
      assert.equal(old.owner, "agent0");
      assert.equal(old.live, false);
      assert.equal(old.parts, 1);
      assert.ok(old.bytes > 0);
      assert.equal(old.started_at, new Date(base).toISOString());
      assert.equal(old.ended_at, new Date(base + 30_000).toISOString());
      assert.equal(old.close_reason, "closed by agent");
      const now = all.recordings.find((r) => r.session_id === "ses_new")!;
      assert.equal(now.live, true);
      assert.equal(now.ended_at, undefined);
      assert.equal(all.recordings.find((r) => r.session_id === "ses_orphan")!.owner, null);
      const two = await ops.list(2);
      assert.equal(two.recordings.length, 2);
      assert.equal(two.total, 4);
    } finally {
      store.close();
    }
  });
});

Deno.test("a live session's recording is readable through the operator ops", async () => {
  await using rt = await testRuntime();
  const s = await rt.engine.createSession("ci", {});
  await rt.engine.run("ci", { session: s.session_id, command: ["echo replay-unit-77"] });
  const deadline = Date.now() + 5000;
  let body = "";
  while (!/replay-unit-77/.test(body)) {
    if (Date.now() > deadline) throw new Error(`marker not recorded: ${body}`);
    await new Promise((r) => setTimeout(r, 30));
    const cast = await rt.ops.recordings().open(s.session_id);
    assert.equal(cast.info.live, true);
    assert.equal(cast.info.owner, "ci");
    body = await text(cast.body);
  }
  parseCast(body);
  const list = await rt.ops.recordings().list();
  assert.equal(list.recordings[0]?.session_id, s.session_id);
});

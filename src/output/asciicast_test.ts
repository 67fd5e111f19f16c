import assert from "node:assert/strict";
import { type Clock, TermadaError } from "../shared/mod.ts";
import { AsciicastRecorder, eventLine } from "./asciicast.ts";
import { seededRandom } from "../shared/mod.ts";

const enc = new TextEncoder();

/** A clock the test moves by hand. */
function fakeClock(startMs = 1_700_000_000_000): Clock & { advance(ms: number): void } {
  let mono = 0;
  return {
    now: () => startMs + mono,
    mono: () => mono,
    advance(ms: number) {
      mono += ms;
    },
  };
}

type Event = [number, string, string];
interface Cast {
  header: Record<string, unknown>;
  events: Event[];
}

/** Parses a cast file strictly: every line must be JSON, the first the header. */
async function readCast(path: string): Promise<Cast> {
  const text = await Deno.readTextFile(path);
  assert.ok(text.endsWith("\n"), "file ends with a newline");
  const lines = text.slice(0, -1).split("\n");
  const header = JSON.parse(lines[0]!) as Record<string, unknown>;
  const events = lines.slice(1).map((l) => JSON.parse(l) as Event);
  for (const e of events) {
    assert.equal(e.length, 3);
    assert.equal(typeof e[0], "number");
  }
  return { header, events };
}

function outputText(cast: Cast): string {
  return cast.events.filter((e) => e[1] === "o").map((e) => e[2]).join("");
}

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "termada_cast_" });
  try {
    await fn(dir);
  } finally {
    await Deno.chmod(dir, 0o700).catch(() => {/* already removed by the test */});
    await Deno.remove(dir, { recursive: true }).catch(() => {/* already removed by the test */});
  }
}

Deno.test("asciicast recorder writes a v2 header and timed output events", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/s.cast`;
    const clock = fakeClock();
    const rec = await AsciicastRecorder.open(path, {
      cols: 100,
      rows: 30,
      title: "demo",
      env: { SHELL: "/bin/bash", TERM: "xterm-256color" },
      clock,
    });
    clock.advance(1500);
    rec.output(enc.encode("hello\r\n"));
    clock.advance(250.5);
    rec.output(enc.encode("\x1b[31mred\x1b[0m"));
    await rec.close();

    const cast = await readCast(path);
    assert.deepEqual(cast.header, {
      version: 2,
      width: 100,
      height: 30,
      timestamp: 1_700_000_000,
      env: { SHELL: "/bin/bash", TERM: "xterm-256color" },
      title: "demo",
    });
    assert.deepEqual(cast.events, [
      [1.5, "o", "hello\r\n"],
      [1.7505, "o", "\x1b[31mred\x1b[0m"],
    ]);
    assert.equal(rec.bytesWritten, (await Deno.stat(path)).size);
    assert.equal((await Deno.stat(path)).mode! & 0o777, 0o600);
  });
});

Deno.test("asciicast recorder keeps multibyte characters split across chunks", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/s.cast`;
    const rec = await AsciicastRecorder.open(path, { cols: 80, rows: 24 });
    const text = "héllo wörld — 日本語 🎉 done\n".repeat(50);
    const bytes = enc.encode(text);
    // Chunk boundaries of 1..7 bytes land inside most multibyte sequences.
    let off = 0;
    for (let i = 0; off < bytes.length; i++) {
      const n = 1 + (i % 7);
      rec.output(bytes.subarray(off, off + n));
      off += n;
    }
    await rec.close();
    const cast = await readCast(path);
    assert.equal(outputText(cast), text);
    assert.ok(!outputText(cast).includes("\ufffd"));
  });
});

Deno.test("asciicast recorder records resize and marker events in order", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/s.cast`;
    const clock = fakeClock();
    const rec = await AsciicastRecorder.open(path, { cols: 80, rows: 24, clock });
    rec.output(enc.encode("a"));
    clock.advance(10);
    rec.resize(120, 40);
    clock.advance(10);
    rec.marker("exec job_1");
    rec.output(enc.encode("b"));
    await rec.close();
    assert.deepEqual((await readCast(path)).events, [
      [0, "o", "a"],
      [0.01, "r", "120x40"],
      [0.02, "m", "exec job_1"],
      [0.02, "o", "b"],
    ]);
    assert.throws(() => rec.resize(0, 10), RangeError);
  });
});

Deno.test("asciicast recorder flush puts queued events on disk without closing", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/s.cast`;
    await using rec = await AsciicastRecorder.open(path, { cols: 80, rows: 24 });
    rec.output(enc.encode("one"));
    await rec.flush();
    assert.equal(outputText(await readCast(path)), "one");
    rec.output(enc.encode("two"));
    await rec.flush();
    await rec.flush();
    assert.equal(outputText(await readCast(path)), "onetwo");
  });
});

Deno.test("asciicast recorder gathers a burst into one batch that lands by itself", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/s.cast`;
    await using rec = await AsciicastRecorder.open(path, { cols: 80, rows: 24 });
    const header = rec.bytesWritten;
    for (let i = 0; i < 50; i++) rec.output(enc.encode(`${i};`));
    assert.equal(rec.bytesWritten, header, "nothing is written while the batch gathers");
    // No flush: the gathering pause ends on its own (GATHER_MS) and one write takes all 50.
    const deadline = Date.now() + 5000;
    while (rec.bytesWritten === header && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 5));
    }
    const text = outputText(await readCast(path));
    assert.equal(text, Array.from({ length: 50 }, (_, i) => `${i};`).join(""));
  });
});

Deno.test("asciicast recorder writes a full batch at once, without waiting out the pause", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/s.cast`;
    await using rec = await AsciicastRecorder.open(path, { cols: 80, rows: 24 });
    const header = rec.bytesWritten;
    rec.output(new Uint8Array(300 * 1024).fill(0x61));
    const deadline = Date.now() + 5000;
    while (rec.bytesWritten === header && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 1));
    }
    // Written although no flush or close asked for it.
    assert.ok(rec.bytesWritten > header + 300 * 1024);
  });
});

Deno.test("asciicast recorder close is idempotent and later calls are ignored", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/s.cast`;
    const rec = await AsciicastRecorder.open(path, { cols: 80, rows: 24 });
    rec.output(enc.encode("x"));
    const first = rec.close();
    const second = rec.close();
    assert.equal(first, second);
    await first;
    await rec.close();
    await rec[Symbol.asyncDispose]();
    rec.output(enc.encode("late"));
    rec.marker("late");
    await rec.flush();
    assert.equal(outputText(await readCast(path)), "x");
  });
});

Deno.test("asciicast recorder rotates files and keeps at most keepFiles old ones", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/s.cast`;
    const clock = fakeClock();
    const maxFileBytes = 2048;
    const rec = await AsciicastRecorder.open(path, {
      cols: 80,
      rows: 24,
      maxFileBytes,
      keepFiles: 2,
      clock,
    });
    let all = "";
    for (let i = 0; i < 400; i++) {
      const line = `line ${i} ${"x".repeat(i % 40)}\r\n`;
      all += line;
      clock.advance(1000);
      rec.output(enc.encode(line));
      if (i === 200) rec.resize(90, 30);
      if (i % 50 === 0) await rec.flush(); // several batches, like a live session
    }
    await rec.close();

    const names = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
    assert.deepEqual(names, ["s.cast", "s.cast.1", "s.cast.2"]);
    let kept = "";
    let lastTimestamp = 0;
    for (const name of ["s.cast.2", "s.cast.1", "s.cast"]) {
      const file = `${dir}/${name}`;
      assert.ok((await Deno.stat(file)).size <= maxFileBytes, `${name} within maxFileBytes`);
      const cast = await readCast(file);
      // Each file is self-contained: its first event is at time 0 from its own header.
      assert.equal(cast.events[0]![0], 0);
      // Each header is dated at its rotation.
      const timestamp = cast.header.timestamp as number;
      assert.ok(timestamp > lastTimestamp && timestamp <= clock.now() / 1000);
      lastTimestamp = timestamp;
      kept += outputText(cast);
    }
    // The kept files hold a contiguous tail of the output.
    assert.ok(all.endsWith(kept));
    assert.ok(kept.length > 0);
    // Files started after the resize carry the new size in their header.
    assert.equal((await readCast(path)).header.width, 90);
  });
});

Deno.test("asciicast recorder allows one event of slack over maxFileBytes", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/s.cast`;
    const rec = await AsciicastRecorder.open(path, {
      cols: 80,
      rows: 24,
      maxFileBytes: 1024,
      keepFiles: 1,
    });
    rec.output(enc.encode("small"));
    await rec.flush();
    rec.output(enc.encode("y".repeat(3000)));
    await rec.close();
    const big = await readCast(path);
    assert.equal(big.events.length, 1);
    assert.equal(outputText(big), "y".repeat(3000));
    assert.equal(outputText(await readCast(`${path}.1`)), "small");
  });
});

Deno.test("asciicast recorder with keepFiles 0 keeps only the current file", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/s.cast`;
    const rec = await AsciicastRecorder.open(path, {
      cols: 80,
      rows: 24,
      maxFileBytes: 1024,
      keepFiles: 0,
    });
    for (let i = 0; i < 100; i++) rec.output(enc.encode(`${i} ${"z".repeat(50)}\n`));
    await rec.close();
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["s.cast"]);
    assert.ok(outputText(await readCast(path)).endsWith(`99 ${"z".repeat(50)}\n`));
  });
});

Deno.test("asciicast recorder drops output beyond maxPendingBytes and notes it once", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/s.cast`;
    const rec = await AsciicastRecorder.open(path, {
      cols: 80,
      rows: 24,
      maxPendingBytes: 1000,
    });
    // All in one tick: the writer cannot run, so the queue only grows.
    for (let i = 0; i < 20; i++) rec.output(enc.encode("a".repeat(100)));
    await rec.flush();
    rec.output(enc.encode("after"));
    await rec.close();
    const cast = await readCast(path);
    const markers = cast.events.filter((e) => e[1] === "m");
    assert.equal(markers.length, 1);
    assert.match(markers[0]![2], /dropped 1000 bytes/);
    assert.equal(outputText(cast), "a".repeat(1000) + "after");
  });
});

Deno.test("asciicast recorder survives a disk error: logs, stops recording, never throws", async () => {
  await withDir(async (dir) => {
    const sub = `${dir}/gone`;
    await Deno.mkdir(sub);
    const path = `${sub}/s.cast`;
    const rec = await AsciicastRecorder.open(path, { cols: 80, rows: 24, maxFileBytes: 1024 });
    rec.output(enc.encode("before\n"));
    await rec.flush();
    await Deno.remove(sub, { recursive: true });
    // Rotation must reopen the file in the removed directory and fails.
    for (let i = 0; i < 50; i++) rec.output(enc.encode(`${"q".repeat(100)}\n`));
    await rec.flush();
    assert.equal(rec.failed, true);
    rec.output(enc.encode("still fine"));
    rec.resize(100, 40);
    rec.marker("ignored");
    await rec.flush();
    await rec.close();
  });
});

Deno.test("asciicast recorder open fails with a TermadaError when the file cannot be created", async () => {
  await assert.rejects(
    AsciicastRecorder.open("/nonexistent-dir-termada/s.cast", { cols: 80, rows: 24 }),
    (err: unknown) => err instanceof TermadaError && /Cannot open recording/.test(err.message),
  );
  await withDir(async (dir) => {
    // A symlink or device at the path is refused, never written through.
    await Deno.symlink("/dev/null", `${dir}/link.cast`);
    await assert.rejects(
      AsciicastRecorder.open(`${dir}/link.cast`, { cols: 80, rows: 24 }),
      /not a regular file/,
    );
    assert.equal((await Deno.lstat(`${dir}/link.cast`)).isSymlink, true);
  });
});

Deno.test("asciicast recorder replaces a stale file and makes it private", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/s.cast`;
    await Deno.writeTextFile(path, "old content that is longer than the new header\n".repeat(9), {
      mode: 0o644,
    });
    await Deno.chmod(path, 0o644);
    const rec = await AsciicastRecorder.open(path, { cols: 80, rows: 24 });
    rec.output(enc.encode("new"));
    await rec.close();
    assert.equal(outputText(await readCast(path)), "new");
    assert.equal((await Deno.stat(path)).mode! & 0o777, 0o600);
  });
});

Deno.test("asciicast recorder output is valid JSON line by line for Python too", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/s.cast`;
    const rec = await AsciicastRecorder.open(path, { cols: 80, rows: 24, title: 'q"uote' });
    rec.output(enc.encode('\x00\x07\x1b[1m"\\\u2028 tab\t'));
    rec.output(Uint8Array.of(0xff, 0xfe, 0x41)); // invalid UTF-8 becomes U+FFFD
    rec.output(Uint8Array.of(0xe6, 0x97)); // truncated at close
    await rec.close();
    const py = new Deno.Command("python3", {
      args: [
        "-c",
        "import json,sys\nn=0\nfor l in open(sys.argv[1],encoding='utf-8'):\n json.loads(l); n+=1\nprint(n)",
        path,
      ],
      stdout: "piped",
      stderr: "piped",
    });
    const out = await py.output();
    assert.equal(new TextDecoder().decode(out.stderr), "");
    assert.equal(new TextDecoder().decode(out.stdout).trim(), "4");
    const cast = await readCast(path);
    assert.equal(outputText(cast), '\x00\x07\x1b[1m"\\\u2028 tab\t\ufffd\ufffdA\ufffd');
  });
});

Deno.test("an event line is byte for byte what JSON.stringify writes, on both of its paths", () => {
  const enc = new TextEncoder();
  const ref = (s: number, code: string, data: string) =>
    enc.encode(JSON.stringify([s, code, data]) + "\n");
  const check = (data: string, s = 1.25) =>
    assert.deepEqual(eventLine(s, "o", data), ref(s, "o", data), JSON.stringify(data.slice(0, 40)));
  // Dense: every ASCII character, each with a newline after it (the escaping path).
  for (let c = 0; c < 0x80; c++) check((String.fromCharCode(c) + "\n").repeat(300));
  // Dense with something that is not ASCII at the start, the middle and the end (JSON.stringify).
  for (const odd of ["é", "日本", "\u{1f600}", "\ud800", "\udfff", "\u0080", "\u2028"]) {
    check(odd + "y\n".repeat(400));
    check("y\n".repeat(200) + odd + "y\n".repeat(200));
    check("y\n".repeat(400) + odd);
  }
  check("");
  check("plain text without any escape");
  check('"\\'.repeat(1000), 0);
  check("y\n".repeat(10), 123456.789012);
  // Random strings around the density threshold.
  const rnd = seededRandom(11);
  const alphabet = [
    "a",
    "Z",
    " ",
    "\n",
    "\r",
    "\t",
    "\x1b",
    "\x00",
    "\x7f",
    '"',
    "\\",
    "é",
    "\ud83d",
  ];
  for (let k = 0; k < 300; k++) {
    const escapeShare = rnd();
    let s = "";
    const len = Math.floor(rnd() * 1500);
    for (let i = 0; i < len; i++) {
      s += rnd() < escapeShare
        ? alphabet[3 + Math.floor(rnd() * 7)]
        : alphabet[Math.floor(rnd() * 3)];
      if (rnd() < 0.002) s += alphabet[10 + Math.floor(rnd() * 3)];
    }
    check(s, k / 7);
  }
});

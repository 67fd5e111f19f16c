import assert from "node:assert/strict";
import { TermadaError } from "../shared/mod.ts";
import { RawRing } from "./raw_ring.ts";
import { ScreenMirror } from "./screen.ts";

const enc = new TextEncoder();

function session(
  cols = 20,
  rows = 5,
  capacity?: number,
): { ring: RawRing; screen: ScreenMirror; write(text: string): void } & Disposable {
  const ring = new RawRing(capacity);
  const screen = new ScreenMirror(ring, { cols, rows });
  return {
    ring,
    screen,
    write: (text: string) => ring.append(enc.encode(text)),
    [Symbol.dispose]: () => screen.dispose(),
  };
}

Deno.test("screen mirror creates no terminal before the first snapshot", async () => {
  using s = session();
  s.write("hello");
  s.screen.resize(30, 6);
  assert.equal(s.screen.hasTerminal, false);
  const snap = await s.screen.snapshot();
  assert.equal(s.screen.hasTerminal, true);
  assert.equal(snap.lines[0], "hello");
  assert.equal(snap.cols, 30);
  s.screen.dispose();
  assert.equal(s.screen.hasTerminal, false);
});

Deno.test("screen mirror renders text, colours and cursor movement into the right cells", async () => {
  using s = session(20, 5);
  s.write("line one\r\nline two\r\n");
  s.write("\x1b[31mred\x1b[0m plain"); // colours leave no text behind
  s.write("\x1b[1;12HX"); // row 1, column 12 (1-based): the gap reads as spaces
  s.write("\x1b[5;1Hbottom\x1b[3D"); // last row, then 3 left
  const snap = await s.screen.snapshot();
  assert.deepEqual(snap.lines, ["line one   X", "line two", "red plain", "", "bottom"]);
  assert.deepEqual(snap.cursor, { x: 3, y: 4 });
  assert.deepEqual([snap.cols, snap.rows, snap.alternate, snap.title], [20, 5, false, ""]);
});

Deno.test("screen mirror feeds only new bytes on later snapshots", async () => {
  using s = session(20, 3);
  s.write("$ ");
  // Written spaces stay; only never-written cells are trimmed.
  assert.deepEqual((await s.screen.snapshot()).lines, ["$ ", "", ""]);
  s.write("ls\r\na b c\r\n$ ");
  const snap = await s.screen.snapshot();
  assert.deepEqual(snap.lines, ["$ ls", "a b c", "$ "]);
  assert.deepEqual(snap.cursor, { x: 2, y: 2 });
  // Scrolling: the top line leaves the screen (scrollback 0).
  s.write("\r\nmore\r\n");
  assert.deepEqual((await s.screen.snapshot()).lines, ["$ ", "more", ""]);
});

Deno.test("screen mirror reports the OSC 0/2 title", async () => {
  using s = session();
  s.write("\x1b]0;first\x07");
  assert.equal((await s.screen.snapshot()).title, "first");
  s.write("\x1b]2;second title\x1b\\");
  assert.equal((await s.screen.snapshot()).title, "second title");
});

Deno.test("screen mirror shows the alternate screen of a full-screen program", async () => {
  using s = session(20, 4);
  s.write("$ vim\r\n");
  s.write("\x1b[?1049h\x1b[H\x1b[2J~\r\n~\r\n\x1b[4;1H-- INSERT --");
  const inside = await s.screen.snapshot();
  assert.equal(inside.alternate, true);
  assert.deepEqual(inside.lines, ["~", "~", "", "-- INSERT --"]);
  s.write("\x1b[?1049l");
  const after = await s.screen.snapshot();
  assert.equal(after.alternate, false);
  assert.deepEqual(after.lines, ["$ vim", "", "", ""]);
});

Deno.test("screen mirror keeps multibyte characters split across chunks", async () => {
  using s = session(20, 2);
  const bytes = enc.encode("héllo 日本 🎉");
  for (const b of bytes) s.ring.append(Uint8Array.of(b));
  const first = await s.screen.snapshot();
  assert.equal(first.lines[0], "héllo 日本 🎉");
  // Split between two snapshots as well.
  const more = enc.encode("ü");
  s.ring.append(more.subarray(0, 1));
  await s.screen.snapshot();
  s.ring.append(more.subarray(1));
  assert.equal((await s.screen.snapshot()).lines[0], "héllo 日本 🎉ü");
});

Deno.test("screen mirror replays the ring after it dropped unseen bytes", async () => {
  using s = session(10, 3, 64);
  s.write("old\r\n\x1b]0;kept\x07");
  assert.equal((await s.screen.snapshot()).lines[0], "old");
  for (let i = 0; i < 40; i++) s.write(`${i}\r\n`); // overflows the 64-byte ring
  s.write("\x1b[2J\x1b[Hnew");
  assert.ok(s.ring.startOffset > 5);
  const snap = await s.screen.snapshot();
  assert.deepEqual(snap.lines, ["new", "", ""]);
  // A title parsed before the replay survives it, as on a real terminal.
  assert.equal(snap.title, "kept");
  s.write("!");
  assert.equal((await s.screen.snapshot()).lines[0], "new!");
});

Deno.test("screen mirror applies a resize where it happened in the stream", async (t) => {
  await t.step("resize after a snapshot", async () => {
    using s = session(10, 3);
    s.write("0123456789ABC");
    assert.deepEqual((await s.screen.snapshot()).lines, ["0123456789", "ABC", ""]);
    s.screen.resize(20, 2);
    s.write("\r\nxyz");
    const snap = await s.screen.snapshot();
    assert.deepEqual([snap.cols, snap.rows], [20, 2]);
    assert.equal(snap.lines.length, 2);
    assert.equal(snap.lines[1], "xyz");
  });

  await t.step("bytes written before a resize wrap at the old width", async () => {
    using s = session(5, 4);
    s.write("abcdefg"); // wraps at 5 columns
    s.screen.resize(10, 4);
    s.write("\r\nhijklmnop");
    const snap = await s.screen.snapshot();
    assert.equal(snap.cols, 10);
    assert.deepEqual(snap.lines.slice(0, 3), ["abcde", "fg", "hijklmnop"]);
  });

  await t.step("several resizes before the first snapshot", async () => {
    using s = session(80, 24);
    s.screen.resize(100, 30);
    s.screen.resize(40, 10);
    s.write("x");
    s.screen.resize(50, 12);
    s.screen.resize(60, 12);
    const snap = await s.screen.snapshot();
    assert.deepEqual([snap.cols, snap.rows, snap.lines[0]], [60, 12, "x"]);
  });

  await t.step("a replay starts at the size in effect where the ring begins", async () => {
    using s = session(10, 3, 64);
    assert.equal((await s.screen.snapshot()).cols, 10);
    s.write("a\r\n");
    s.screen.resize(30, 3);
    s.write(`${"z".repeat(25)}\r\n`.repeat(4)); // overflows the ring past the resize
    s.screen.resize(40, 4);
    s.write("tail");
    const snap = await s.screen.snapshot();
    assert.deepEqual([snap.cols, snap.rows], [40, 4]);
    // Laid out at 30 columns, so no line wrapped at 10.
    assert.deepEqual(snap.lines, ["z".repeat(25), "z".repeat(25), "tail", ""]);
  });

  await t.step("a resize during a snapshot applies to the next one", async () => {
    using s = session(20, 3, 1 << 20);
    s.write("y".repeat(500_000));
    const pending = s.screen.snapshot();
    while (!s.screen.hasTerminal) await Promise.resolve();
    s.screen.resize(50, 6);
    s.write("\x1b[2J\x1b[H" + "w".repeat(45));
    assert.deepEqual([(await pending).cols, (await pending).lines[0]], [20, "y".repeat(20)]);
    const next = await s.screen.snapshot();
    assert.deepEqual([next.cols, next.rows, next.lines[0]], [50, 6, "w".repeat(45)]);
  });

  await t.step("invalid sizes are rejected", () => {
    using s = session();
    assert.throws(() => s.screen.resize(0, 10), RangeError);
    assert.throws(() => new ScreenMirror(s.ring, { cols: 80, rows: 1.5 }), RangeError);
  });
});

Deno.test("screen mirror release frees the terminal and the next snapshot replays the ring", async () => {
  using s = session(20, 3);
  s.write("\x1b]2;t\x07\x1b[?1049hfull screen");
  const before = await s.screen.snapshot();
  s.screen.release();
  assert.equal(s.screen.hasTerminal, false);
  s.screen.release();
  const after = await s.screen.snapshot();
  assert.equal(s.screen.hasTerminal, true);
  assert.deepEqual(after, before);
});

Deno.test("screen mirror serialises concurrent snapshots", async () => {
  using s = session(20, 3, 1 << 20);
  s.write("a".repeat(200_000));
  const first = s.screen.snapshot();
  s.write("\x1b[2J\x1b[Hdone");
  const second = s.screen.snapshot();
  const [a, b] = await Promise.all([first, second]);
  assert.equal(a.lines[2], "a".repeat(20));
  assert.deepEqual(b.lines, ["done", "", ""]);
});

Deno.test("screen mirror copes with snapshots queued behind a ring overflow", async () => {
  using s = session(10, 2, 64);
  s.write("a");
  const first = s.screen.snapshot(); // asks for offset 1, which is gone by the time it runs
  s.write("b".repeat(100));
  const second = s.screen.snapshot(); // asks for offset 101: still held, but parsed by the first
  s.write("\x1b[2J\x1b[Hz".repeat(2));
  const [a, b] = await Promise.all([first, second]);
  assert.deepEqual(a.lines, ["z", ""]);
  assert.deepEqual(b.lines, ["z", ""]);
});

Deno.test("screen mirror dispose is idempotent and stops snapshots", async (t) => {
  const stopped = (err: unknown) => err instanceof TermadaError && err.code === "STOPPED";

  await t.step("before the snapshot starts", async () => {
    const s = session();
    s.write("x");
    const pending = s.screen.snapshot();
    s.screen.dispose();
    s.screen.dispose();
    await assert.rejects(pending, stopped);
    await assert.rejects(s.screen.snapshot(), stopped);
    assert.equal(s.screen.hasTerminal, false);
    s.screen.resize(100, 30); // ignored, not an error
  });

  await t.step("while xterm is parsing (no timer may leak)", async () => {
    const s = session(80, 24, 1 << 20);
    s.write("x".repeat(1_000_000)); // parsed across several xterm timer turns
    const pending = s.screen.snapshot();
    while (!s.screen.hasTerminal) await Promise.resolve();
    s.screen.dispose();
    s.screen.dispose();
    await assert.rejects(pending, stopped);
    assert.equal(s.screen.hasTerminal, false);
  });
});

const rows = (c: { lines: { row: number; text: string }[] }) => c.lines.map((l) => [l.row, l.text]);

Deno.test("screen since without a cursor gives every row, then only what changed", async () => {
  using s = session(20, 4);
  s.write("$ ls\r\na b\r\n$ ");
  const first = await s.screen.since();
  assert.equal(first.full, true);
  assert.deepEqual(rows(first), [[0, "$ ls"], [1, "a b"], [2, "$ "], [3, ""]]);
  assert.deepEqual(first.cursor, { x: 2, y: 2 });
  assert.match(first.nextCursor, /^s[0-9a-z]+\.[0-9a-z]+$/);

  // Nothing new: no rows, the same cursor (an agent loop can poll cheaply).
  const idle = await s.screen.since(first.nextCursor);
  assert.deepEqual([idle.full, idle.lines, idle.nextCursor], [false, [], first.nextCursor]);
  // Output that leaves the text as it was (colours, cursor moves) changes no row either.
  s.write("\x1b[31m\x1b[0m\x1b[1;1H");
  const moved = await s.screen.since(first.nextCursor);
  assert.deepEqual([moved.lines, moved.cursor], [[], { x: 0, y: 0 }]);

  s.write("\x1b[3;3Hcat");
  const typed = await s.screen.since(first.nextCursor);
  assert.deepEqual([typed.full, rows(typed)], [false, [[2, "$ cat"]]]);
  assert.notEqual(typed.nextCursor, first.nextCursor);
  // snapshot() is unchanged in shape (session_screen's wire type) and shares the tracking.
  const snap = await s.screen.snapshot();
  assert.deepEqual(Object.keys(snap).sort(), [
    "alternate",
    "cols",
    "cursor",
    "lines",
    "rows",
    "title",
  ]);
  assert.deepEqual((await s.screen.since(typed.nextCursor)).lines, []);
});

Deno.test("screen since follows a vi-like full-screen session", async () => {
  using s = session(30, 6);
  s.write("$ vi notes\r\n");
  const shell = await s.screen.since();
  // Enter the alternate screen and draw the whole editor, as vim does.
  s.write("\x1b[?1049h\x1b[?1h\x1b=\x1b[?2004h\x1b[H\x1b[2J");
  s.write('hello\r\n~\r\n~\r\n~\r\n~\r\n\x1b[7m"notes" 1L\x1b[0m\x1b[1;1H');
  const editor = await s.screen.since(shell.nextCursor);
  assert.equal(editor.alternate, true);
  assert.deepEqual(editor.modes, { applicationCursor: true, bracketedPaste: true });
  // Every row differs from the shell's: all come back, though the cursor was not "full".
  assert.equal(editor.full, false);
  assert.deepEqual(rows(editor), [
    [0, "hello"],
    [1, "~"],
    [2, "~"],
    [3, "~"],
    [4, "~"],
    [5, '"notes" 1L'],
  ]);

  // Insert mode: the edited line and the status line change, nothing else.
  s.write("\x1b[6;1H\x1b[K-- INSERT --\x1b[1;6H world");
  const insert = await s.screen.since(editor.nextCursor);
  assert.deepEqual(rows(insert), [[0, "hello world"], [5, "-- INSERT --"]]);
  assert.deepEqual(insert.cursor, { x: 11, y: 0 });

  // A full redraw with the same text (vim's CTRL-L) changes no row.
  s.write("\x1b[H\x1b[2Jhello world\r\n~\r\n~\r\n~\r\n~\r\n-- INSERT --\x1b[1;12H");
  assert.deepEqual((await s.screen.since(insert.nextCursor)).lines, []);

  // An older cursor sees everything changed since it, merged.
  assert.deepEqual(rows(await s.screen.since(editor.nextCursor)), rows(insert));

  // Leaving: the shell's rows come back, the modes are reset by the program.
  s.write("\x1b[?2004l\x1b[?1l\x1b>\x1b[?1049l");
  const back = await s.screen.since(insert.nextCursor);
  assert.equal(back.alternate, false);
  assert.deepEqual(back.modes, { applicationCursor: false, bracketedPaste: false });
  assert.deepEqual(rows(back), [[0, "$ vi notes"], [1, ""], [2, ""], [3, ""], [4, ""], [5, ""]]);
  // Since the shell's cursor: rows that changed and changed back are reported (with their text),
  // never missed.
  assert.deepEqual(rows(await s.screen.since(shell.nextCursor)), rows(back));
});

Deno.test("screen since reports every row a scroll moved", async () => {
  using s = session(10, 3);
  s.write("a\r\nb\r\nc");
  const before = await s.screen.since();
  s.write("\r\nd");
  const after = await s.screen.since(before.nextCursor);
  assert.deepEqual(rows(after), [[0, "b"], [1, "c"], [2, "d"]]);
  // A scroll region (less, vim) moves only the rows inside it.
  s.write("\x1b[H\x1b[2Jtop\r\nx\r\nbar\x1b[1;2r\x1b[2;1H");
  const region = await s.screen.since();
  s.write("\r\ny\x1b[r");
  assert.deepEqual(rows(await s.screen.since(region.nextCursor)), [[0, "x"], [1, "y"]]);
});

Deno.test("screen since gives the full screen after a resize", async () => {
  using s = session(20, 3);
  s.write("one\r\ntwo");
  const before = await s.screen.since();
  s.screen.resize(30, 4);
  const resized = await s.screen.since(before.nextCursor);
  assert.deepEqual([resized.full, resized.cols, resized.rows], [true, 30, 4]);
  assert.deepEqual(rows(resized), [[0, "one"], [1, "two"], [2, ""], [3, ""]]);
  // The new cursor works again; the one from before the resize stays full.
  s.write("!");
  assert.deepEqual(rows(await s.screen.since(resized.nextCursor)), [[1, "two!"]]);
  assert.equal((await s.screen.since(before.nextCursor)).full, true);
  // A column-only change is a new size too.
  s.screen.resize(25, 4);
  assert.equal((await s.screen.since(resized.nextCursor)).full, true);
});

Deno.test("screen since reports modes and the title", async () => {
  using s = session(20, 2);
  assert.deepEqual(await s.screen.modes(), { applicationCursor: false, bracketedPaste: false });
  s.write("\x1b[?2004h");
  assert.deepEqual(await s.screen.modes(), { applicationCursor: false, bracketedPaste: true });
  s.write("\x1b[?1h");
  assert.deepEqual(await s.screen.modes(), { applicationCursor: true, bracketedPaste: true });
  s.write("\x1b[?2004l\x1b[?1l\x1b]2;top - 10:00\x07");
  const c = await s.screen.since();
  assert.deepEqual(c.modes, { applicationCursor: false, bracketedPaste: false });
  assert.equal(c.title, "top - 10:00");
  // A title change alone changes no row; the title is in every answer.
  s.write("\x1b]0;top - 10:01\x07");
  const next = await s.screen.since(c.nextCursor);
  assert.deepEqual([next.lines, next.title], [[], "top - 10:01"]);
});

Deno.test("screen since cursors survive release and replay, not another screen", async () => {
  using s = session(20, 2);
  using other = session(20, 2);
  s.write("kept\r\nsame");
  const c = await s.screen.since();
  s.screen.release();
  s.write("!");
  const replayed = await s.screen.since(c.nextCursor);
  assert.deepEqual([replayed.full, rows(replayed)], [false, [[1, "same!"]]]);

  other.write("x");
  const foreign = await other.screen.since(c.nextCursor);
  assert.deepEqual([foreign.full, foreign.lines.length], [true, 2]);
  // A cursor from the future of this screen (forged) is answered in full too.
  const id = c.nextCursor.slice(0, c.nextCursor.indexOf("."));
  assert.equal((await s.screen.since(`${id}.zz`)).full, true);

  const invalid = (err: unknown) => err instanceof TermadaError && err.code === "INVALID_ARGUMENT";
  for (const bad of ["", "c1a", "s.1", "sabc.", "sabc.01", "s!.1", `s${"a".repeat(17)}.1`]) {
    await assert.rejects(s.screen.since(bad), invalid, bad);
  }
});

Deno.test("screen since answers concurrent readers each as of its call", async () => {
  using s = session(20, 3, 1 << 20);
  s.write("start");
  const base = await s.screen.since();
  s.write("\r\n" + "a".repeat(100_000)); // keeps xterm busy for several turns
  const first = s.screen.since(base.nextCursor);
  s.write("\x1b[2J\x1b[Hdone");
  const second = s.screen.since(base.nextCursor);
  const [a, b] = await Promise.all([first, second]);
  assert.deepEqual(rows(a), [[0, "a".repeat(20)], [1, "a".repeat(20)], [2, "a".repeat(20)]]);
  assert.deepEqual(rows(b), [[0, "done"], [1, ""], [2, ""]]);
  // The first answer's cursor gives exactly what the second read changed.
  assert.deepEqual(rows(await s.screen.since(a.nextCursor)), rows(b));
});

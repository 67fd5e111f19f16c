/**
 * The dashboard's Replay view: the asciicast parser, search index and job-screen cut
 * (`dashboard/cast.ts`, DOM-free), then the player in a real headless Chromium over a real
 * daemon's recording (`GET /api/recordings`, `GET /api/sessions/:id/recording`): sized from the
 * cast's header and its resize events, play at 8×, pause, seek, search; and a hand-made cast with
 * bad lines served to the page (skipped and counted). The browser parts are skipped when
 * /usr/bin/chromium is missing.
 */
import assert from "node:assert/strict";
import type { Browser, HTTPRequest, Page } from "puppeteer-core";
import { call, operatorFetch, startDaemon, stdioClient, tempHome } from "./_daemon.ts";
import { closeBrowser, haveChromium, launchBrowser, settled, watchConsole } from "./_browser.ts";
import { CAST_LIMITS, CastError, CastIndex, jobScreen, parseCast } from "../dashboard/cast.ts";

const HEADER = JSON.stringify({ version: 2, width: 80, height: 24, timestamp: 1_700_000_000 });

Deno.test("cast parser keeps valid events, skips and counts bad lines, holds time order", () => {
  const text = [
    HEADER,
    `[0.1, "o", "hello\\r\\n"]`,
    `not json`,
    `[0.2, "o"]`,
    `[-1, "o", "negative"]`,
    `[0.3, "r", "100x30"]`,
    `[0.35, "r", "0x30"]`,
    `[0.4, "i", "typed"]`,
    `[0.2, "o", "late\\r\\n"]`,
    `{"version": 2, "width": 90, "height": 20}`,
    `[0.1, "o", "next part"]`,
    ``,
  ].join("\n");
  const cast = parseCast(text);
  assert.deepEqual(cast.header, { version: 2, width: 80, height: 24, timestamp: 1_700_000_000 });
  assert.equal(cast.skipped, 4);
  assert.deepEqual(cast.events.map((e) => [e.t, e.code, e.data]), [
    [0.1, "o", "hello\r\n"],
    [0.3, "r", "100x30"],
    // Times never go back; a later header continues the timeline and resizes.
    [0.3, "o", "late\r\n"],
    [0.3, "r", "90x20"],
    [0.4, "o", "next part"],
  ]);
  assert.equal(cast.duration, 0.4);
  assert.equal(cast.truncated, false);
  assert.throws(() => parseCast(`{"version": 1}\n`), CastError);
  assert.throws(() => parseCast(""), CastError);
  assert.throws(() => parseCast(`{"version": 2, "width": 0, "height": 24}`), CastError);
  assert.ok(CAST_LIMITS.maxBytes === 64 * 1024 * 1024 && CAST_LIMITS.maxEvents === 1_000_000);
});

Deno.test("cast parser stops at the event bound and says it was cut", () => {
  const lines = [HEADER];
  for (let i = 0; i < CAST_LIMITS.maxEvents + 5; i++) lines.push(`[${i / 1000}, "o", "x"]`);
  const cast = parseCast(lines.join("\n"));
  assert.equal(cast.events.length, CAST_LIMITS.maxEvents);
  assert.equal(cast.truncated, true);
});

Deno.test("cast search finds text across events and escapes, first and next", () => {
  const cast = parseCast([
    HEADER,
    `[0.1, "o", "\\u001b[31mfoo\\u001b[0m ba"]`,
    `[0.2, "o", "r\\r\\n"]`,
    `[0.3, "o", "FOO bar again"]`,
  ].join("\n"));
  const idx = new CastIndex(cast);
  const a = idx.find("foo bar");
  assert.deepEqual(a && { event: a.event }, { event: 1 });
  const b = idx.find("foo bar", a!.offset + 1);
  assert.equal(b?.event, 2);
  assert.equal(idx.find("foo bar", b!.offset + 1), undefined);
  assert.equal(idx.count("foo"), 2);
});

Deno.test("job screen keeps a full-screen program's last frame", () => {
  const cast = parseCast([
    HEADER,
    `[0.5, "o", "$ prompt"]`,
    `[1.0, "o", "\\u001b[?1049h\\u001b[Hframe-1"]`,
    `[1.5, "o", "\\u001b[Hframe-2"]`,
    `[2.0, "o", "bye\\u001b[?1049l$ "]`,
    `[5.0, "o", "next job"]`,
  ].join("\n"));
  const s = jobScreen(cast, 0.9, 2.1);
  assert.equal(s.fullScreen, true);
  assert.deepEqual(s.writes.map((e) => e.data), [
    "$ prompt",
    "\u001b[?1049h\u001b[Hframe-1",
    "\u001b[Hframe-2",
    "bye",
  ]);
  const plain = jobScreen(cast, 4.9, 5.1);
  assert.equal(plain.fullScreen, false);
  assert.equal(plain.writes.length, 5);
});

const rows = (page: Page, sel: string) =>
  page.$eval(sel, (el) => [...el.children].map((r) => r.textContent ?? "").join("\n"));
const attr = (page: Page, sel: string, name: string) =>
  page.$eval(sel, (el, n) => el.getAttribute(n as string), name);

Deno.test({
  name: "replay: the player plays, pauses, seeks and searches a daemon's session recording",
  ignore: !haveChromium(),
  // puppeteer keeps its own timers and sockets; the browser is closed and killed in finally.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const home = await tempHome();
    const profile = await Deno.makeTempDir({ prefix: "termada-chromium-" });
    const shots = await Deno.makeTempDir({ prefix: "termada-shots-" });
    await using daemon = await startDaemon(home);
    const url = /Dashboard\s+(\S+)/.exec(daemon.stderr())?.[1];
    assert.ok(url, daemon.stderr());
    const op = operatorFetch(daemon);
    await using client = await stdioClient(home);
    const r = await call(client, "exec_run", { command: ["echo replay-$((20+1))"] });
    const sid = String(r.session_id);
    await call(client, "exec_run", { command: ["sleep 1; echo replay-two"], session: sid });
    const resized = await op(`/sessions/${sid}/resize`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ cols: 100, rows: 30 }),
    });
    assert.equal(resized.status, 200);
    await call(client, "exec_run", { command: ["echo after-resize"], session: sid });

    // The API the player reads (the recordings routes of issue 16).
    const list = await op("/recordings");
    assert.equal(list.status, 200);
    const recs = await list.json() as { recordings: { session_id: string }[] };
    assert.ok(recs.recordings.some((x) => x.session_id === sid), JSON.stringify(recs));
    const castRes = await op(`/sessions/${sid}/recording`);
    assert.match(castRes.headers.get("content-type") ?? "", /application\/x-asciicast/);
    const cast = parseCast(await castRes.text());
    assert.equal(cast.skipped, 0);

    let browser: Browser | undefined;
    try {
      browser = await launchBrowser(profile);
      const page = await browser.newPage();
      const problems = watchConsole(page);
      await page.setViewport({ width: 1280, height: 900 });
      await page.goto(url, { waitUntil: "domcontentloaded" });
      await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });
      await page.click('[data-tab="replay"]');
      await page.waitForSelector(`[data-play-recording="${sid}"]`, { timeout: 10_000 });
      await page.click(`[data-play-recording="${sid}"]`);
      const player = `[data-player="${sid}"]`;
      const term = `${player} [data-replay-term]`;
      // Sized from the cast's header, nothing shown yet (position 0).
      await page.waitForSelector(`${player} [data-cast-events]`, { timeout: 15_000 });
      await page.waitForSelector(`${player} [data-cast-size]`, { timeout: 5_000 });
      assert.equal(
        await attr(page, `${player} [data-cast-size]`, "data-cast-size"),
        `${cast.header.width}x${cast.header.height}`,
      );
      // The page read the cast later: the shell may have drawn its prompt since.
      assert.ok(
        Number(await attr(page, `${player} [data-cast-events]`, "data-cast-events")) >=
          cast.events.length,
      );
      assert.doesNotMatch(await rows(page, `${term} .xterm-rows`), /replay-21/);
      await settled(page);
      const fit = await page.evaluate(`(() => {
        const box = document.querySelector('${term}');
        return {
          box: box.clientWidth,
          screen: box.querySelector(".xterm-screen").offsetWidth,
          height: box.querySelector(".xterm-screen").offsetHeight,
          room: innerHeight - 260,
          font: Number(box.dataset.font),
        };
      })()`) as { box: number; screen: number; height: number; room: number; font: number };
      // The largest font at which the grid fits: the box's width or the room left in height.
      assert.ok(fit.screen <= fit.box && fit.height <= fit.room, JSON.stringify(fit));
      assert.ok(
        fit.font === 18 || fit.screen >= fit.box * 0.85 || fit.height >= fit.room * 0.85,
        JSON.stringify(fit),
      );

      // Play at 8×: the output appears in order, the resize applies, it stops at the end.
      await page.select(`${player} [data-speed]`, "8");
      await page.click(`${player} [data-play]`);
      await page.waitForSelector(`${player} [data-pause]`, { timeout: 5_000 });
      await page.waitForFunction(
        `(document.querySelector('${term} .xterm-rows')?.textContent ?? "").includes("replay-21")`,
        { timeout: 15_000 },
      );
      await page.waitForFunction(
        `!!document.querySelector('${player} [data-play]') && ` +
          `(document.querySelector('${term} .xterm-rows')?.textContent ?? "").includes("after-resize")`,
        { timeout: 20_000 },
      );
      assert.equal(await attr(page, `${player} [data-cast-size]`, "data-cast-size"), "100x30");
      assert.equal(await attr(page, term, "data-cols"), "100");
      const end = Number(await attr(page, `${player} [data-time]`, "data-time"));
      const duration = Number(await attr(page, `${player} [data-time]`, "data-duration"));
      assert.ok(duration >= cast.duration - 0.01, `${duration} vs ${cast.duration}`);
      assert.equal(end, duration);
      await page.screenshot({ path: `${shots}/replay-end.png` });

      // Pause: playing again from the end starts over; pausing holds the position.
      await page.click(`${player} [data-play]`);
      await page.waitForSelector(`${player} [data-pause]`, { timeout: 5_000 });
      await page.click(`${player} [data-pause]`);
      const held = Number(await attr(page, `${player} [data-time]`, "data-time"));
      assert.ok(held < end, `${held} < ${end}`);
      await new Promise((res) => setTimeout(res, 300));
      assert.equal(Number(await attr(page, `${player} [data-time]`, "data-time")), held);

      // Seek with the slider: back to 0 shows an empty terminal at the header's size.
      await page.$eval(`${player} [data-seek]`, (el) => {
        const input = el as unknown as { value: string; dispatchEvent(e: unknown): void };
        input.value = "0";
        input.dispatchEvent(
          new (globalThis as unknown as { Event: typeof Event }).Event("input", {
            bubbles: true,
          }),
        );
      });
      await page.waitForFunction(
        `document.querySelector('${player} [data-time]')?.getAttribute("data-time") === "0.00"`,
        { timeout: 5_000 },
      );
      await page.waitForFunction(
        `!(document.querySelector('${term} .xterm-rows')?.textContent ?? "").includes("replay-21")`,
        { timeout: 5_000 },
      );
      assert.equal(await attr(page, term, "data-cols"), String(cast.header.width));

      // Search: jumps to the first match (the typed command line), Next to the output line.
      await page.type(`${player} [data-search]`, "replay-two");
      await page.click(`${player} [data-find]`);
      await page.waitForSelector(`${player} [data-match^="1/"]`, { timeout: 5_000 });
      const t1 = Number(await attr(page, `${player} [data-time]`, "data-time"));
      assert.ok(t1 > 0 && t1 < end, String(t1));
      // xterm parses and paints a write on a later frame.
      await page.waitForFunction(
        `(document.querySelector('${term} .xterm-rows')?.textContent ?? "").includes("replay-two")`,
        { timeout: 5_000 },
      );
      assert.doesNotMatch(await rows(page, `${term} .xterm-rows`), /after-resize/);
      await page.click(`${player} [data-find-next]`);
      await page.waitForSelector(`${player} [data-match^="2/"]`, { timeout: 5_000 });
      const t2 = Number(await attr(page, `${player} [data-time]`, "data-time"));
      assert.ok(t2 >= t1, `${t2} >= ${t1}`);
      await page.waitForFunction(
        `[...document.querySelector('${term} .xterm-rows').children]` +
          `.some((r) => /^replay-two\\s*$/.test(r.textContent))`,
        { timeout: 5_000 },
      );
      await page.screenshot({ path: `${shots}/replay-search.png` });
      // No match says so.
      await page.$eval(`${player} [data-search]`, (el) => {
        (el as unknown as { value: string }).value = "";
      });
      await page.type(`${player} [data-search]`, "never-printed-zzz");
      await page.click(`${player} [data-find]`);
      await page.waitForSelector(`${player} [data-match="none"]`, { timeout: 5_000 });
      assert.deepEqual(problems, []);
    } finally {
      await closeBrowser(browser, profile);
    }
  },
});

Deno.test({
  name: "replay: a served cast with bad lines and resizes plays; bad lines are counted",
  ignore: !haveChromium(),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const home = await tempHome();
    const profile = await Deno.makeTempDir({ prefix: "termada-chromium-" });
    await using daemon = await startDaemon(home);
    const url = /Dashboard\s+(\S+)/.exec(daemon.stderr())?.[1];
    assert.ok(url, daemon.stderr());
    const fake = "sess_served0001";
    const cast = [
      JSON.stringify({ version: 2, width: 60, height: 12, timestamp: 1_700_000_000 }),
      `[0.05, "o", "first-line\\r\\n"]`,
      `{oops`,
      `[0.1, "r", "70x14"]`,
      `[0.15, "o", "\\u001b[1msecond-line\\u001b[0m\\r\\n"]`,
      `[0.2, "x"]`,
      `[0.25, "o", "third-line\\r\\n"]`,
    ].join("\n") + "\n";
    let browser: Browser | undefined;
    try {
      browser = await launchBrowser(profile);
      const page = await browser.newPage();
      const problems = watchConsole(page);
      // The page reads this list and cast as the recordings API would serve them.
      await page.setRequestInterception(true);
      page.on("request", (req: HTTPRequest) => {
        const path = new URL(req.url()).pathname;
        if (path === "/api/recordings") {
          req.respond({
            status: 200,
            contentType: "application/json",
            body: JSON.stringify({
              recordings: [{
                session_id: fake,
                owner: "served",
                live: false,
                bytes: cast.length,
                parts: 1,
                started_at: new Date(1_700_000_000_000).toISOString(),
                ended_at: new Date(1_700_000_001_000).toISOString(),
              }],
              total: 1,
              enabled: true,
            }),
          });
        } else if (path === `/api/sessions/${fake}/recording`) {
          req.respond({ status: 200, contentType: "application/x-asciicast", body: cast });
        } else req.continue();
      });
      await page.setViewport({ width: 1000, height: 800 });
      await page.goto(url, { waitUntil: "domcontentloaded" });
      await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });
      await page.click('[data-tab="replay"]');
      await page.waitForSelector(`[data-play-recording="${fake}"]`, { timeout: 10_000 });
      await page.click(`[data-play-recording="${fake}"]`);
      const player = `[data-player="${fake}"]`;
      await page.waitForSelector(`${player} [data-cast-skipped="2"]`, { timeout: 10_000 });
      await page.waitForSelector(`${player} [data-cast-size]`, { timeout: 5_000 });
      assert.equal(await attr(page, `${player} [data-cast-events]`, "data-cast-events"), "4");
      assert.equal(await attr(page, `${player} [data-cast-size]`, "data-cast-size"), "60x12");
      await page.select(`${player} [data-speed]`, "0.5");
      await page.click(`${player} [data-play]`);
      const term = `${player} [data-replay-term]`;
      await page.waitForFunction(
        `(document.querySelector('${term} .xterm-rows')?.textContent ?? "").includes("third-line")`,
        { timeout: 10_000 },
      );
      assert.equal(await attr(page, `${player} [data-cast-size]`, "data-cast-size"), "70x14");
      assert.match(await rows(page, `${term} .xterm-rows`), /first-line\s*\nsecond-line\s*\nthird/);
      assert.deepEqual(problems, []);
    } finally {
      await closeBrowser(browser, profile);
    }
  },
});

/**
 * Dashboard defects found by trying it (issue 16), each checked in a real headless Chromium
 * against a real daemon: terminals fit their card and refit with the window (the PTY size
 * shown), more sessions than stream at once are paged, a parked command says so in its
 * terminal (Approve there), a full-screen job shows its rendered screen, a command refused by
 * the stop-all barrier shows as refused — and no view causes a console error, a CSP refusal,
 * a failed request or an HTTP error. Skipped when /usr/bin/chromium is missing.
 */
import assert from "node:assert/strict";
import type { Browser, Page } from "puppeteer-core";
import { call, operatorFetch, startDaemon, stdioClient, tempHome } from "./_daemon.ts";
import { closeBrowser, haveChromium, launchBrowser, settled, watchConsole } from "./_browser.ts";

/** The terminal box, its xterm screen and the font the fit chose. */
async function fitOf(page: Page, sid: string) {
  return await page.evaluate(`(() => {
    const box = document.querySelector('[data-session="${sid}"] .term');
    const cs = getComputedStyle(box);
    return {
      avail: box.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight),
      screen: box.querySelector(".xterm-screen").offsetWidth,
      font: Number(box.dataset.font),
    };
  })()`) as { avail: number; screen: number; font: number };
}

const rowsText = (page: Page, sel: string) =>
  page.$eval(sel, (el) => [...el.children].map((r) => r.textContent ?? "").join("\n"));

Deno.test({
  name:
    "dashboard: terminals fit and refit, 7 sessions page, approval banner, job screen, refused at stop-all, a clean console",
  ignore: !haveChromium(),
  // puppeteer keeps its own timers and sockets; the browser is closed and killed in finally.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const home = await tempHome();
    await Deno.writeTextFile(
      `${home}/config.yaml`,
      `policies:\n  default:\n    confirm: ["touch *"]\napprovals:\n  confirm_timeout_ms: 60000\n`,
    );
    const profile = await Deno.makeTempDir({ prefix: "termada-chromium-" });
    const shots = await Deno.makeTempDir({ prefix: "termada-shots-" });
    await using daemon = await startDaemon(home);
    const url = /Dashboard\s+(\S+)/.exec(daemon.stderr())?.[1];
    assert.ok(url, daemon.stderr());
    const op = operatorFetch(daemon);
    await using client = await stdioClient(home);

    // Seven sessions, each with its own output.
    const sids: string[] = [];
    const first = await call(client, "exec_run", { command: ["echo sess-0-$((1+1))"] });
    sids.push(String(first.session_id));
    for (let i = 1; i < 7; i++) {
      const s = await call(client, "session_create", {});
      sids.push(String(s.session_id));
      await call(client, "exec_run", { command: [`echo sess-${i}-$((1+1))`], session: sids[i] });
    }
    // A full-screen program: two frames on the alternate screen, then back to the shell.
    const full = await call(client, "exec_run", {
      command: [
        "printf '\\033[?1049h\\033[2J\\033[HFRAME-ONE'; sleep 0.4; " +
        "printf '\\033[2J\\033[HFRAME-TWO-final'; sleep 0.4; printf '\\033[?1049l'",
      ],
      session: sids[1],
    });
    assert.equal(full.status, "exited");
    // Its text output runs the frames together (the cleaner drops the escapes).
    assert.match(String(full.output), /FRAME-ONE.*FRAME-TWO-final/s);
    const listed = await (await op("/sessions")).json() as {
      sessions: { session_id: string; cols: number; rows: number }[];
    };
    const s0 = listed.sessions.find((s) => s.session_id === sids[0])!;

    let browser: Browser | undefined;
    try {
      browser = await launchBrowser(profile);
      const page = await browser.newPage();
      const problems = watchConsole(page);
      await page.setViewport({ width: 1400, height: 900 });
      await page.goto(url, { waitUntil: "domcontentloaded" });
      await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });

      // (2) Seven sessions: a page of 6 cards (4 stream, 2 offer Follow live), a pager, chips.
      await page.waitForFunction(
        `document.querySelectorAll("[data-session]").length === 6 && ` +
          `document.querySelectorAll("[data-session] .xterm").length === 4 && ` +
          `document.querySelector("[data-page-info]")?.getAttribute("data-page-info") === "1/2"`,
        { timeout: 15_000 },
      );
      assert.equal(await page.$$eval("[data-session-chip]", (els) => els.length), 7);

      // (1) The terminal fills its card's width at the PTY's size, which the header shows.
      await page.waitForFunction(
        `(document.querySelector('[data-session="${sids[0]}"] .xterm-rows')?.textContent ?? "")` +
          `.includes("sess-0-2")`,
        { timeout: 15_000 },
      );
      await settled(page);
      assert.equal(
        await page.$eval(
          `[data-session="${sids[0]}"] [data-pty-size]`,
          (el) => el.getAttribute("data-pty-size"),
        ),
        `${s0.cols}x${s0.rows}`,
      );
      assert.equal(
        await page.$eval(`[data-session="${sids[0]}"] .term`, (el) => el.getAttribute("data-cols")),
        String(s0.cols),
      );
      const wide = await fitOf(page, sids[0]!);
      assert.ok(wide.screen <= wide.avail + 1, JSON.stringify(wide));
      assert.ok(wide.screen >= wide.avail * 0.85, `uses the width: ${JSON.stringify(wide)}`);
      assert.ok(wide.font >= 7 && wide.font <= 18, JSON.stringify(wide));
      await page.screenshot({ path: `${shots}/sessions-wide.png` });
      // Another window size refits: at 1000 px one column of wider cards, a larger font.
      await page.setViewport({ width: 1000, height: 900 });
      await page.waitForFunction(
        `Number(document.querySelector('[data-session="${sids[0]}"] .term')?.dataset.font) !== ` +
          `${wide.font}`,
        { timeout: 10_000 },
      );
      await settled(page);
      const narrow = await fitOf(page, sids[0]!);
      assert.ok(narrow.screen <= narrow.avail + 1, JSON.stringify(narrow));
      assert.ok(narrow.screen >= narrow.avail * 0.85, JSON.stringify(narrow));
      assert.ok(narrow.font > wide.font, JSON.stringify({ wide, narrow }));
      await page.setViewport({ width: 1400, height: 900 });

      // (2) The next page shows the 7th session live; page 1's streams are closed.
      await page.click("[data-page-next]");
      await page.waitForFunction(
        `document.querySelectorAll("[data-session]").length === 1 && ` +
          `(document.querySelector('[data-session="${sids[6]}"] .xterm-rows')?.textContent ?? "")` +
          `.includes("sess-6-2")`,
        { timeout: 15_000 },
      );
      assert.equal(await page.$$eval("[data-session] .xterm", (els) => els.length), 1);
      // A chip opens its session's page and follows it (here: a card page 1 had not streamed).
      const notLive = sids.slice(0, 6).filter((_, i) => i >= 4);
      await page.click(`[data-session-chip="${notLive[0]}"]`);
      await page.waitForFunction(
        `document.querySelector("[data-page-info]")?.getAttribute("data-page-info") === "1/2" && ` +
          `!!document.querySelector('[data-session="${notLive[0]}"] .xterm')`,
        { timeout: 15_000 },
      );
      assert.equal(await page.$$eval("[data-session] .xterm", (els) => els.length), 4);
      await page.screenshot({ path: `${shots}/sessions-pager.png` });

      // (3) A parked command says so in its session's terminal; Approve there runs it.
      const live = await page.$$eval(
        "[data-session]",
        (els) =>
          els.filter((el) => el.querySelector(".xterm")).map((el) =>
            el.getAttribute("data-session")!
          ),
      );
      const target = live[0]!;
      const parked = await call(client, "exec_run", {
        command: [`touch ${profile}/approved-in-terminal`],
        session: target,
      });
      assert.equal(parked.status, "pending_approval");
      const apr = String(parked.approval_id);
      const banner = `[data-session="${target}"] [data-approval-banner="${apr}"]`;
      await page.waitForSelector(banner, { visible: true, timeout: 10_000 });
      assert.match(
        await page.$eval(banner, (el) => el.textContent ?? ""),
        new RegExp(`Waiting for approval ${apr}.*touch`),
      );
      // The chip marks it too.
      assert.match(
        await page.$eval(`[data-session-chip="${target}"]`, (el) => el.textContent ?? ""),
        /approval/,
      );
      await page.screenshot({ path: `${shots}/approval-banner.png` });
      await page.click(`${banner} [data-banner-approve]`);
      const ran = await call(client, "exec_wait", { job_id: parked.job_id, timeout_ms: 10_000 });
      assert.equal(ran.status, "exited");
      await page.waitForFunction(`!document.querySelector('${banner}')`, { timeout: 10_000 });
      assert.ok(Deno.statSync(`${profile}/approved-in-terminal`).isFile);

      // (4) The full-screen job's view opens on its rendered screen: the last frame only.
      await page.click('[data-tab="jobs"]');
      await page.waitForSelector(`[data-open-job="${full.job_id}"]`, { timeout: 10_000 });
      await page.click(`[data-open-job="${full.job_id}"]`);
      await page.waitForSelector("[data-full-screen]", { timeout: 15_000 });
      await page.waitForFunction(
        `(document.querySelector("[data-job-screen] .xterm-rows")?.textContent ?? "")` +
          `.includes("FRAME-TWO-final")`,
        { timeout: 15_000 },
      );
      const screen = await rowsText(page, "[data-job-screen] .xterm-rows");
      assert.doesNotMatch(screen, /FRAME-ONE/);
      assert.match(screen.split("\n")[0]!, /^FRAME-TWO-final\s*$/);
      assert.equal(
        await page.$eval('[data-output-view="screen"]', (el) => el.getAttribute("aria-pressed")),
        "true",
      );
      await page.screenshot({ path: `${shots}/job-screen.png` });
      // Text shows the cleaned output (frames run together), as agents read it.
      await page.click('[data-output-view="text"]');
      assert.match(await page.$eval("[data-output]", (el) => el.textContent ?? ""), /FRAME-ONE/);
      await page.click("[data-close-output]");

      // (5) During stop-all a new command is refused; the Jobs view says refused, not failed.
      assert.equal((await op("/stop", { method: "POST", body: "{}" })).status, 200);
      const refused = await client.callTool({
        name: "exec_run",
        arguments: { command: ["echo too-late"], session: sids[2] },
      });
      assert.equal(refused.isError, true);
      const err = (refused.structuredContent as {
        error: { code: string; details?: { job_id?: string } };
      }).error;
      assert.equal(err.code, "STOPPED");
      const jobId = err.details?.job_id;
      assert.ok(jobId, JSON.stringify(err));
      // The engine lists it as denied, with the barrier as its reason.
      const jobs = await (await op("/jobs?limit=200")).json() as {
        jobs: { job_id: string; status: string; reason?: string }[];
      };
      const listed = jobs.jobs.find((j) => j.job_id === jobId);
      assert.equal(listed?.status, "denied");
      assert.ok(listed?.reason, "the refusal says why");
      await page.waitForFunction(
        `document.querySelector('[data-job="${jobId}"]')?.getAttribute("data-status") === "refused"`,
        { timeout: 10_000 },
      );
      assert.deepEqual(
        await page.$eval(
          `[data-job="${jobId}"] [data-shown-status]`,
          (el) => [el.textContent, el.getAttribute("title")],
        ),
        ["refused", "stop-all barrier"],
      );
      await page.screenshot({ path: `${shots}/jobs-refused.png` });
      assert.equal((await op("/resume", { method: "POST", body: "{}" })).status, 200);

      // (6) Every view, and a reload: no console error, CSP refusal, failed request or ≥ 400.
      const tabs = await page.$$eval(
        "[data-tab]",
        (els) => els.map((el) => el.getAttribute("data-tab")!),
      );
      assert.ok(tabs.length >= 11, tabs.join(","));
      for (const t of tabs) {
        await page.click(`[data-tab="${t}"]`);
        await settled(page);
        await new Promise((r) => setTimeout(r, 300));
      }
      await page.reload({ waitUntil: "domcontentloaded" });
      await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });
      await page.waitForSelector("[data-session] .xterm", { timeout: 10_000 });
      await settled(page);
      assert.deepEqual(problems, []);
    } finally {
      await closeBrowser(browser, profile);
    }
  },
});

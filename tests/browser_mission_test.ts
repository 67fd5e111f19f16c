/**
 * The dashboard's Missions view in a real headless Chromium against a real daemon: an agent's
 * mission (created over MCP) is listed with its progress; its detail shows the step the runtime
 * verified (with the evidence job), the mission's pending approval pinned at the top (approving
 * it there runs the job), live updates from the event stream, the report download (Markdown,
 * fetched with the token in a header), Open terminal, a deep link, a phone-sized screen without
 * horizontal scroll, Cancel, and the stale state. Skipped when /usr/bin/chromium is missing
 * (apt-get install -y chromium).
 */
import assert from "node:assert/strict";
import type { Browser, HTTPResponse } from "puppeteer-core";
import { call, startDaemon, stdioClient, tempHome } from "./_daemon.ts";
import { closeBrowser, haveChromium, launchBrowser, watchProblems } from "./_browser.ts";

Deno.test({
  name: "dashboard: Missions view shows verified steps, a pinned approval and the report",
  ignore: !haveChromium(),
  // puppeteer keeps its own timers and sockets; the browser is closed and killed in finally.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const home = await tempHome();
    // `touch` needs the operator's approval: the Missions view pins it and grants it.
    await Deno.writeTextFile(
      `${home}/config.yaml`,
      `policies:\n  default:\n    confirm: ["touch *"]\napprovals:\n  confirm_timeout_ms: 60000\n`,
    );
    const profile = await Deno.makeTempDir({ prefix: "termada-chromium-" });
    const shots = await Deno.makeTempDir({ prefix: "termada-shots-" });
    const downloads = await Deno.makeTempDir({ prefix: "termada-downloads-" });
    await using daemon = await startDaemon(home);
    const url = /Dashboard\s+(\S+)/.exec(daemon.stderr())?.[1];
    assert.ok(url, daemon.stderr());
    const token = new URL(url).searchParams.get("token")!;
    await using client = await stdioClient(home);

    // The agent's mission: a job in its session proves step 1; a parked `touch` waits.
    const mission = await call(client, "mission_create", {
      title: "Browser mission",
      goal: "Prove the dashboard shows what the runtime verified.",
      plan: ["Probe the service", "Touch the marker", "Write the report"],
    });
    const mid = String(mission.mission_id);
    const sid = String(mission.session_id);
    assert.match(mid, /^msn_/);
    const probe = await call(client, "exec_run", {
      command: ["echo probe-$((40+2))"],
      session: sid,
      mode: "background",
    });
    assert.equal(probe.output, "probe-42\n");
    // The same probe in the session's own terminal (an argv job does not print there): what the
    // Sessions view shows below.
    const shown = await call(client, "exec_run", {
      command: ["echo probe-$((40+2))"],
      session: sid,
    });
    assert.equal(shown.output, "probe-42\n");
    const jobId = String(probe.job_id);
    const updated = await call(client, "mission_update", {
      mission_id: mid,
      step_id: "s1",
      step_status: "passed",
      job_id: jobId,
      note: "the probe answered",
    });
    assert.equal((updated.progress as { passed: number }).passed, 1, JSON.stringify(updated));
    const target = `${profile}/approved-from-mission`;
    const parked = await call(client, "exec_run", {
      command: [`touch ${target}`],
      session: sid,
      mode: "background",
    });
    assert.equal(parked.status, "pending_approval", JSON.stringify(parked));
    const apr = String(parked.approval_id);

    let browser: Browser | undefined;
    try {
      browser = await launchBrowser(profile);
      const page = await browser.newPage();
      const problems = watchProblems(page);
      // Downloads (the report's Blob URL) land in a temp dir.
      const cdp = await page.createCDPSession();
      await cdp.send("Browser.setDownloadBehavior", {
        behavior: "allow",
        downloadPath: downloads,
      });
      await page.setViewport({ width: 1280, height: 800 });
      await page.goto(url, { waitUntil: "domcontentloaded" });
      await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });

      // The list: the mission with its progress and its pending approval.
      await page.click('[data-tab="missions"]');
      const row = `[data-mission-row="${mid}"]`;
      await page.waitForSelector(`${row} [data-progress="1/3"]`, {
        visible: true,
        timeout: 10_000,
      });
      const rowText = await page.$eval(row, (el) => el.textContent ?? "");
      assert.match(rowText, /Browser mission/);
      assert.match(rowText, /1\/3/);
      await page.waitForSelector(`${row} [data-mission-pending="1"]`, { timeout: 10_000 });
      assert.equal(
        await page.$eval(`${row} [data-mission-status]`, (el) => el.textContent),
        "needs attention",
      );
      await page.waitForFunction(`location.hash === "#/missions"`, { timeout: 5_000 });
      await page.screenshot({ path: `${shots}/missions-list.png` });

      // The detail: step 1 verified by runtime (its evidence job), the others not.
      await page.click(row);
      const detail = `[data-mission-detail="${mid}"]`;
      const s1 = `${detail} [data-step="s1"]`;
      await page.waitForSelector(`${s1}[data-verified="true"]`, { timeout: 10_000 });
      const s1Text = await page.$eval(s1, (el) => el.textContent ?? "");
      assert.match(s1Text, /verified by runtime/);
      assert.ok(s1Text.includes(jobId), s1Text);
      assert.match(s1Text, /exit code 0/);
      assert.match(s1Text, /echo probe-\$\(\(40\+2\)\)/);
      assert.match(s1Text, /[0-9a-f]{64}/);
      assert.match(s1Text, /the probe answered/);
      assert.equal(
        await page.$eval(`${detail} [data-step="s2"]`, (el) => el.getAttribute("data-verified")),
        "false",
      );
      await page.waitForFunction(`location.hash === "#/missions/${mid}"`, { timeout: 5_000 });
      // The timeline shows what the runtime observed.
      await page.waitForSelector(`${detail} [data-timeline-event="job.finished"]`, {
        timeout: 10_000,
      });

      // The evidence job's id opens its output.
      await page.click(`${s1} [data-evidence-job="${jobId}"]`);
      await page.waitForFunction(
        `document.querySelector('${detail} [data-job-output="${jobId}"] [data-output]')` +
          `?.textContent.includes("probe-42")`,
        { timeout: 10_000 },
      );
      await page.click(`${detail} [data-job-output="${jobId}"] [data-close-output]`);

      // The pending approval is pinned at the top of the detail, above the plan.
      const pinned = `${detail} [data-mission-approvals] [data-mission-approval="${apr}"]`;
      await page.waitForSelector(`${pinned} button.approve`, { visible: true, timeout: 10_000 });
      const above = await page.evaluate(
        `(() => {
          const top = (sel) => document.querySelector('${detail} ' + sel).getBoundingClientRect();
          const box = top("[data-mission-approvals]").bottom;
          return box <= top(".mission-head").top && box <= top(".mission-steps").top;
        })()`,
      );
      assert.equal(above, true);
      assert.match(await page.$eval(pinned, (el) => el.textContent ?? ""), /touch /);
      await page.screenshot({ path: `${shots}/mission-detail.png`, fullPage: true });

      // Approve from there: the job runs, the pin goes, the mission is running again.
      await page.click(`${pinned} button.approve`);
      const done = await call(client, "exec_wait", { job_id: parked.job_id, timeout_ms: 10_000 });
      assert.equal(done.status, "exited", JSON.stringify(done));
      Deno.statSync(target);
      await page.waitForFunction(`!document.querySelector('${pinned}')`, { timeout: 10_000 });
      await page.waitForFunction(
        `document.querySelector('${detail} .mission-head [data-mission-status]')` +
          `?.getAttribute("data-mission-status") === "running"`,
        { timeout: 10_000 },
      );

      // Live: the agent marks step 2 with the approved job; the open view follows (events).
      await call(client, "mission_update", {
        mission_id: mid,
        step_id: "s2",
        step_status: "passed",
        job_id: parked.job_id,
      });
      await page.waitForSelector(
        `${detail} [data-step="s2"][data-verified="true"] [data-evidence-job="${parked.job_id}"]`,
        { timeout: 10_000 },
      );
      await page.waitForSelector(`${detail} .mission-head [data-progress="2/3"]`, {
        timeout: 10_000,
      });
      assert.match(
        await page.$eval(`${detail} [data-step="s2"]`, (el) => el.textContent ?? ""),
        /approved by operator/,
      );

      // Download report: fetched with the token in a header (not the URL), saved as a file.
      const reportRes = page.waitForResponse(
        (res: HTTPResponse) => new URL(res.url()).pathname === `/api/missions/${mid}/report`,
        { timeout: 10_000 },
      );
      await page.click(`${detail} [data-report]`);
      const res = await reportRes;
      assert.equal(res.status(), 200);
      assert.match(res.headers()["content-type"] ?? "", /text\/markdown/);
      assert.ok(!res.url().includes(token), res.url());
      assert.equal(res.request().headers()["authorization"], `Bearer ${token}`);
      const markdown = await res.text();
      assert.ok(markdown.includes(mid), markdown.slice(0, 500));
      await page.waitForSelector(`${detail} [data-report-done]`, { timeout: 10_000 });
      // The same bytes, fetched in the page as the view does.
      const inPage = await page.evaluate(async (id: string) => {
        const t = sessionStorage.getItem("termada.token");
        const r = await fetch(`/api/missions/${id}/report`, {
          headers: { authorization: `Bearer ${t}` },
        });
        return { status: r.status, type: r.headers.get("content-type"), text: await r.text() };
      }, mid);
      assert.equal(inPage.status, 200);
      assert.match(inPage.type ?? "", /text\/markdown/);
      assert.ok(inPage.text.includes(mid));
      // The browser saved `<id>-report.md` (Blob URL download).
      const file = `${downloads}/${mid}-report.md`;
      for (let i = 0; i < 50; i++) {
        try {
          if (Deno.statSync(file).size > 0) break;
        } catch {
          // not yet
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.ok((await Deno.readTextFile(file)).includes(mid));

      // Open terminal: the Sessions view with the mission's session live; back again.
      await page.click(`${detail} [data-open-terminal="${sid}"]`);
      await page.waitForFunction(
        `!document.querySelector("main.sessions").hidden && (document.querySelector(` +
          `'[data-session="${sid}"] .xterm-rows')?.textContent ?? "").includes("probe-42")`,
        { timeout: 15_000 },
      );
      // The address bar follows the tab (no mission hash outside Missions).
      await page.waitForFunction(`location.hash === ""`, { timeout: 5_000 });
      await page.click('[data-tab="missions"]');
      await page.waitForSelector(`${s1}[data-verified="true"]`, { visible: true, timeout: 10_000 });
      await page.waitForFunction(`location.hash === "#/missions/${mid}"`, { timeout: 5_000 });

      // Phone: a deep link reload shows the detail, single column, no horizontal scroll.
      await page.setViewport({ width: 375, height: 667, isMobile: true, hasTouch: true });
      await page.reload({ waitUntil: "domcontentloaded" });
      await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });
      await page.waitForSelector(`${s1}[data-verified="true"]`, { visible: true, timeout: 10_000 });
      const fits = async (name: string) => {
        // Layout settled: fonts loaded and two frames painted since the view changed.
        await page.evaluate(
          `document.fonts.ready.then(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))))`,
        );
        const w = await page.evaluate(
          `({ doc: document.documentElement.scrollWidth, body: document.body.scrollWidth })`,
        ) as { doc: number; body: number };
        assert.ok(w.doc <= 375, `${name}: scrollWidth ${w.doc}`);
        assert.ok(w.body <= 375, `${name}: body scrollWidth ${w.body}`);
        await page.screenshot({ path: `${shots}/phone-${name}.png`, fullPage: true });
      };
      await fits("mission-detail");
      await page.click(`${detail} [data-mission-back]`);
      await page.waitForSelector(row, { visible: true, timeout: 10_000 });
      await page.waitForFunction(`location.hash === "#/missions"`, { timeout: 5_000 });
      await fits("missions");
      await page.click(row);
      await page.waitForSelector(`${detail} [data-cancel-mission]`, {
        visible: true,
        timeout: 10_000,
      });

      // Cancel: a confirmation dialog (Escape keeps it), then the mission ends cancelled.
      await page.click(`${detail} [data-cancel-mission]`);
      await page.waitForSelector("dialog.confirm[open]", { visible: true, timeout: 5_000 });
      await fits("mission-cancel");
      await page.keyboard.press("Escape");
      await page.waitForFunction(`!document.querySelector("dialog.confirm[open]")`, {
        timeout: 5_000,
      });
      assert.equal((await call(client, "mission_get", { mission_id: mid })).status, "running");
      await page.click(`${detail} [data-cancel-mission]`);
      await page.waitForSelector("dialog.confirm[open] [data-confirm]", { visible: true });
      await page.click("dialog.confirm[open] [data-confirm]");
      await page.waitForFunction(
        `document.querySelector('${detail} .mission-head [data-mission-status]')` +
          `?.getAttribute("data-mission-status") === "cancelled" && ` +
          `!document.querySelector('${detail} [data-cancel-mission]')`,
        { timeout: 10_000 },
      );
      assert.equal((await call(client, "mission_get", { mission_id: mid })).status, "cancelled");
      assert.deepEqual(problems, []);

      // Not live any more (the daemon stops): the view is dimmed under the stale note.
      await daemon.stop();
      await page.waitForFunction(
        `document.querySelector("main.missions-view")?.classList.contains("stale") && ` +
          `!!document.querySelector("main.missions-view [data-stale-note]")`,
        { timeout: 15_000 },
      );
      await fits("mission-stale");
    } finally {
      await closeBrowser(browser, profile, home, downloads);
    }
  },
});

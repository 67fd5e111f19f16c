/**
 * The dashboard in a real headless Chromium: the tokenized URL the daemon prints opens the page,
 * the token leaves the address bar, and an agent's command output appears in the session's
 * xterm.js terminal. Skipped when /usr/bin/chromium is missing (apt-get install -y chromium).
 */
import assert from "node:assert/strict";
import type { Browser } from "puppeteer-core";
import { call, startDaemon, stdioClient, tempHome } from "./_daemon.ts";
import { closeBrowser, haveChromium, launchBrowser, watchProblems } from "./_browser.ts";

Deno.test({
  name: "dashboard: a headless browser shows an agent's command output live",
  ignore: !haveChromium(),
  // puppeteer keeps its own timers and sockets; the browser is closed and killed in finally.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const home = await tempHome();
    // `touch` needs the operator's approval: the dashboard's Approvals view grants it.
    await Deno.writeTextFile(
      `${home}/config.yaml`,
      `policies:\n  default:\n    confirm: ["touch *"]\napprovals:\n  confirm_timeout_ms: 60000\n`,
    );
    const profile = await Deno.makeTempDir({ prefix: "termada-chromium-" });
    const shots = await Deno.makeTempDir({ prefix: "termada-shots-" });
    await using daemon = await startDaemon(home);
    const url = /Dashboard\s+(\S+)/.exec(daemon.stderr())?.[1];
    assert.ok(url && /\/\?token=[0-9a-f]{64}$/.test(url), daemon.stderr());
    const token = new URL(url).searchParams.get("token")!;
    await using client = await stdioClient(home);
    const r = await call(client, "exec_run", { command: ["echo dashboard-$((6*7))"] });
    assert.equal(r.output, "dashboard-42\n");

    let browser: Browser | undefined;
    try {
      browser = await launchBrowser(profile);
      const page = await browser.newPage();
      const problems = watchProblems(page);
      await page.setViewport({ width: 1280, height: 800 });
      const res = await page.goto(url, { waitUntil: "domcontentloaded" });
      assert.equal(res?.status(), 200);
      assert.match(res?.headers()["content-security-policy"] ?? "", /script-src 'self'/);

      // The session's terminal shows the command and its output (xterm's DOM rows).
      await page.waitForFunction(
        `(document.querySelector('[data-session="${r.session_id}"] .xterm-rows')?.textContent ` +
          `?? "").includes("dashboard-42")`,
        { timeout: 15_000 },
      );
      const text = await page.$eval(
        `[data-session="${r.session_id}"] .xterm-rows`,
        (el) => [...el.children].map((row) => row.textContent ?? "").join("\n"),
      );
      assert.match(text, /echo dashboard-\$\(\(6\*7\)\)/);
      assert.match(text, /^dashboard-42\s*$/m);

      // The token left the address bar (and the history entry) and lives in sessionStorage.
      const href = await page.evaluate(() => location.href);
      assert.ok(!href.includes("token"), href);
      assert.ok(!href.includes(token), href);
      assert.equal(await page.evaluate(() => sessionStorage.getItem("termada.token")), token);

      // Header: live connection, no approvals pending, the agent's group.
      await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });
      assert.equal(await page.$eval("[data-pending]", (el) => el.textContent?.trim()), "0");
      assert.equal(await page.$$eval("[data-agent]", (els) => els.length) >= 1, true);
      // The session boundary this machine gives (every part active here), each part on hover.
      await page.waitForSelector('[data-boundary="on"]', { timeout: 10_000 });
      assert.match(
        await page.$eval("[data-boundary]", (el) => el.getAttribute("title") ?? ""),
        /exec gate: on[\s\S]*cgroups: on/,
      );

      // A reload (no token in the URL now) keeps working from sessionStorage.
      await page.reload({ waitUntil: "domcontentloaded" });
      await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });

      // A later command streams into the open terminal.
      await call(client, "exec_run", {
        command: ["echo live-$((7*6))"],
        session: r.session_id,
      });
      await page.waitForFunction(
        `(document.querySelector(".xterm-rows")?.textContent ?? "").includes("live-42")`,
        { timeout: 15_000 },
      );

      // Approvals: a parked job shows up (count in the header); Approve runs it once.
      const target = `${profile}/approved-from-dashboard`;
      const parked = await call(client, "exec_run", {
        command: [`touch ${target}`],
        session: r.session_id,
      });
      assert.equal(parked.status, "pending_approval");
      const apr = String(parked.approval_id);
      await page.waitForFunction(
        `document.querySelector("[data-pending]")?.textContent?.trim() === "1"`,
        { timeout: 10_000 },
      );
      await page.click("nav button:nth-child(2)");
      const button = `[data-approval="${apr}"] button.approve`;
      await page.waitForSelector(button, { visible: true, timeout: 10_000 });
      await page.screenshot({ path: `${shots}/approvals.png` });
      await page.click(button);
      const done = await call(client, "exec_wait", { job_id: parked.job_id, timeout_ms: 10_000 });
      assert.equal(done.status, "exited");
      Deno.statSync(target);
      await page.waitForFunction(
        `!document.querySelector('[data-approval="${apr}"]') && ` +
          `document.querySelector("[data-pending]")?.textContent?.trim() === "0"`,
        { timeout: 10_000 },
      );
      await page.click("nav button:nth-child(1)");

      // Resize over the operator API: the page's xterm follows (rows in the DOM, data attrs).
      const resized = await fetch(
        `http://127.0.0.1:${daemon.port}/api/sessions/${r.session_id}/resize`,
        {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ cols: 100, rows: 13 }),
        },
      );
      assert.equal(resized.status, 200);
      assert.deepEqual(await resized.json(), { ok: true, cols: 100, rows: 13 });
      const term = `[data-session="${r.session_id}"] .term`;
      await page.waitForFunction(
        `document.querySelector('${term}')?.getAttribute("data-rows") === "13" && ` +
          `document.querySelector('${term}')?.getAttribute("data-cols") === "100" && ` +
          `document.querySelector('${term} .xterm-rows')?.children.length === 13`,
        { timeout: 15_000 },
      );

      await page.screenshot({ path: `${shots}/dashboard.png` });
      assert.ok(Deno.statSync(`${shots}/dashboard.png`).size > 1000);
      assert.deepEqual(problems, []);

      // Not live any more (the daemon stops): the header and the views say the data is stale.
      assert.equal(await page.$(".stale-badge"), null);
      await daemon.stop();
      await page.waitForFunction(
        `/^stale data — last update \\d\\d:\\d\\d:\\d\\d$/.test(` +
          `document.querySelector(".stale-badge")?.textContent ?? "") && ` +
          `document.querySelector("main.sessions")?.classList.contains("stale") && ` +
          `!!document.querySelector("main.sessions [data-stale-note]")`,
        { timeout: 15_000 },
      );
      assert.notEqual(
        await page.$eval("[data-conn]", (el) => el.getAttribute("data-conn")),
        "live",
      );
    } finally {
      await closeBrowser(browser, profile, home);
    }
  },
});

Deno.test({
  name: "dashboard: Jobs, Activity, Agents and Policy views; Stop all ends an agent's job",
  ignore: !haveChromium(),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const home = await tempHome();
    // Policies for the Policy view: the default one (dev-mode agents) and one for agent `ci`.
    await Deno.writeTextFile(
      `${home}/config.yaml`,
      `policies:
  default:
    deny: ["rm -rf *"]
  strict:
    allow: ["git status"]
    deny: ["curl *"]
    auto_answer:
      - prompt: 'Continue\\? \\[y/N\\]'
        answer: "y\\n"
agents:
  ci:
    token: "agent-token-0123456789abcdef"
    policy: strict
`,
    );
    const profile = await Deno.makeTempDir({ prefix: "termada-chromium-" });
    const shots = await Deno.makeTempDir({ prefix: "termada-shots-" });
    await using daemon = await startDaemon(home);
    const url = /Dashboard\s+(\S+)/.exec(daemon.stderr())?.[1];
    assert.ok(url, daemon.stderr());
    await using client = await stdioClient(home);
    const echoed = await call(client, "exec_run", { command: ["echo job-view-$((5*9))"] });
    const echoId = String(echoed.job_id);
    const started = await call(client, "exec_start", { command: ["sleep 300"] });
    const jobId = String(started.job_id);
    assert.equal(started.status, "running");

    let browser: Browser | undefined;
    try {
      browser = await launchBrowser(profile);
      const page = await browser.newPage();
      const problems = watchProblems(page);
      await page.setViewport({ width: 1280, height: 800 });
      await page.goto(url, { waitUntil: "domcontentloaded" });
      await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });

      // Jobs: the agent's sleep is active, with a Kill button.
      await page.click('[data-tab="jobs"]');
      const row = `[data-jobs="active"] [data-job="${jobId}"]`;
      await page.waitForSelector(`${row} button.kill`, { visible: true, timeout: 10_000 });
      assert.match(await page.$eval(row, (el) => el.textContent ?? ""), /sleep 300/);
      assert.equal(await page.$eval(row, (el) => el.getAttribute("data-status")), "running");
      await page.screenshot({ path: `${shots}/jobs.png` });

      // A job's output: clicking the agent's finished echo opens its output page.
      await page.click(`[data-jobs="recent"] [data-open-job="${echoId}"]`);
      await page.waitForFunction(
        `document.querySelector('[data-job-output="${echoId}"] [data-output]')` +
          `?.textContent.includes("job-view-45")`,
        { timeout: 10_000 },
      );
      await page.screenshot({ path: `${shots}/job-output.png` });
      await page.click(`[data-job-output="${echoId}"] [data-close-output]`);

      // Agents: the agent is listed with its last command.
      await page.click('[data-tab="agents"]');
      await page.waitForFunction(
        `[...document.querySelectorAll("[data-agent-row]")].some((r) => ` +
          `r.textContent.includes("sleep 300"))`,
        { timeout: 10_000 },
      );
      await page.screenshot({ path: `${shots}/agents.png` });

      // Policy: read-only rules per policy, who uses which, the dev-mode default.
      await page.click('[data-tab="policy"]');
      await page.waitForSelector('[data-policy="default"] [data-rules="deny"] code', {
        visible: true,
        timeout: 10_000,
      });
      assert.match(
        await page.$eval(
          '[data-policy="default"] [data-rules="deny"]',
          (el) => el.textContent ?? "",
        ),
        /rm -rf \*/,
      );
      const strict = await page.$eval('[data-policy="strict"]', (el) => el.textContent ?? "");
      assert.match(strict, /curl \*/);
      assert.match(strict, /git status/);
      assert.match(strict, /Agents: ci/);
      assert.match(strict, /Continue/);
      assert.ok(!strict.includes("agent-token"), strict);
      assert.equal(
        await page.$eval("[data-default-policy]", (el) => el.getAttribute("data-default-policy")),
        "default",
      );
      assert.match(
        await page.$eval("[data-default-policy]", (el) => el.textContent ?? ""),
        /dev mode is on/,
      );
      await page.screenshot({ path: `${shots}/policy.png` });

      // Stop all: a confirmation dialog first; Cancel does nothing, Stop all stops the job.
      assert.equal(
        await page.$eval("[data-barrier]", (el) => el.getAttribute("data-barrier")),
        "false",
      );
      await page.click("[data-stop-all]");
      await page.waitForSelector("dialog.confirm[open]", { visible: true, timeout: 5_000 });
      await page.screenshot({ path: `${shots}/stop-all-confirm.png` });
      await page.keyboard.press("Escape");
      await page.waitForFunction(`!document.querySelector("dialog.confirm[open]")`, {
        timeout: 5_000,
      });
      assert.equal((await call(client, "exec_poll", { job_id: jobId })).status, "running");
      await page.click("[data-stop-all]");
      await page.waitForSelector("dialog.confirm[open] [data-confirm]", { visible: true });
      await page.click("dialog.confirm[open] [data-confirm]");
      const deadline = Date.now() + 10_000;
      let status = "";
      while (Date.now() < deadline) {
        status = String((await call(client, "exec_poll", { job_id: jobId })).status);
        if (status === "killed") break;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(status, "killed");
      await page.waitForSelector('[data-barrier="true"]', { timeout: 10_000 });

      // Jobs shows it finished; Activity lists stop_all (also under the attention filter).
      await page.click('[data-tab="jobs"]');
      await page.waitForSelector(
        `[data-jobs="recent"] [data-job="${jobId}"][data-status="killed"]`,
        {
          timeout: 10_000,
        },
      );
      await page.click('[data-tab="activity"]');
      await page.waitForSelector('.activity [data-event="stop_all"]', { timeout: 10_000 });
      // The audit chain's check: verified, with a record count.
      await page.waitForSelector('.activity [data-verify="ok"]', { timeout: 10_000 });
      assert.match(
        await page.$eval('.activity [data-verify="ok"]', (el) => el.textContent ?? ""),
        /chain verified: [1-9]\d* records/,
      );
      await page.click('[data-filter="attention"]');
      const types = await page.$$eval(
        ".activity [data-event]",
        (els) => els.map((el) => el.getAttribute("data-event")),
      );
      assert.ok(types.includes("stop_all"), types.join(","));
      assert.ok(types.every((t) => /^(stop_all|approval|policy|admission|job\.killed)/.test(t!)));
      // Newest first: stop_all.done comes before stop_all.
      const done = types.indexOf("stop_all.done");
      if (done >= 0) assert.ok(done < types.indexOf("stop_all"), types.join(","));
      await page.screenshot({ path: `${shots}/activity.png` });
      await page.click('[data-filter="all"]');
      assert.deepEqual(problems, []);
    } finally {
      await closeBrowser(browser, profile, home);
    }
  },
});

Deno.test({
  name: "dashboard: Take over types into an agent's session; Release hands it back",
  ignore: !haveChromium(),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const home = await tempHome();
    const profile = await Deno.makeTempDir({ prefix: "termada-chromium-" });
    const shots = await Deno.makeTempDir({ prefix: "termada-shots-" });
    await using daemon = await startDaemon(home);
    const url = /Dashboard\s+(\S+)/.exec(daemon.stderr())?.[1];
    assert.ok(url, daemon.stderr());
    await using client = await stdioClient(home);
    const r = await call(client, "exec_run", { command: ["echo agent-$((2*3))"] });
    assert.equal(r.output, "agent-6\n");
    const sid = String(r.session_id);
    const card = `[data-session="${sid}"]`;

    let browser: Browser | undefined;
    try {
      browser = await launchBrowser(profile);
      const page = await browser.newPage();
      const problems = watchProblems(page);
      // Input requests: counted, and never two in flight for the session.
      const inputs = { sent: 0, inFlight: 0, maxInFlight: 0, bodies: [] as string[] };
      const isInput = (u: string) => u.endsWith(`/api/sessions/${sid}/input`);
      page.on("request", (req) => {
        if (!isInput(req.url())) return;
        inputs.sent++;
        inputs.inFlight++;
        inputs.maxInFlight = Math.max(inputs.maxInFlight, inputs.inFlight);
        inputs.bodies.push(req.postData() ?? "");
        const op = req.headers()["x-termada-operator"];
        if (op !== "dashboard") problems.push(`x-termada-operator: ${op}`);
      });
      const settled = (req: { url(): string }) => {
        if (isInput(req.url())) inputs.inFlight--;
      };
      page.on("requestfinished", settled);
      page.on("requestfailed", settled);
      await page.setViewport({ width: 1280, height: 800 });
      await page.goto(url, { waitUntil: "domcontentloaded" });
      await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });
      await page.waitForFunction(
        `(document.querySelector('${card} .xterm-rows')?.textContent ?? "").includes("agent-6")`,
        { timeout: 15_000 },
      );

      // Take over: the card says so, the terminal has focus, the list shows "operator".
      await page.click(`${card} [data-takeover]`);
      await page.waitForSelector(`${card}[data-held="true"] [data-keyboard]`, { timeout: 10_000 });
      assert.match(
        await page.$eval(`${card} [data-keyboard]`, (el) => el.textContent ?? ""),
        /You have the keyboard/,
      );
      assert.equal(
        await page.evaluate(
          `document.querySelector('${card} .term')?.contains(document.activeElement) ?? false`,
        ),
        true,
      );
      await page.waitForFunction(
        `document.querySelector('${card} .badge')?.textContent === "operator"`,
        { timeout: 10_000 },
      );

      // Agents get SESSION_BUSY while the operator holds the keyboard.
      const busy = await client.callTool({
        name: "exec_run",
        arguments: { command: ["echo nope"], session: sid },
      });
      assert.equal(busy.isError, true);
      assert.match(JSON.stringify(busy.structuredContent), /SESSION_BUSY/);

      // Keystrokes typed into the terminal run in the session.
      await page.click(`${card} .xterm`);
      await page.keyboard.type("echo hi-from-operator");
      await page.keyboard.press("Enter");
      await page.waitForFunction(
        `[...document.querySelectorAll('${card} .xterm-rows > div')]` +
          `.some((row) => /^hi-from-operator\\s*$/.test(row.textContent ?? ""))`,
        { timeout: 15_000 },
      );
      const text = await page.$eval(
        `${card} .xterm-rows`,
        (el) => [...el.children].map((row) => row.textContent ?? "").join("\n"),
      );
      assert.match(text, /echo hi-from-operator/);
      // Batched (fewer requests than keys), in order, one at a time.
      const typed = inputs.bodies.map((b) => JSON.parse(b).data as string).join("");
      assert.equal(typed, "echo hi-from-operator\r");
      assert.ok(inputs.sent < typed.length, `${inputs.sent} requests`);
      assert.equal(inputs.maxInFlight, 1);
      assert.match(text, /^hi-from-operator\s*$/m);
      await page.screenshot({ path: `${shots}/takeover.png` });

      // Pause agent output (held keyboard only): POST …/pause, then …/resume-output, as
      // `x-termada-operator: dashboard`.
      const origin = new URL(url).origin;
      const token = new URL(url).searchParams.get("token")!;
      const probe = await fetch(`${origin}/api/sessions/${sid}/pause`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          "x-termada-operator": "someone-else",
        },
        body: "{}",
      });
      await probe.body?.cancel();
      {
        // Not the lease holder: refused (and the endpoint exists).
        assert.equal(probe.status, 400);
        const outputCalls: { path: string; op?: string; status?: number }[] = [];
        page.on("response", (res) => {
          const m = /\/api\/sessions\/[^/]+\/(pause|resume-output)$/.exec(res.url());
          if (!m) return;
          outputCalls.push({
            path: m[1]!,
            op: res.request().headers()["x-termada-operator"],
            status: res.status(),
          });
        });
        const pausedOnDaemon = async () => {
          const res = await fetch(`${origin}/api/sessions`, {
            headers: { authorization: `Bearer ${token}` },
          });
          const list = (await res.json()).sessions as {
            session_id: string;
            output_paused?: boolean;
          }[];
          return list.find((x) => x.session_id === sid)?.output_paused === true;
        };
        assert.equal(await pausedOnDaemon(), false);
        await page.click(`${card} [data-pause-output]`);
        await page.waitForSelector(`${card}[data-output-paused="true"]`, { timeout: 10_000 });
        assert.match(
          await page.$eval(`${card} [data-pause-output]`, (el) => el.textContent ?? ""),
          /Resume agent output/,
        );
        assert.equal(await pausedOnDaemon(), true);
        await page.screenshot({ path: `${shots}/takeover-output-paused.png` });
        await page.click(`${card} [data-pause-output]`);
        await page.waitForSelector(`${card}[data-output-paused="false"]`, { timeout: 10_000 });
        assert.match(
          await page.$eval(`${card} [data-pause-output]`, (el) => el.textContent ?? ""),
          /Pause agent output/,
        );
        assert.equal(await pausedOnDaemon(), false);
        assert.deepEqual(outputCalls, [
          { path: "pause", op: "dashboard", status: 200 },
          { path: "resume-output", op: "dashboard", status: 200 },
        ]);
        // Back into the terminal for the keyboard release below.
        await page.click(`${card} .xterm`);
      }

      // Release (from the keyboard: Shift+Escape leaves the terminal for the Release button).
      await page.keyboard.down("Shift");
      await page.keyboard.press("Escape");
      await page.keyboard.up("Shift");
      assert.equal(
        await page.evaluate(`document.activeElement?.hasAttribute("data-release") ?? false`),
        true,
      );
      await page.keyboard.press("Enter");
      await page.waitForSelector(`${card}[data-held="false"] [data-takeover]`, {
        timeout: 10_000,
      });
      assert.equal(await page.$(`${card} [data-keyboard]`), null);

      // The agent works again in the same session.
      let after: Record<string, unknown> = {};
      for (let i = 0; i < 50; i++) {
        const res = await client.callTool({
          name: "exec_run",
          arguments: { command: ["echo agent-again"], session: sid },
        });
        after = res.structuredContent as Record<string, unknown>;
        if (!res.isError) break;
        await new Promise((res) => setTimeout(res, 100));
      }
      assert.equal(after.output, "agent-again\n", JSON.stringify(after));
      await page.waitForFunction(
        `document.querySelector('${card} .badge')?.textContent !== "operator"`,
        { timeout: 10_000 },
      );

      // Closing or reloading the page while holding the keyboard releases it (pagehide +
      // a keepalive request): the agent is not left with SESSION_BUSY.
      await page.click(`${card} [data-takeover]`);
      await page.waitForSelector(`${card}[data-held="true"] [data-keyboard]`, { timeout: 10_000 });
      const held = await client.callTool({
        name: "exec_run",
        arguments: { command: ["echo nope"], session: sid },
      });
      assert.equal(held.isError, true);
      assert.match(JSON.stringify(held.structuredContent), /SESSION_BUSY/);
      await page.reload({ waitUntil: "domcontentloaded" });
      await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });
      let reloaded: Record<string, unknown> = {};
      for (let i = 0; i < 20; i++) {
        const res = await client.callTool({
          name: "exec_run",
          arguments: { command: ["echo after-reload"], session: sid },
        });
        reloaded = res.structuredContent as Record<string, unknown>;
        if (!res.isError) break;
        await new Promise((res) => setTimeout(res, 100));
      }
      assert.equal(reloaded.output, "after-reload\n", JSON.stringify(reloaded));
      assert.deepEqual(problems, []);
    } finally {
      await closeBrowser(browser, profile, home);
    }
  },
});

Deno.test({
  name: "dashboard: phone-sized views fit; Deny sends a reason; Follow live on a 5th session",
  ignore: !haveChromium(),
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
    await using client = await stdioClient(home);
    // Five sessions, each with its own output (the default one and four more).
    const sids: string[] = [];
    const first = await call(client, "exec_run", { command: ["echo sess-0-$((1+1))"] });
    sids.push(String(first.session_id));
    for (let i = 1; i < 5; i++) {
      const s = await call(client, "session_create", {});
      sids.push(String(s.session_id));
      const r = await call(client, "exec_run", {
        command: [`echo sess-${i}-$((1+1))`],
        session: sids[i],
      });
      assert.equal(r.output, `sess-${i}-2\n`);
    }
    // A long line, so a terminal has more to show than a phone's width.
    await call(client, "exec_run", {
      command: ["printf 'x%.0s' {1..150}; echo"],
      session: sids[0],
    });

    let browser: Browser | undefined;
    try {
      browser = await launchBrowser(profile);
      const page = await browser.newPage();
      const problems = watchProblems(page);
      await page.setViewport({ width: 390, height: 844, isMobile: true, hasTouch: true });
      await page.goto(url, { waitUntil: "domcontentloaded" });
      await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });

      // Follow live: 4 terminals stream, the 5th session offers "Follow live".
      await page.waitForFunction(
        `document.querySelectorAll("[data-session]").length === 5 && ` +
          `document.querySelectorAll("[data-session] .xterm").length === 4`,
        { timeout: 15_000 },
      );
      const paused = await page.$$eval(
        "section.session.paused",
        (els) => els.map((el) => el.getAttribute("data-session")),
      );
      assert.equal(paused.length, 1, paused.join(","));
      const fifth = paused[0]!;
      const fifthIdx = sids.indexOf(fifth);
      assert.ok(fifthIdx >= 0, fifth);
      assert.match(
        await page.$eval(`[data-session="${fifth}"] button.follow`, (el) => el.textContent ?? ""),
        /Follow live/,
      );

      // Phone width: every view fits (no page-level horizontal scroll).
      const views = ["sessions", "approvals", "jobs", "activity", "agents", "policy"];
      const fits = async (view: string) => {
        // Layout settled: fonts loaded and two frames painted since the view changed.
        await page.evaluate(
          `document.fonts.ready.then(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))))`,
        );
        const w = await page.evaluate(
          `({ doc: document.documentElement.scrollWidth, body: document.body.scrollWidth })`,
        ) as { doc: number; body: number };
        assert.ok(w.doc <= 390, `${view}: scrollWidth ${w.doc}`);
        assert.ok(w.body <= 390, `${view}: body scrollWidth ${w.body}`);
        await page.screenshot({ path: `${shots}/phone-${view}.png` });
      };
      for (const view of views) {
        await page.click(`[data-tab="${view}"]`);
        if (view === "jobs") {
          await page.waitForSelector('[data-jobs="recent"] table', { timeout: 10_000 });
        } else if (view === "agents") {
          await page.waitForSelector("[data-agent-row]", { timeout: 10_000 });
        } else if (view === "policy") {
          await page.waitForSelector('[data-policy="default"]', { timeout: 10_000 });
        }
        await fits(view);
      }
      // Wide terminals scroll inside their card rather than widening the page.
      await page.click('[data-tab="sessions"]');
      const term = await page.$eval(
        `[data-session="${sids[0]}"] .term`,
        (el) => ({ client: el.clientWidth, scroll: el.scrollWidth }),
      );
      assert.ok(term.client <= 390, JSON.stringify(term));

      // Follow live on the 5th: its output shows (it takes the slot of the longest-followed one).
      await page.click(`[data-session="${fifth}"] button.follow`);
      await page.waitForFunction(
        `(document.querySelector('[data-session="${fifth}"] .xterm-rows')?.textContent ?? "")` +
          `.includes("sess-${fifthIdx}-2")`,
        { timeout: 15_000 },
      );
      assert.equal(await page.$$eval("[data-session] .xterm", (els) => els.length), 4);
      assert.equal(await page.$$eval("section.session.paused", (els) => els.length), 1);
      await page.screenshot({ path: `${shots}/phone-follow-live.png` });

      // Deny with a reason: the agent's job ends as denied with that reason.
      const parked = await call(client, "exec_run", {
        command: [`touch ${profile}/denied-from-dashboard`],
        session: sids[1],
      });
      assert.equal(parked.status, "pending_approval");
      const apr = String(parked.approval_id);
      await page.click('[data-tab="approvals"]');
      const item = `[data-approval="${apr}"]`;
      await page.waitForSelector(`${item} button.deny`, { visible: true, timeout: 10_000 });
      await page.type(`${item} input[data-reason]`, "not on a phone please");
      await fits("approvals-reason");
      await page.click(`${item} button.deny`);
      const done = await call(client, "exec_wait", { job_id: parked.job_id, timeout_ms: 10_000 });
      assert.equal(done.status, "denied", JSON.stringify(done));
      assert.match(String(done.reason), /not on a phone please/);
      assert.throws(() => Deno.statSync(`${profile}/denied-from-dashboard`));
      await page.waitForFunction(`!document.querySelector('${item}')`, { timeout: 10_000 });
      assert.deepEqual(problems, []);
    } finally {
      await closeBrowser(browser, profile, home);
    }
  },
});

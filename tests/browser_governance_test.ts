/**
 * The dashboard's Governance view and the approval card's quorum line in a real headless
 * Chromium against a real daemon: a daemon killed while an agent's job runs leaves that job's
 * action `outcome_unknown`; after the restart the view lists it, the note is required before
 * "It failed" reconciles it (the row goes, the API has it failed with the note); the agent's
 * budget shows what it used of its limit; "Anchor now" moves the last anchor and an unreachable
 * receiver shows its pending anchors and last error. In Approvals a plain `touch` is approved
 * at once, and a 2-of-sre rule shows its requirements, counts the first vote ("Your vote
 * counted: 1 of 2", the card stays) and shows the daemon's refusal of a second vote from the
 * same operator on the card. Skipped when /usr/bin/chromium is missing.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Browser, Page } from "puppeteer-core";
import { call, homeWithConfig, operatorFetch, type RunningDaemon, startDaemon } from "./_daemon.ts";
import { denoDir, pollUntil } from "./_clients.ts";
import { closeBrowser, haveChromium, launchBrowser, watchProblems } from "./_browser.ts";

const DENO_DIR = await denoDir();
const AGENT_TOKEN = "Tk7-browser-governance-agent-token-0123456789";

const CONFIG = `
security:
  operator_token_roles: [sre]
approvals:
  confirm_timeout_ms: 120000
audit:
  anchors:
    receivers:
      # Nothing listens there: every delivery fails, so the anchors wait.
      - { name: notary, url: "https://127.0.0.1:9/anchor", timeout_ms: 1000 }
agents:
  bot: { token: "${AGENT_TOKEN}", policy: team, principal: dave }
default_policy: team
policies:
  team:
    confirm: ["touch *"]
    rules:
      - effect: confirm
        action: exec
        resource: "mkdir *"
        approval: { quorum: 2, roles: [sre], exclude_requester: true }
    budgets:
      - { name: ops, scope: principal, metric: operations, limit: 50, window: 1h }
`;

interface ActionBody {
  id: string;
  state: string;
  reconcile_note: string | null;
  reconciled_by: string | null;
}
interface AnchorBody {
  last_anchor: { seq: number } | null;
  receivers: { name: string; pending: number; last_error: string | null }[];
}

async function httpClient(d: RunningDaemon): Promise<Client> {
  const client = new Client({ name: "browser-governance", version: "1" });
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${d.port}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${AGENT_TOKEN}` } },
  });
  await client.connect(transport);
  return client;
}

const text = (page: Page, sel: string) => page.$eval(sel, (el) => el.textContent ?? "");
/** A button as the page sees it (no DOM types in the test's compiler options). */
const disabled = (page: Page, sel: string) =>
  page.$eval(sel, (el) => (el as unknown as { disabled: boolean }).disabled);
const gone = (page: Page, sel: string) =>
  page.waitForFunction(`!document.querySelector(${JSON.stringify(sel)})`, { timeout: 10_000 });

/** Leaves the Governance tab and opens it again (it refetches when it opens). */
async function reopenGovernance(page: Page): Promise<void> {
  await page.click('[data-tab="sessions"]');
  await page.click('[data-tab="governance"]');
}

Deno.test({
  name:
    "dashboard: Governance reconciles an outcome_unknown action, shows budgets and anchors; approvals show quorum votes",
  ignore: !haveChromium(),
  // puppeteer keeps its own timers and sockets; the browser is closed and killed in finally.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const home = await homeWithConfig(CONFIG);
    const profile = await Deno.makeTempDir({ prefix: "termada-chromium-" });
    const shots = await Deno.makeTempDir({ prefix: "termada-shots-" });
    const env = { DENO_DIR };
    let browser: Browser | undefined;
    try {
      // One operation that finishes, one that the crash leaves without an outcome.
      let sleepJob = "";
      {
        await using d = await startDaemon(home, { env });
        const bot = await httpClient(d);
        try {
          const r = await call(bot, "exec_run", { command: ["true"] });
          assert.equal(r.exit_code, 0, JSON.stringify(r));
          const started = await call(bot, "exec_start", {
            command: ["sleep", "30"],
            mode: "background",
          });
          sleepJob = String(started.job_id);
          assert.match(sleepJob, /^job_/, JSON.stringify(started));
        } finally {
          await bot.close();
        }
        d.proc.kill("SIGKILL");
        await d.proc.status;
      }

      await using daemon = await startDaemon(home, { env });
      const url = /Dashboard\s+(\S+)/.exec(daemon.stderr())?.[1];
      assert.ok(url, daemon.stderr());
      const op = operatorFetch(daemon);
      const actions = async (state: string) =>
        (await (await op(`/actions?state=${state}&limit=100`)).json() as { actions: ActionBody[] })
          .actions;
      const anchors = async () => await (await op("/audit/anchors")).json() as AnchorBody;
      assert.ok((await actions("outcome_unknown")).some((a) => a.id === sleepJob));

      browser = await launchBrowser(profile);
      const page = await browser.newPage();
      const problems = watchProblems(page);
      page.on("dialog", (dlg) => {
        problems.push(`dialog: ${dlg.message()}`);
        dlg.dismiss().catch(() => {});
      });
      await page.setViewport({ width: 1280, height: 800 });
      await page.goto(url, { waitUntil: "domcontentloaded" });
      await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });
      await page.click('[data-tab="governance"]');

      // The crashed job's action: id, kind, agent, what it ran, when.
      const row = `[data-action="${sleepJob}"]`;
      await page.waitForSelector(row, { visible: true, timeout: 10_000 });
      const rowText = await text(page, row);
      assert.match(rowText, /bot/);
      assert.match(rowText, /sleep 30/);
      assert.ok(await page.$(`${row} time[datetime]`), "admitted time");

      // The budget: what principal dave used of 50 operations.
      const budget = '[data-budget="team/ops"]';
      await page.waitForSelector(budget, { visible: true, timeout: 10_000 });
      const used = Number(await page.$eval(budget, (el) => el.getAttribute("data-used")));
      assert.ok(used >= 1, `used ${used}`);
      assert.equal(
        await page.$eval(budget, (el) => el.getAttribute("data-scope")),
        "principal:dave",
      );
      assert.match(await text(page, budget), new RegExp(`${used} / 50 operations`));
      assert.ok(await page.$(`${budget} meter`));

      // The note is required: both buttons stay disabled until it is typed.
      const failed = `${row} [data-reconcile="failed"]`;
      assert.equal(await disabled(page, failed), true);
      assert.equal(await disabled(page, `${row} [data-reconcile="succeeded"]`), true);
      await page.type(`${row} [data-action-note]`, "   ");
      assert.equal(await disabled(page, failed), true);
      await page.type(`${row} [data-action-note]`, "killed by the crash");
      assert.equal(await disabled(page, failed), false);
      await page.screenshot({ path: `${shots}/governance.png`, fullPage: true });
      await page.click(failed);
      await gone(page, row);
      assert.match(await text(page, "[data-gov-note]"), new RegExp(`${sleepJob} as failed`));
      const settled = (await actions("failed")).find((a) => a.id === sleepJob);
      assert.equal(settled?.reconcile_note, "killed by the crash");
      assert.ok(!(await actions("outcome_unknown")).some((a) => a.id === sleepJob));
      // Still gone after a refetch.
      await reopenGovernance(page);
      await page.waitForSelector("[data-gov-actions-empty]", { visible: true, timeout: 10_000 });

      // Anchor now: a new last anchor; the unreachable receiver keeps it pending, with its error.
      const seqBefore = (await anchors()).last_anchor?.seq ?? -1;
      await page.click("[data-anchor-now]");
      const seqAfter = await pollUntil(async () => {
        const s = Number(
          await page.$eval("[data-anchor-seq]", (el) => el.getAttribute("data-anchor-seq")) || -1,
        );
        return s > seqBefore ? s : undefined;
      }, "the page shows a new anchor");
      assert.equal((await anchors()).last_anchor?.seq, seqAfter);
      assert.match(await text(page, "[data-anchor-last]"), new RegExp(`seq ${seqAfter} at`));
      await pollUntil(async () => {
        const r = (await anchors()).receivers.find((x) => x.name === "notary");
        return r && r.pending >= 1 && r.last_error ? r : undefined;
      }, "the receiver's failed delivery");
      await reopenGovernance(page);
      await page.waitForFunction(
        `(document.querySelector('[data-receiver="notary"] [data-receiver-error]')?.textContent ` +
          `?? "").trim().length > 1`,
        { timeout: 10_000 },
      );
      const pending = await page.$eval(
        '[data-receiver="notary"]',
        (el) => el.getAttribute("data-pending"),
      );
      assert.ok(Number(pending) >= 1, `pending ${pending}`);

      // A phone-sized screen: the view fits (its tables scroll inside their container).
      await page.setViewport({ width: 390, height: 844 });
      await page.evaluate(
        `document.fonts.ready.then(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))))`,
      );
      const width = await page.evaluate(`document.documentElement.scrollWidth`) as number;
      assert.ok(width <= 390, `scrollWidth ${width}`);
      await page.screenshot({ path: `${shots}/phone-governance.png`, fullPage: true });
      await page.setViewport({ width: 1280, height: 800 });

      const bot = await httpClient(daemon);
      try {
        // A plain confirm rule (one operator): no requirements line; Approve runs it.
        const target = `/tmp/x-${crypto.randomUUID()}`;
        try {
          const parked = await call(bot, "exec_start", {
            command: ["touch", target],
            mode: "background",
          });
          assert.equal(parked.status, "pending_approval", JSON.stringify(parked));
          const card = `[data-approval="${parked.approval_id}"]`;
          await page.click('[data-tab="approvals"]');
          await page.waitForSelector(`${card} button.approve`, { visible: true, timeout: 10_000 });
          assert.equal(await page.$(`${card} [data-requirements]`), null);
          await page.click(`${card} button.approve`);
          await gone(page, card);
          const done = await call(bot, "exec_wait", { job_id: parked.job_id, timeout_ms: 10_000 });
          assert.equal(done.status, "exited", JSON.stringify(done));
          await Deno.stat(target);
        } finally {
          await Deno.remove(target).catch(() => {});
        }

        // Two approvers with the role sre, not the requester: the first vote counts, the card
        // stays; the same operator's second vote is refused on the card.
        const dir = `${profile}/quorum-dir`;
        const parked = await call(bot, "exec_start", {
          command: ["mkdir", dir],
          mode: "background",
        });
        assert.equal(parked.status, "pending_approval", JSON.stringify(parked));
        const card = `[data-approval="${parked.approval_id}"]`;
        await page.waitForSelector(`${card} [data-requirements]`, {
          visible: true,
          timeout: 10_000,
        });
        assert.equal(
          (await text(page, `${card} [data-requirements]`)).trim(),
          "0 of 2 approvers · role sre · not dave",
        );
        await page.click(`${card} button.approve`);
        await page.waitForSelector(`${card} [data-vote-counted]`, {
          visible: true,
          timeout: 10_000,
        });
        assert.equal(
          (await text(page, `${card} [data-vote-counted]`)).trim(),
          "Your vote counted: 1 of 2",
        );
        await page.waitForFunction(
          `document.querySelector('${card} [data-approvers]')?.textContent === ` +
            `"approved by operator"`,
          { timeout: 10_000 },
        );
        assert.match(await text(page, `${card} [data-requirements]`), /^1 of 2 approvers/);
        await page.click(`${card} button.approve`);
        await page.waitForSelector(`${card} [data-approval-error]`, {
          visible: true,
          timeout: 10_000,
        });
        assert.match(await text(page, `${card} [data-approval-error]`), /already approved it/);
        assert.equal(await page.$("p.error[role=alert]"), null, "no banner for a refused vote");
        await page.screenshot({ path: `${shots}/approvals-quorum.png`, fullPage: true });
        const still = await (await op("/approvals")).json() as {
          approvals: { approval_id: string; approvers?: string[] }[];
        };
        assert.deepEqual(
          still.approvals.find((a) => a.approval_id === parked.approval_id)?.approvers,
          ["operator"],
        );
        await page.click(`${card} button.deny`);
        await gone(page, card);
        const denied = await call(bot, "exec_wait", { job_id: parked.job_id, timeout_ms: 10_000 });
        assert.equal(denied.status, "denied", JSON.stringify(denied));
        await assert.rejects(Deno.stat(dir));
      } finally {
        await bot.close();
      }
      assert.deepEqual(problems, []);
    } finally {
      await closeBrowser(browser, profile, home);
    }
  },
});

/**
 * The dashboard's Vault view in a real headless Chromium against a real daemon whose vault the
 * CLI made: the locked state, a wrong key refused with the daemon's message and hint (the field
 * emptied), unlocking, an entry added through the form (listed, and in `GET /api/vault`) whose
 * value shows nowhere — not in the page's HTML, not in any API response or event the page
 * reads — Remove and Lock asking first, and the open page following the CLI's unlock and lock
 * and another operator's change from the event stream alone. A second test: no vault (the page
 * shows `termada vault init`), then a passphrase vault. Skipped when /usr/bin/chromium is missing.
 */
import assert from "node:assert/strict";
import type { Browser, HTTPResponse, Page } from "puppeteer-core";
import { operatorFetch, startDaemon, tempHome, termada } from "./_daemon.ts";
import { denoDir } from "./_clients.ts";
import { closeBrowser, haveChromium, launchBrowser, watchProblems } from "./_browser.ts";
import { generateIdentity } from "../src/vault/mod.ts";

const DENO_DIR = await denoDir();
const VALUE = "Vault-UI-s3cret-Value-42xq";
const OTHER_VALUE = "Other-operator-v4lue-77zz";

interface VaultBody {
  exists: boolean;
  protection: string | null;
  unlocked: boolean;
  entries: number | null;
  unlocked_by: string | null;
  list: { name: string; kind: string; bytes: number; description?: string }[];
}

async function openDashboard(browser: Browser, url: string): Promise<Page> {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  await page.goto(url, { waitUntil: "domcontentloaded" });
  await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });
  return page;
}

/** Keeps the body of every `/api` response the page reads (the events stream never ends). */
function watchResponses(page: Page): { bodies(): Promise<string[]> } {
  const pending: Promise<string>[] = [];
  page.on("response", (r: HTTPResponse) => {
    const path = new URL(r.url()).pathname;
    if (!path.startsWith("/api/") || path === "/api/events") return;
    pending.push(r.text().then((t) => `${path} ${t}`, () => `${path} (no body)`));
  });
  return { bodies: () => Promise.all(pending) };
}

/** Replaces what a field holds. */
async function fill(page: Page, sel: string, value: string): Promise<void> {
  await page.click(sel, { count: 3 });
  await page.keyboard.press("Backspace");
  if (value) await page.type(sel, value);
}

const text = (page: Page, sel: string) => page.$eval(sel, (el) => el.textContent ?? "");
/** A form field as the page sees it (no DOM types in the test's compiler options). */
type Field = { value: string; type: string };
const fieldValue = (page: Page, sel: string) =>
  page.$eval(sel, (el) => (el as unknown as Field).value);
const state = (sel: string) => `[data-vault-state="${sel}"]`;

/** The events the daemon keeps for replay (what the page's stream carried), as text. */
async function eventsText(op: ReturnType<typeof operatorFetch>, until: RegExp): Promise<string> {
  const abort = new AbortController();
  const res = await op("/events", { signal: abort.signal });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let all = "";
  const deadline = Date.now() + 10_000;
  try {
    while (!until.test(all) && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      all += value;
    }
  } finally {
    abort.abort();
    await reader.cancel().catch(() => {});
  }
  return all;
}

Deno.test({
  name: "dashboard: Vault view unlocks, adds, removes and locks, and never shows a value",
  ignore: !haveChromium(),
  // puppeteer keeps its own timers and sockets; the browser is closed and killed in finally.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const home = await tempHome();
    const profile = await Deno.makeTempDir({ prefix: "termada-chromium-" });
    const shots = await Deno.makeTempDir({ prefix: "termada-shots-" });
    const keyFile = `${home}/vault-identity.txt`;
    const env = { DENO_DIR };
    const init = await termada(home, ["vault", "init", "--identity", keyFile], env);
    assert.equal(init.code, 0, init.stderr);
    const identity = (await Deno.readTextFile(keyFile)).trim();
    const wrong = (await generateIdentity()).identity;
    await using daemon = await startDaemon(home, { env });
    const url = /Dashboard\s+(\S+)/.exec(daemon.stderr())?.[1];
    assert.ok(url, daemon.stderr());
    const op = operatorFetch(daemon);
    const vault = async () => await (await op("/vault")).json() as VaultBody;

    let browser: Browser | undefined;
    try {
      browser = await launchBrowser(profile);
      const page = await openDashboard(browser, url);
      const problems = watchProblems(page);
      const responses = watchResponses(page);
      const sent: string[] = [];
      page.on("request", (r) => {
        if (r.method() === "PUT") sent.push(r.postData() ?? "");
      });
      await page.click('[data-tab="vault"]');

      // Locked, an identity vault: the key goes in a textarea; no entries, no Lock.
      await page.waitForSelector(state("locked"), { visible: true, timeout: 10_000 });
      assert.match(await text(page, state("locked")), /locked.*age identity/);
      assert.equal(await page.$eval("[data-vault-key]", (el) => el.tagName), "TEXTAREA");
      assert.equal(await page.$("[data-vault-lock]"), null);
      assert.equal(await page.$("[data-vault-add]"), null);

      // A key the vault is not encrypted to: the daemon's message and hint, the field emptied.
      await page.type("[data-vault-key]", wrong);
      await page.click("[data-vault-unlock-submit]");
      await page.waitForSelector("[data-vault-unlock-error]", { visible: true, timeout: 10_000 });
      const refused = await text(page, "[data-vault-unlock-error]");
      assert.match(refused, /is not encrypted to identity "age1/);
      assert.match(refused, /Use the identity file the vault was created with/);
      assert.equal(await fieldValue(page, "[data-vault-key]"), "");
      assert.ok(await page.$(state("locked")));
      assert.equal((await vault()).unlocked, false);

      // The identity file as `vault init` wrote it (comments and all) unlocks it.
      await page.type("[data-vault-key]", await Deno.readTextFile(keyFile));
      await page.click("[data-vault-unlock-submit]");
      await page.waitForSelector(state("unlocked"), { visible: true, timeout: 10_000 });
      assert.equal(await page.$("[data-vault-unlock-error]"), null);
      const status = await text(page, state("unlocked"));
      assert.match(status, /unlocked/);
      assert.match(status, /0 entries/);
      assert.match(await text(page, "[data-vault-unlocked-by]"), /unlocked by dashboard at/);
      await page.waitForSelector("[data-vault-empty]", { visible: true });
      assert.deepEqual(
        await vault().then((v) => [v.unlocked, v.unlocked_by]),
        [true, "dashboard"],
      );

      // The value field follows the kind: a textarea for an SSH key, else a password input.
      await page.select('[data-vault-field="kind"]', "ssh_key");
      assert.equal(await page.$eval('[data-vault-field="value"]', (el) => el.tagName), "TEXTAREA");
      await page.select('[data-vault-field="kind"]', "password");
      assert.equal(
        await page.$eval('[data-vault-field="value"]', (el) => (el as unknown as Field).type),
        "password",
      );

      // A bad name: the daemon's message under the form, the value emptied all the same.
      await fill(page, '[data-vault-field="name"]', "bad name");
      await page.type('[data-vault-field="value"]', VALUE);
      await page.click("[data-vault-submit]");
      await page.waitForSelector("[data-vault-add-error]", { visible: true, timeout: 10_000 });
      assert.match(await text(page, "[data-vault-add-error]"), /vault entry name/);
      assert.equal(await fieldValue(page, '[data-vault-field="value"]'), "");

      // Added through the form: listed, in the API, every field of the form emptied.
      await fill(page, '[data-vault-field="name"]', "db-url");
      await fill(page, '[data-vault-field="description"]', "Prod database");
      await page.type('[data-vault-field="value"]', VALUE);
      await page.click("[data-vault-submit]");
      const row = '[data-vault-entry="db-url"]';
      await page.waitForSelector(row, { visible: true, timeout: 10_000 });
      const rowText = await text(page, row);
      assert.match(rowText, /db-url/);
      assert.match(rowText, /password/);
      assert.match(rowText, new RegExp(`${VALUE.length} B`));
      assert.match(rowText, /Prod database/);
      assert.equal(await page.$("[data-vault-add-error]"), null);
      assert.match(await text(page, "[data-vault-note]"), /Added entry "db-url"/);
      assert.match(await text(page, "[data-vault-entries]"), /1 entry/);
      for (const f of ["name", "description", "value"]) {
        assert.equal(await fieldValue(page, `[data-vault-field="${f}"]`), "", f);
      }
      const listed = await vault();
      assert.deepEqual(listed.list.map((e) => [e.name, e.kind, e.bytes, e.description]), [
        ["db-url", "password", VALUE.length, "Prod database"],
      ]);
      // The value went out once, as UTF-8 in base64.
      assert.equal(sent.length, 2);
      assert.equal(JSON.parse(sent[1]!).value_b64, btoa(VALUE));

      // Another operator's change shows from the event stream alone.
      const put = await op("/vault/entries/api-token", {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ value_b64: btoa(OTHER_VALUE) }),
      });
      assert.equal(put.status, 200, await put.clone().text());
      await put.body?.cancel();
      await page.waitForSelector('[data-vault-entry="api-token"][data-kind="secret"]', {
        timeout: 10_000,
      });

      // A phone-sized screen: nothing wider than the viewport.
      await page.setViewport({ width: 390, height: 844 });
      await page.evaluate(
        `document.fonts.ready.then(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))))`,
      );
      const width = await page.evaluate(`document.documentElement.scrollWidth`) as number;
      assert.ok(width <= 390, `scrollWidth ${width}`);
      await page.screenshot({ path: `${shots}/phone-vault.png`, fullPage: true });
      await page.setViewport({ width: 1280, height: 800 });
      await page.screenshot({ path: `${shots}/vault.png`, fullPage: true });

      // Remove: Escape keeps it; confirming removes it from the view and the vault.
      await page.click('[data-vault-remove="db-url"]');
      await page.waitForSelector("dialog.confirm[open]", { visible: true, timeout: 5_000 });
      assert.match(await text(page, "dialog.confirm[open]"), /Remove vault entry db-url/);
      await page.keyboard.press("Escape");
      await page.waitForFunction(`!document.querySelector("dialog.confirm[open]")`, {
        timeout: 5_000,
      });
      assert.ok(await page.$(row));
      await page.click('[data-vault-remove="db-url"]');
      await page.waitForSelector("dialog.confirm[open] [data-confirm]", { visible: true });
      await page.click("dialog.confirm[open] [data-confirm]");
      await page.waitForFunction(`!document.querySelector('${row}')`, { timeout: 10_000 });
      await page.waitForFunction(
        `document.querySelector("[data-vault-note]")?.textContent?.includes("Removed entry")`,
        { timeout: 10_000 },
      );
      assert.deepEqual((await vault()).list.map((e) => e.name), ["api-token"]);

      // No value, and no key, anywhere the page holds or read.
      const html = await page.content();
      for (const secret of [VALUE, btoa(VALUE), OTHER_VALUE, btoa(OTHER_VALUE), identity]) {
        assert.ok(!html.includes(secret), `page shows ${secret}`);
      }
      const bodies = await responses.bodies();
      assert.ok(bodies.some((b) => b.startsWith("/api/vault ")), bodies.join("\n"));
      const events = await eventsText(op, /vault\.entry_removed/);
      assert.match(events, /vault\.entry_set/);
      for (const body of [...bodies, events]) {
        for (const secret of [VALUE, btoa(VALUE), OTHER_VALUE, btoa(OTHER_VALUE), identity]) {
          assert.ok(!body.includes(secret), `a response carries ${secret}: ${body.slice(0, 200)}`);
        }
      }

      // Lock: asks first (Escape keeps it unlocked), then locks.
      await page.click("[data-vault-lock]");
      await page.waitForSelector("dialog.confirm[open]", { visible: true, timeout: 5_000 });
      await page.keyboard.press("Escape");
      await page.waitForFunction(`!document.querySelector("dialog.confirm[open]")`, {
        timeout: 5_000,
      });
      assert.ok(await page.$(state("unlocked")));
      await page.click("[data-vault-lock]");
      await page.waitForSelector("dialog.confirm[open] [data-confirm]", { visible: true });
      await page.click("dialog.confirm[open] [data-confirm]");
      await page.waitForSelector(state("locked"), { visible: true, timeout: 10_000 });
      assert.equal(await page.$("[data-vault-entry]"), null);
      assert.equal((await vault()).unlocked, false);

      // The CLI's unlock and lock: the open page follows the events.
      const unlock = await termada(home, ["unlock", "--identity", keyFile], env);
      assert.equal(unlock.code, 0, unlock.stderr);
      await page.waitForSelector(state("unlocked"), { visible: true, timeout: 10_000 });
      await page.waitForSelector('[data-vault-entry="api-token"]', { timeout: 10_000 });
      const lock = await termada(home, ["lock"], env);
      assert.equal(lock.code, 0, lock.stderr);
      await page.waitForSelector(state("locked"), { visible: true, timeout: 10_000 });
      assert.equal(await page.$("[data-vault-entry]"), null);
      assert.deepEqual(problems, []);
    } finally {
      await closeBrowser(browser, profile, home);
    }
  },
});

Deno.test({
  name: "dashboard: Vault view shows how to create a vault, then unlocks a passphrase vault",
  ignore: !haveChromium(),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const home = await tempHome();
    const profile = await Deno.makeTempDir({ prefix: "termada-chromium-" });
    const env = { DENO_DIR };
    const passphrase = "correct-horse-vault-9";
    await using daemon = await startDaemon(home, { env });
    const url = /Dashboard\s+(\S+)/.exec(daemon.stderr())?.[1];
    assert.ok(url, daemon.stderr());

    let browser: Browser | undefined;
    try {
      browser = await launchBrowser(profile);
      const page = await openDashboard(browser, url);
      const problems = watchProblems(page);
      await page.click('[data-tab="vault"]');

      // No vault file: the CLI command that makes one, no form.
      await page.waitForSelector("[data-vault-absent]", { visible: true, timeout: 10_000 });
      assert.match(await text(page, "[data-vault-absent]"), /termada vault init/);
      assert.equal(await page.$("[data-vault-unlock]"), null);

      // The CLI creates it; the reloaded page shows it locked, with a passphrase field.
      const passFile = `${home}/passphrase.txt`;
      await Deno.writeTextFile(passFile, `${passphrase}\n`);
      const init = await termada(home, ["vault", "init", "--passphrase-file", passFile], env);
      assert.equal(init.code, 0, init.stderr);
      await page.reload({ waitUntil: "domcontentloaded" });
      await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });
      await page.click('[data-tab="vault"]');
      await page.waitForSelector(state("locked"), { visible: true, timeout: 10_000 });
      assert.match(await text(page, state("locked")), /passphrase/);
      assert.equal(
        await page.$eval("[data-vault-key]", (el) => (el as unknown as Field).type),
        "password",
      );

      // A wrong passphrase: the daemon's message and hint, the field emptied, still locked.
      await page.type("[data-vault-key]", "not-the-passphrase");
      await page.click("[data-vault-unlock-submit]");
      await page.waitForSelector("[data-vault-unlock-error]", { visible: true, timeout: 15_000 });
      const refused = await text(page, "[data-vault-unlock-error]");
      assert.match(refused, /wrong passphrase/);
      assert.match(refused, /vault reset/);
      assert.equal(await fieldValue(page, "[data-vault-key]"), "");
      assert.ok(await page.$(state("locked")));

      // The right one unlocks it.
      await page.type("[data-vault-key]", passphrase);
      await page.click("[data-vault-unlock-submit]");
      await page.waitForSelector(state("unlocked"), { visible: true, timeout: 15_000 });
      assert.match(await text(page, state("unlocked")), /protected by a passphrase/);
      assert.ok(!(await page.content()).includes(passphrase));
      assert.deepEqual(problems, []);
    } finally {
      await closeBrowser(browser, profile, home);
    }
  },
});

/**
 * The dashboard's Servers view in a real headless Chromium against a real daemon: the config
 * file's server is listed without Remove, a bad Add shows the daemon's error under the form, a
 * server added through the form is listed (and in `/api/servers`), an agent's failed connection
 * shows it unreachable with the error, Forget host key and Remove ask first (Escape keeps it),
 * and the view fits a phone. With a real sshd, an agent's remote session is labelled with its
 * server in Sessions and the server shows reachable. Skipped when /usr/bin/chromium (or, for the
 * second test, /usr/sbin/sshd) is missing.
 */
import assert from "node:assert/strict";
import type { Browser, Page } from "puppeteer-core";
import { operatorFetch, startDaemon, stdioClient, tempHome } from "./_daemon.ts";
import { closeBrowser, haveChromium, launchBrowser, watchProblems } from "./_browser.ts";
import { freePort, sshdAvailable, TestSshd } from "../src/remote/_test_sshd.ts";

const CONFIG = `servers:
  - name: cfg-box
    host: 10.9.9.9
    user: ops
    tags: [prod]
`;

/** A HOME for the daemon whose ~/.ssh/id_ed25519 is `key` (a fresh one when absent). */
async function sshHome(key?: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "termada-userhome-" });
  await Deno.mkdir(`${dir}/.ssh`, { mode: 0o700 });
  const path = `${dir}/.ssh/id_ed25519`;
  if (key) await Deno.writeTextFile(path, key, { mode: 0o600 });
  else {
    const out = await new Deno.Command("ssh-keygen", {
      args: ["-q", "-t", "ed25519", "-N", "", "-f", path],
      stdout: "null",
      stderr: "piped",
    }).output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
  }
  return dir;
}

/**
 * The daemon's env for a `home` HOME: no ssh-agent, and this process's DENO_DIR (it defaults to
 * `$HOME/.cache/deno`, and a cold cache would fetch every npm package again).
 */
async function sshEnv(home: string): Promise<Record<string, string>> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json"],
    stdout: "piped",
    stderr: "null",
  }).output();
  const { denoDir } = JSON.parse(new TextDecoder().decode(out.stdout)) as { denoDir: string };
  return { HOME: home, SSH_AUTH_SOCK: "", DENO_DIR: denoDir };
}

/** Replaces what a field of the Add form holds. */
async function fill(page: Page, field: string, value: string): Promise<void> {
  const sel = `[data-server-field="${field}"]`;
  await page.click(sel, { count: 3 });
  await page.keyboard.press("Backspace");
  if (value) await page.type(sel, value);
}

async function openDashboard(browser: Browser, url: string): Promise<Page> {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  await page.goto(url, { waitUntil: "domcontentloaded" });
  await page.waitForSelector('[data-conn="live"]', { timeout: 10_000 });
  return page;
}

const text = (page: Page, sel: string) => page.$eval(sel, (el) => el.textContent ?? "");

Deno.test({
  name: "dashboard: Servers view adds a server through the form, lists it and removes it",
  ignore: !haveChromium(),
  // puppeteer keeps its own timers and sockets; the browser is closed and killed in finally.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const home = await tempHome();
    await Deno.writeTextFile(`${home}/config.yaml`, CONFIG);
    const userHome = await sshHome();
    const profile = await Deno.makeTempDir({ prefix: "termada-chromium-" });
    const shots = await Deno.makeTempDir({ prefix: "termada-shots-" });
    // The daemon has a key (so it really connects) and no ssh-agent.
    await using daemon = await startDaemon(home, { env: await sshEnv(userHome) });
    const url = /Dashboard\s+(\S+)/.exec(daemon.stderr())?.[1];
    assert.ok(url, daemon.stderr());
    const op = operatorFetch(daemon);
    // Nothing listens there: connections are refused at once.
    const port = freePort();

    let browser: Browser | undefined;
    try {
      browser = await launchBrowser(profile);
      const page = await openDashboard(browser, url);
      const problems = watchProblems(page);
      await page.click('[data-tab="servers"]');

      // The config file's server: listed, never tried, Forget but no Remove; no forwards.
      const cfg = '[data-server="cfg-box"][data-source="config"]';
      await page.waitForSelector(cfg, { visible: true, timeout: 10_000 });
      assert.match(await text(page, cfg), /ops@10\.9\.9\.9:22/);
      assert.match(await text(page, cfg), /not tried/);
      assert.ok(await page.$(`${cfg} [data-forget-host-key="cfg-box"]`));
      assert.equal(await page.$(`${cfg} [data-remove-server]`), null);
      await page.waitForSelector("[data-forwards-empty]", { visible: true });

      // A name the daemon refuses: its message under the form, nothing added.
      await fill(page, "name", "Bad Name");
      await fill(page, "host", "127.0.0.1");
      await fill(page, "user", "tester");
      await page.click("[data-server-submit]");
      await page.waitForSelector("[data-server-add-error]", { visible: true, timeout: 10_000 });
      assert.match(await text(page, "[data-server-add-error]"), /Cannot add server "Bad Name"/);

      // Added through the form: listed as a live server, the form cleared.
      await fill(page, "name", "probe-1");
      await fill(page, "port", String(port));
      await fill(page, "tags", "test, web");
      await page.click("[data-server-submit]");
      const row = '[data-server="probe-1"][data-source="live"]';
      await page.waitForSelector(row, { visible: true, timeout: 10_000 });
      assert.match(await text(page, row), new RegExp(`tester@127\\.0\\.0\\.1:${port}`));
      assert.match(await text(page, row), /test, web/);
      assert.match(await text(page, row), /not tried/);
      assert.equal(await page.$("[data-server-add-error]"), null);
      assert.equal(
        await page.evaluate(`document.querySelector('[data-server-field="name"]').value`),
        "",
      );
      const listed = await (await op("/servers")).json() as {
        servers: { name: string; source: string; port: number; tags: string[] }[];
      };
      const added = listed.servers.find((s) => s.name === "probe-1");
      assert.deepEqual(
        added && { source: added.source, port: added.port, tags: added.tags },
        { source: "live", port, tags: ["test", "web"] },
      );

      // An agent's session there fails to connect: the view follows the event and says why.
      {
        await using client = await stdioClient(home);
        const r = await client.callTool({
          name: "session_create",
          arguments: { target: "probe-1" },
        });
        assert.equal(r.isError, true, JSON.stringify(r));
      }
      await page.waitForSelector(`${row} [data-reachable="down"]`, { timeout: 10_000 });
      assert.match(await text(page, `${row} [data-reachable]`), /unreachable.*refused/i);

      // Forget host key: asks first; nothing was recorded for a server never reached.
      await page.click('[data-forget-host-key="probe-1"]');
      await page.waitForSelector("dialog.confirm[open] [data-confirm]", { visible: true });
      await page.click("dialog.confirm[open] [data-confirm]");
      await page.waitForFunction(
        `document.querySelector("[data-servers-note]")?.textContent.includes("No host key")`,
        { timeout: 10_000 },
      );

      // A phone-sized screen: nothing wider than the viewport (the tables scroll in place).
      await page.setViewport({ width: 390, height: 844 });
      await page.evaluate(
        `document.fonts.ready.then(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))))`,
      );
      const width = await page.evaluate(`document.documentElement.scrollWidth`) as number;
      assert.ok(width <= 390, `scrollWidth ${width}`);
      await page.screenshot({ path: `${shots}/phone-servers.png`, fullPage: true });
      await page.setViewport({ width: 1280, height: 800 });
      await page.screenshot({ path: `${shots}/servers.png`, fullPage: true });

      // Remove: Escape keeps it; confirming removes it from the view and the inventory.
      await page.click('[data-remove-server="probe-1"]');
      await page.waitForSelector("dialog.confirm[open]", { visible: true, timeout: 5_000 });
      await page.keyboard.press("Escape");
      await page.waitForFunction(`!document.querySelector("dialog.confirm[open]")`, {
        timeout: 5_000,
      });
      assert.ok(await page.$(row));
      await page.click('[data-remove-server="probe-1"]');
      await page.waitForSelector("dialog.confirm[open] [data-confirm]", { visible: true });
      await page.click("dialog.confirm[open] [data-confirm]");
      await page.waitForFunction(`!document.querySelector('[data-server="probe-1"]')`, {
        timeout: 10_000,
      });
      await page.waitForFunction(
        `document.querySelector("[data-servers-note]")?.textContent?.includes("Removed server")`,
        { timeout: 10_000 },
      );
      assert.match(await text(page, "[data-servers-note]"), /Removed server "probe-1"/);
      const after = await (await op("/servers")).json() as { servers: { name: string }[] };
      assert.deepEqual(after.servers.map((s) => s.name), ["cfg-box"]);
      assert.ok(await page.$(cfg));
      assert.deepEqual(problems, []);
    } finally {
      await closeBrowser(browser, profile, home, userHome);
    }
  },
});

/**
 * A TCP relay to sshd whose connections the test can cut (the daemon's link drops) and whose
 * port it can close and open again (reconnects fail, then succeed).
 */
class CutProxy implements AsyncDisposable {
  readonly port = freePort();
  #listener: Deno.TcpListener | undefined;
  #conns = new Set<Deno.Conn>();
  #pumps = new Set<Promise<unknown>>();

  constructor(readonly target: number) {}

  open(): void {
    const listener = Deno.listen({ hostname: "127.0.0.1", port: this.port });
    this.#listener = listener;
    this.#track(
      (async () => {
        for await (const c of listener) {
          const up = await Deno.connect({ hostname: "127.0.0.1", port: this.target }).catch(
            () => undefined,
          );
          if (!up) {
            c.close();
            continue;
          }
          this.#conns.add(c).add(up);
          this.#track(
            Promise.allSettled([
              c.readable.pipeTo(up.writable),
              up.readable.pipeTo(c.writable),
            ]).finally(() => this.#close(c, up)),
          );
        }
      })().catch(() => {}),
    ); // the listener was closed
  }

  /** Closes the port and every relayed connection. */
  async cut(): Promise<void> {
    try {
      this.#listener?.close();
    } catch {
      // already closed
    }
    this.#listener = undefined;
    this.#close(...this.#conns);
    await Promise.allSettled([...this.#pumps]);
  }

  #close(...conns: Deno.Conn[]): void {
    for (const c of conns) {
      this.#conns.delete(c);
      try {
        c.close();
      } catch {
        // closed by the other side's pump already
      }
    }
  }

  #track(p: Promise<unknown>): void {
    this.#pumps.add(p);
    p.finally(() => this.#pumps.delete(p));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.cut();
  }
}

Deno.test({
  name: "dashboard: a remote session is labelled with its server and shows when it reconnects",
  ignore: !haveChromium() || !sshdAvailable(),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await using sshd = await TestSshd.start();
    await using proxy = new CutProxy(sshd.port);
    proxy.open();
    const home = await tempHome();
    const userHome = await sshHome(sshd.clientKey);
    const profile = await Deno.makeTempDir({ prefix: "termada-chromium-" });
    const shots = await Deno.makeTempDir({ prefix: "termada-shots-" });
    await using daemon = await startDaemon(home, { env: await sshEnv(userHome) });
    const url = /Dashboard\s+(\S+)/.exec(daemon.stderr())?.[1];
    assert.ok(url, daemon.stderr());
    const op = operatorFetch(daemon);
    const res = await op("/servers", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "box-1", host: "127.0.0.1", port: proxy.port, user: sshd.user }),
    });
    assert.equal(res.status, 201, await res.clone().text());
    await res.body?.cancel();

    let browser: Browser | undefined;
    try {
      browser = await launchBrowser(profile);
      const page = await openDashboard(browser, url);
      const problems = watchProblems(page);
      await using client = await stdioClient(home);
      const r = await client.callTool({ name: "session_create", arguments: { target: "box-1" } });
      assert.notEqual(r.isError, true, JSON.stringify(r));
      const sid = String((r.structuredContent as { session_id: string }).session_id);

      // Sessions: the card names the server (a local session shows no label).
      const card = `[data-session="${sid}"]`;
      await page.waitForSelector(`${card} [data-target="box-1"]`, { timeout: 15_000 });
      assert.equal(await page.$(`${card} [data-link]`), null);

      // The link drops and the server refuses for a while: the card says it is reconnecting.
      await proxy.cut();
      await page.waitForSelector(`${card} [data-link="reconnecting"]`, { timeout: 15_000 });
      await page.screenshot({ path: `${shots}/session-reconnecting.png` });
      proxy.open();
      await page.waitForFunction(
        `!!document.querySelector('${card} [data-target="box-1"]') && ` +
          `!document.querySelector('${card} [data-link]')`,
        { timeout: 30_000 },
      );

      // An agent's port forward through the server (to its own sshd port).
      const fw = await client.callTool({
        name: "port_forward",
        arguments: { server: "box-1", remote_host: "127.0.0.1", remote_port: sshd.port },
      });
      assert.notEqual(fw.isError, true, JSON.stringify(fw));
      const fid = String((fw.structuredContent as { forward_id: string }).forward_id);

      // Servers: reachable, one session; the forward with its owner and both ends.
      await page.click('[data-tab="servers"]');
      const row = '[data-server="box-1"]';
      await page.waitForSelector(`${row} [data-reachable="up"]`, { timeout: 10_000 });
      assert.match(await text(page, row), /reachable/);
      const fwRow = `[data-forward="${fid}"]`;
      await page.waitForSelector(fwRow, { visible: true, timeout: 10_000 });
      const fwText = await text(page, fwRow);
      assert.match(fwText, /termada-test/);
      assert.match(fwText, /box-1/);
      assert.ok(fwText.includes(`127.0.0.1:${sshd.port}`), fwText);
      assert.match(fwText, /open/);
      await page.screenshot({ path: `${shots}/servers-forward.png`, fullPage: true });
      await client.callTool({ name: "port_forward_close", arguments: { forward_id: fid } });
      await page.waitForFunction(
        `!(document.querySelector('${fwRow}')?.textContent ?? "closed").includes("open")`,
        { timeout: 10_000 },
      );

      // The first connection recorded the server's key, which Forget removes.
      await page.click('[data-forget-host-key="box-1"]');
      await page.waitForSelector("dialog.confirm[open] [data-confirm]", { visible: true });
      await page.click("dialog.confirm[open] [data-confirm]");
      await page.waitForFunction(
        `document.querySelector("[data-servers-note]")?.textContent.includes("Forgot the host key")`,
        { timeout: 10_000 },
      );
      await client.callTool({ name: "session_close", arguments: { session_id: sid } });
      assert.deepEqual(problems, []);
    } finally {
      await closeBrowser(browser, profile, home, userHome);
    }
  },
});

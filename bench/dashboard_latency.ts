/**
 * (g) Dashboard keystroke-to-echo latency: a real daemon, an agent's session, the dashboard in
 * headless Chromium (puppeteer-core). The operator takes the session over and presses keys; each
 * sample is the time in the page from the `keydown` event to the echoed character appearing in the
 * terminal's DOM rows (10 ms input batching, the POST, the PTY echo, the SSE stream and xterm.js
 * rendering included). Also the bundle size. Skipped when /usr/bin/chromium is missing.
 */
import type { Browser } from "puppeteer-core";
import { call, startDaemon, stdioClient, tempHome } from "../tests/_daemon.ts";
import { CHROMIUM, closeBrowser, haveChromium, launchBrowser } from "../tests/_browser.ts";

const APP_JS = new URL("../dashboard/dist/app.js", import.meta.url);

function pct(samples: number[], p: number): number {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

async function gzipSize(bytes: Uint8Array): Promise<number> {
  const stream = new Blob([bytes as BlobPart]).stream().pipeThrough(new CompressionStream("gzip"));
  return (await new Response(stream).arrayBuffer()).byteLength;
}

/** Lines to print: bundle size, then median and p99 keystroke-to-echo latency. */
export async function dashboardLatency(quick: boolean): Promise<string[]> {
  const lines: string[] = [];
  const js = await Deno.readFile(APP_JS);
  lines.push(
    `(g) dashboard bundle: app.js ${(js.byteLength / 1024).toFixed(1)} KiB, gzip ${
      ((await gzipSize(js)) / 1024).toFixed(1)
    } KiB`,
  );
  if (!haveChromium()) {
    lines.push(`(g) keystroke-to-echo latency: skipped (${CHROMIUM} is missing)`);
    return lines;
  }
  const n = quick ? 30 : 200;
  const home = await tempHome();
  const profile = await Deno.makeTempDir({ prefix: "termada-bench-chromium-" });
  let browser: Browser | undefined;
  try {
    await using daemon = await startDaemon(home);
    const url = /Dashboard\s+(\S+)/.exec(daemon.stderr())?.[1];
    if (!url) throw new Error(`no dashboard URL:\n${daemon.stderr()}`);
    await using client = await stdioClient(home);
    const r = await call(client, "exec_run", { command: ["echo bench-ready"] });
    const card = `[data-session="${r.session_id}"]`;
    browser = await launchBrowser(profile);
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 800 });
    await page.goto(url, { waitUntil: "domcontentloaded" });
    await page.waitForSelector('[data-conn="live"]', { timeout: 15_000 });
    await page.waitForFunction(
      `(document.querySelector('${card} .xterm-rows')?.textContent ?? "").includes("bench-ready")`,
      { timeout: 15_000 },
    );
    await page.click(`${card} [data-takeover]`);
    await page.waitForSelector(`${card}[data-held="true"]`, { timeout: 10_000 });
    await page.click(`${card} .xterm`);
    // In the page: `__arm(ch)` counts `ch` in the rows, then resolves with the time from the next
    // keydown to the first DOM mutation that shows one more `ch`.
    await page.evaluate(`
      window.__rows = () => [...document.querySelector('${card} .xterm-rows').children]
        .map((row) => (row.textContent ?? "").trimEnd()).join("\\n");
      window.__arm = (ch) => {
        const rows = document.querySelector('${card} .xterm-rows');
        const count = () => rows.textContent.split(ch).length - 1;
        const n0 = count();
        let kd = 0;
        document.addEventListener("keydown", () => { kd = performance.now(); },
          { capture: true, once: true });
        return new Promise((resolve, reject) => {
          const obs = new MutationObserver(() => {
            if (kd && count() > n0) {
              obs.disconnect();
              clearTimeout(t);
              resolve(performance.now() - kd);
            }
          });
          const t = setTimeout(() => { obs.disconnect(); reject(new Error("no echo of " + ch)); },
            5000);
          obs.observe(rows, { subtree: true, childList: true, characterData: true });
        });
      };
      window.__base = window.__rows();
    `);
    const letters = "abcdefghijklmnop";
    const samples: number[] = [];
    for (let i = 0; i < n; i++) {
      const ch = letters[i % letters.length]!;
      await page.evaluate(`void (window.__p = window.__arm(${JSON.stringify(ch)}))`);
      await page.keyboard.press(ch as "a");
      samples.push(Number(await page.evaluate(`window.__p`)));
      if (i % letters.length === letters.length - 1 || i === n - 1) {
        // Ctrl-U clears the line (bash readline); wait until the screen is back to the prompt.
        await page.keyboard.down("Control");
        await page.keyboard.press("u");
        await page.keyboard.up("Control");
        await page.waitForFunction(`window.__rows() === window.__base`, { timeout: 5_000 });
      }
    }
    const med = pct(samples, 50);
    const p99 = pct(samples, 99);
    lines.push(
      `(g) dashboard keystroke-to-echo (${n} keys, keydown → row in the DOM): median ${
        med.toFixed(1)
      } ms, p99 ${p99.toFixed(1)} ms`,
    );
    await page.keyboard.press("Escape").catch(() => {});
  } finally {
    await closeBrowser(browser, profile, home);
  }
  return lines;
}

if (import.meta.main) {
  for (const line of await dashboardLatency(Deno.env.get("BENCH_QUICK") === "1")) {
    Deno.stdout.writeSync(new TextEncoder().encode(line + "\n"));
  }
}

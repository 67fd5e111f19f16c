/**
 * Shared headless-Chromium plumbing for the dashboard browser tests and the (g) latency bench:
 * launching puppeteer-core with a throwaway profile, collecting page errors, and tearing the
 * browser (and temp dirs) down again.
 */
import puppeteer from "puppeteer-core";
import type { Browser, Page } from "puppeteer-core";

export const CHROMIUM = "/usr/bin/chromium";

/** Whether the Chromium binary the tests and bench drive is installed. */
export function haveChromium(): boolean {
  try {
    return Deno.statSync(CHROMIUM).isFile;
  } catch {
    return false;
  }
}

/** Launches headless Chromium with `profile` as its user data dir. */
export async function launchBrowser(profile: string): Promise<Browser> {
  return await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    userDataDir: profile,
    args: [
      "--no-sandbox",
      "--headless",
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/** Collects the page's uncaught errors and script/eval console errors into the returned array. */
export function watchProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`pageerror: ${e}`));
  page.on("console", (m) => {
    if (m.type() === "error" && /script|eval/i.test(m.text())) problems.push(m.text());
  });
  return problems;
}

/** Closes the browser (SIGKILL if it lingers), then removes the given temp dirs. */
export async function closeBrowser(
  browser: Browser | undefined,
  ...dirs: string[]
): Promise<void> {
  const proc = browser?.process();
  await browser?.close().catch(() => {});
  try {
    proc?.kill("SIGKILL");
  } catch {
    // already gone
  }
  for (const dir of dirs) await Deno.remove(dir, { recursive: true }).catch(() => {});
}

/**
 * Collects everything the dashboard must never cause, across every view: console errors and
 * warnings (a CSP refusal is a console error), uncaught page errors, failed requests and
 * responses with status ≥ 400. Requests the page aborts on purpose — an SSE stream it closes
 * when a terminal leaves the page or a view closes — report `net::ERR_ABORTED` and are not
 * problems; `allow` lists URL patterns a test provokes an error status on deliberately.
 */
export function watchConsole(page: Page, allow: RegExp[] = []): string[] {
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`pageerror: ${e}`));
  page.on("console", (m) => {
    const t = m.type();
    if (t === "error" || t === "warn" || /Content Security Policy/i.test(m.text())) {
      problems.push(`console.${t}: ${m.text()} @ ${m.location()?.url ?? ""}`);
    }
  });
  page.on("requestfailed", (r) => {
    const err = r.failure()?.errorText ?? "";
    if (err === "net::ERR_ABORTED") return;
    problems.push(`requestfailed: ${r.method()} ${r.url()} ${err}`);
  });
  page.on("response", (r) => {
    if (r.status() >= 400 && !allow.some((re) => re.test(r.url()))) {
      problems.push(`HTTP ${r.status()}: ${r.request().method()} ${r.url()}`);
    }
  });
  return problems;
}

/** Waits for two animation frames (layout and a refit settled). */
export async function settled(page: Page): Promise<void> {
  await page.evaluate(
    `document.fonts.ready.then(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))))`,
  );
}

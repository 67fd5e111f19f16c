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

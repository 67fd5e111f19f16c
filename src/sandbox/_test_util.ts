/** Helpers shared by the sandbox's process tests (cgroups, the reaper). Test code only. */

/** Waits (polling every 10 ms) until `cond` holds, or throws after `ms`. */
export async function waitFor(what: string, cond: () => boolean, ms = 5000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!cond()) {
    if (performance.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** `tag pid` lines written by the test's processes, by tag. */
export function readPids(file: string): Map<string, number> {
  const out = new Map<string, number>();
  let text = "";
  try {
    text = Deno.readTextFileSync(file);
  } catch {
    return out; // not written yet
  }
  for (const line of text.split("\n")) {
    const [tag, pid] = line.split(" ");
    if (tag && pid) out.set(tag, Number(pid));
  }
  return out;
}

/** `bash -c script` with exactly `env`, no stdio. */
export function bash(script: string, env: Record<string, string>): Deno.ChildProcess {
  return new Deno.Command("bash", {
    args: ["-c", script],
    env,
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
}

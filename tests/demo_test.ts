/** The Mission Control demo end to end: demo/mission-control/verify_demo.sh must print DEMO OK. */
import assert from "node:assert/strict";
const ROOT = new URL("..", import.meta.url).pathname;

Deno.test("demo/mission-control/verify_demo.sh runs the whole mission and prints DEMO OK", async () => {
  const out = await new Deno.Command("bash", {
    args: [`${ROOT}demo/mission-control/verify_demo.sh`],
    cwd: ROOT,
    env: { DENO: Deno.execPath(), NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  const stdout = dec.decode(out.stdout);
  const stderr = dec.decode(out.stderr);
  const transcript = `exit ${out.code}\n--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}`;
  assert.equal(out.code, 0, `verify_demo.sh failed:\n${transcript}`);
  assert.match(stdout, /^DEMO OK$/m, `verify_demo.sh did not print DEMO OK:\n${transcript}`);
});

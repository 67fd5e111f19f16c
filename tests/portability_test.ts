/**
 * Portability of the MCP surface: the MCP Inspector CLI (dev-only, `.tools/`) lists the tools
 * through `termada serve --stdio` in `--strict` mode and reports schemas other clients may
 * read differently as `Warning: tool "…"` blocks on stderr. The contract is zero of them.
 */
import assert from "node:assert/strict";
import { ROOT, tempHome } from "./_daemon.ts";
import { DENO, runWithDeadline, SHIM_ARGS, stopLockedDaemon } from "./_clients.ts";

const INSPECTOR = `${ROOT}.tools/node_modules/.bin/mcp-inspector`;
const INSTALL_HINT =
  "run the dev-tools install: npm install --prefix .tools @modelcontextprotocol/inspector@2.12.0";

Deno.test("the MCP Inspector CLI in --strict mode reports no portability warnings for tools/list", async () => {
  try {
    Deno.statSync(INSPECTOR);
  } catch {
    assert.fail(`The MCP Inspector CLI is missing (${INSPECTOR}): ${INSTALL_HINT}`);
  }
  const home = await tempHome();
  // Any free port for the daemon the shim starts: a real daemon may hold 7717 here.
  await Deno.writeTextFile(`${home}/config.yaml`, "server:\n  bind: 127.0.0.1:0\n");
  try {
    const r = await runWithDeadline(INSPECTOR, [
      "--cli",
      "--strict",
      "--method",
      "tools/list",
      // The inspector does not forward the parent environment: -e passes what the shim needs.
      "-e",
      `TERMADA_HOME=${home}`,
      "--",
      DENO,
      ...SHIM_ARGS,
    ], { ms: 120_000 });
    assert.equal(r.timedOut, false, `the inspector did not finish within 120 s:\n${r.stderr}`);
    assert.equal(r.code, 0, `inspector exit code 0, got ${r.code}:\n${r.stderr.slice(0, 3000)}`);

    let listed: { tools?: { name: string }[] };
    try {
      listed = JSON.parse(r.stdout);
    } catch {
      assert.fail(`the inspector printed the tools/list result as JSON: ${r.stdout.slice(0, 500)}`);
    }
    const names = (listed.tools ?? []).map((t) => t.name);
    assert.ok(names.includes("exec_run"), `it listed Termada's tools: ${names.join(", ")}`);

    // A finding: its `Warning: tool "…"` line and the indented lines under it.
    const blocks = r.stderr.match(/^Warning: tool "[^"]*".*(?:\n[ \t]+.*)*/gm) ?? [];
    const tools = [...new Set(blocks.map((b) => /Warning: tool "([^"]+)"/.exec(b)![1]))];
    assert.equal(
      blocks.length,
      0,
      `${blocks.length} portability warning(s) for ${tools.length} tool(s) (${
        tools.join(", ")
      }); the first:\n\n${blocks.slice(0, 3).map((b) => b.trim()).join("\n\n")}`,
    );
  } finally {
    await stopLockedDaemon(home);
    await Deno.remove(home, { recursive: true });
  }
});

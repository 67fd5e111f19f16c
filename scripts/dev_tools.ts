/**
 * The real clients the tests and benchmarks drive, installed dev-only into `.tools/` (ignored by
 * git) from the npm registry at pinned versions: the Claude Code CLI (`claude mcp add/list`), the
 * MCP Inspector CLI (schema portability) and the peer MCP server the benchmark compares against.
 * `deno task test` runs this first; it only installs what is missing, so a warm run costs a few
 * stat calls. Without a registry it says so and the tests that need a tool fail naming it.
 */
const ROOT = new URL("..", import.meta.url).pathname;
const PREFIX = `${ROOT}.tools`;

/** package → [version, a binary it installs under .tools/node_modules/.bin]. */
export const DEV_TOOLS: Record<string, [string, string]> = {
  "@anthropic-ai/claude-code": ["2.1.197", "claude"],
  "@modelcontextprotocol/inspector": ["2.12.0", "mcp-inspector"],
  "mcp-server-commands": ["0.5.0", "mcp-server-commands"],
};

function installedVersion(pkg: string): string | undefined {
  try {
    const text = Deno.readTextFileSync(`${PREFIX}/node_modules/${pkg}/package.json`);
    return (JSON.parse(text) as { version?: string }).version;
  } catch {
    return undefined;
  }
}

function hasBin(name: string): boolean {
  try {
    Deno.statSync(`${PREFIX}/node_modules/.bin/${name}`);
    return true;
  } catch {
    return false;
  }
}

const missing = Object.entries(DEV_TOOLS)
  .filter(([pkg, [version, bin]]) => installedVersion(pkg) !== version || !hasBin(bin))
  .map(([pkg, [version]]) => `${pkg}@${version}`);

if (missing.length > 0) {
  const say = (t: string) => Deno.stderr.writeSync(new TextEncoder().encode(t + "\n"));
  say(`dev tools: installing ${missing.join(" ")} into .tools/`);
  const r = await new Deno.Command("npm", {
    args: [
      "install",
      "--prefix",
      PREFIX,
      "--no-audit",
      "--no-fund",
      "--loglevel=error",
      ...missing,
    ],
    stdout: "inherit",
    stderr: "inherit",
  }).output().catch((err) => ({ success: false, error: err }));
  if (!r.success) {
    say("dev tools: npm install failed; the tests that need these tools will fail naming them");
  }
}

/**
 * `deno task install`: puts a `termada` command on PATH for users without a compiled binary.
 * A `deno install --global` wrapper whose permission flags are generated from the `daemon`
 * permission set in deno.json (so the two cannot drift). The launcher runs this same Deno by
 * its absolute path (it may have come from `npx` and not be on PATH).
 */
const root = new URL("..", import.meta.url).pathname;
const config = JSON.parse(await Deno.readTextFile(`${root}deno.json`));
const set = config.permissions?.daemon as Record<string, boolean | string[]> | undefined;
if (!set) throw new Error('deno.json has no "daemon" permission set');

const flags: string[] = [];
for (const [name, value] of Object.entries(set)) {
  if (value === true) flags.push(`--allow-${name}`);
  else if (Array.isArray(value) && value.length > 0) {
    flags.push(`--allow-${name}=${value.join(",")}`);
  }
}

const args = [
  "install",
  "--global",
  "--force",
  "--name",
  "termada",
  "--config",
  `${root}deno.json`,
  ...flags,
  "--no-prompt",
  "--quiet",
  `${root}mod.ts`,
];
const out = await new Deno.Command(Deno.execPath(), { args, stdout: "inherit", stderr: "inherit" })
  .output();
if (!out.success) Deno.exit(out.code);

const installRoot = Deno.env.get("DENO_INSTALL_ROOT") ?? `${Deno.env.get("HOME")}/.deno`;
const launcher = `${installRoot}/bin/termada`;
// Pin the Deno that installed it: `deno` may not be on PATH (npx), or be another version.
const text = await Deno.readTextFile(launcher);
await Deno.writeTextFile(launcher, text.replace(/^exec deno /m, `exec '${Deno.execPath()}' `));
const enc = new TextEncoder();
await Deno.stderr.write(enc.encode(
  `Installed ${launcher}\n` +
    (Deno.env.get("PATH")?.split(":").includes(`${installRoot}/bin`)
      ? ""
      : `Add it to PATH:  export PATH="${installRoot}/bin:$PATH"\n`) +
    "Then: termada serve   (or: claude mcp add --scope user termada -- termada serve --stdio)\n",
));

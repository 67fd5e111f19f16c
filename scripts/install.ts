/**
 * `deno task install`: puts a `termada` command on PATH for users without a compiled binary.
 *
 * It writes a small launcher to `$TERMADA_BIN_DIR` (default `~/.local/bin`, where install.sh
 * puts the release binary too) that runs this checkout with the `daemon` permission set of
 * deno.json — the same set `deno compile` embeds, so the two cannot drift — and with this same
 * Deno by its absolute path (it may have come from `npx` and not be on PATH). The launcher is
 * written to a temporary file and renamed into place, so a failed install leaves the old one.
 * When the directory is not on PATH it prints the line to add. A `DENO_DIR` set at install time
 * is kept in the launcher.
 */
const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const home = Deno.env.get("HOME");
const binDir = Deno.env.get("TERMADA_BIN_DIR") ?? (home ? `${home}/.local/bin` : undefined);
const enc = new TextEncoder();
const say = (text: string) => Deno.stderr.writeSync(enc.encode(text));
if (!binDir) {
  say("termada install: neither TERMADA_BIN_DIR nor HOME is set\n");
  Deno.exit(2);
}
const config = JSON.parse(await Deno.readTextFile(`${root}/deno.json`));
if (!config.permissions?.daemon) {
  say('termada install: deno.json has no "daemon" permission set\n');
  Deno.exit(1);
}

/** A single-quoted sh word. */
const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
const launcher = `${binDir}/termada`;
// A Deno cache chosen at install time (DENO_DIR) is kept: the packages are there.
const denoDir = Deno.env.get("DENO_DIR");
const text = `#!/bin/sh
# Termada from the checkout ${root} (written by deno task install; run it again to refresh).
${denoDir ? `export DENO_DIR=${q(denoDir)}\n` : ""}exec ${q(Deno.execPath())} run --config ${
  q(`${root}/deno.json`)
} -P=daemon --no-prompt --quiet \\
  ${q(`${root}/mod.ts`)} "$@"
`;
await Deno.mkdir(binDir, { recursive: true });
const tmp = `${launcher}.tmp-${Deno.pid}`;
try {
  await Deno.writeTextFile(tmp, text, { mode: 0o755 });
  await Deno.chmod(tmp, 0o755);
  await Deno.rename(tmp, launcher);
} catch (err) {
  await Deno.remove(tmp).catch(() => {}); // nothing half-written is left behind
  say(`termada install: cannot write ${launcher}: ${(err as Error).message}\n`);
  Deno.exit(1);
}

const onPath = (Deno.env.get("PATH") ?? "").split(":").some((d) => d.replace(/\/$/, "") === binDir);
say(
  `Installed ${launcher}\n` +
    (onPath ? "" : `Add it to PATH:  export PATH="${binDir}:$PATH"\n`) +
    "Then: termada setup   (adds it to Claude Code, Codex and Cursor) or termada serve\n",
);

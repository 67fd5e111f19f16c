/**
 * Builds the dashboard: `dashboard/main.tsx` (Preact + xterm.js) → `dashboard/dist/app.js` and
 * `dashboard/dist/app.css`, minified, with `deno bundle` (esbuild underneath; it resolves the
 * npm imports of deno.json). The output is committed, so the daemon, CI and `deno compile` need
 * no build step; run `deno task bundle` after changing `dashboard/`.
 *
 *   deno task bundle
 */
const ROOT = new URL("..", import.meta.url).pathname;
const OUT = `${ROOT}dashboard/dist`;

async function main(): Promise<number> {
  const tmp = await Deno.makeTempDir({ prefix: "termada-bundle-" });
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "bundle",
        "--quiet",
        "--config",
        `${ROOT}deno.json`,
        // Preact and xterm.js are dashboard-build packages: they live in the dev import map and
        // lock, so a first start of the daemon does not download them.
        `--import-map=${ROOT}imports.dev.json`,
        `--lock=${ROOT}deno.dev.lock`,
        "--platform",
        "browser",
        "--minify",
        "--outdir",
        tmp,
        `${ROOT}dashboard/main.tsx`,
      ],
      stdout: "inherit",
      stderr: "inherit",
    }).output();
    if (!out.success) return out.code || 1;
    await Deno.mkdir(OUT, { recursive: true });
    const sizes: string[] = [];
    for (const [from, to] of [["main.js", "app.js"], ["main.css", "app.css"]] as const) {
      const bytes = await Deno.readFile(`${tmp}/${from}`);
      await Deno.writeFile(`${OUT}/${to}`, bytes);
      const gz = await gzipSize(bytes);
      sizes.push(
        `${to} ${(bytes.length / 1024).toFixed(1)} KiB (gzip ${(gz / 1024).toFixed(1)} KiB)`,
      );
    }
    // deno-lint-ignore no-console
    console.log(`dashboard/dist: ${sizes.join(", ")}`);
    return 0;
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
}

async function gzipSize(bytes: Uint8Array): Promise<number> {
  const stream = new Blob([bytes as BlobPart]).stream().pipeThrough(new CompressionStream("gzip"));
  return (await new Response(stream).arrayBuffer()).byteLength;
}

Deno.exit(await main());

/**
 * `deno task release`: the release assets in dist/release/ — for every target (or --targets) a
 * `termada-<version>-<target>.tar.gz` holding one member `termada` (`termada.exe` on Windows),
 * `install.sh`, `SHA256SUMS` over all of them, `SHA256SUMS.sig` (Ed25519 over the SHA256SUMS bytes) when
 * --signing-key names a PKCS#8 PEM key, and `latest.json` ({"version": …}). The binaries come
 * from `deno compile` run with the `compile` task's own flags (so the two cannot drift) and
 * `--target`, or with --input DIR from `DIR/<target>/termada[.exe]` built elsewhere.
 * Layout and the client side: docs/INSTALL.md, src/update.
 *
 *   deno run -A scripts/release.ts [--version V] [--targets linux-x64,…] [--input DIR]
 *       [--out dist/release] [--signing-key FILE]
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { VERSION } from "../src/cli/mod.ts";
import {
  assetName,
  createTar,
  formatSums,
  gzip,
  importSigningKey,
  LATEST_FILE,
  memberName,
  parsePublicKey,
  parseVersion,
  RELEASE_PUBKEY,
  type ReleaseTarget,
  sha256Hex,
  SIG_FILE,
  sign,
  SUMS_FILE,
  TARGETS,
} from "../src/update/mod.ts";
import { encodeBase64 } from "../src/shared/mod.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const enc = new TextEncoder();
const say = (t: string) => Deno.stderr.writeSync(enc.encode(t + "\n"));

function fail(message: string): never {
  say(`release: ${message}`);
  Deno.exit(1);
}

const { values } = parseArgs({
  args: Deno.args,
  options: {
    version: { type: "string" },
    targets: { type: "string" },
    input: { type: "string" },
    out: { type: "string" },
    "signing-key": { type: "string" },
  },
  strict: true,
});

const version = parseVersion(values.version ?? VERSION);
const targets = (values.targets?.split(",") ?? Object.keys(TARGETS)).map((t) => {
  if (!Object.hasOwn(TARGETS, t)) {
    fail(`Unknown target "${t}" (known: ${Object.keys(TARGETS).join(", ")})`);
  }
  return t as ReleaseTarget;
});
const out = values.out ?? join(ROOT, "dist/release");

/** `deno compile` arguments of the `compile` task, with `--target` and our own `--output`. */
function compileArgs(target: ReleaseTarget, output: string): string[] {
  const config = JSON.parse(Deno.readTextFileSync(join(ROOT, "deno.json")));
  const task = config.tasks?.compile;
  const command: string = typeof task === "string" ? task : task?.command ?? "";
  const words = command.trim().split(/\s+/);
  if (words[0] !== "deno" || words[1] !== "compile") {
    fail(`The deno.json "compile" task is not a plain "deno compile …" command`);
  }
  const args = words.slice(1);
  const at = args.indexOf("--output");
  if (at < 0) fail(`The deno.json "compile" task has no "--output"`);
  args.splice(at, 2, "--output", output);
  args.splice(1, 0, "--target", TARGETS[target]);
  return args;
}

async function binaryFor(target: ReleaseTarget, work: string): Promise<Uint8Array> {
  const member = memberName(target);
  if (values.input) {
    const path = join(values.input, target, member);
    try {
      return await Deno.readFile(path);
    } catch (err) {
      fail(`No binary for ${target} at "${path}": ${(err as Error).message}`);
    }
  }
  const output = join(work, target, member);
  say(`release: deno compile --target ${TARGETS[target]}`);
  const r = await new Deno.Command(Deno.execPath(), {
    args: compileArgs(target, output),
    cwd: ROOT,
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  if (!r.success) {
    fail(`deno compile for ${target} failed (it needs denort: network or DENORT_BIN)`);
  }
  return await Deno.readFile(output);
}

const signing = values["signing-key"]
  ? await importSigningKey(await Deno.readTextFile(values["signing-key"])).catch((err) =>
    fail(`Cannot use the signing key "${values["signing-key"]}": ${(err as Error).message}`)
  )
  : undefined;
if (signing) {
  // A release signed by any other key would be refused by every client: say so now.
  const pinned = encodeBase64(
    parsePublicKey(Deno.env.get("TERMADA_RELEASE_PUBKEY") || RELEASE_PUBKEY),
  );
  if (signing.publicKey !== pinned) {
    fail(
      `The signing key's public key ${signing.publicKey} is not the pinned release key ` +
        `${pinned} (src/update/verify.ts, install.sh, or TERMADA_RELEASE_PUBKEY)`,
    );
  }
}

await Deno.mkdir(out, { recursive: true });
for (const e of Deno.readDirSync(out)) {
  if (
    /^termada-.*\.tar\.gz$/.test(e.name) ||
    [SUMS_FILE, SIG_FILE, LATEST_FILE, "install.sh"].includes(e.name)
  ) {
    await Deno.remove(join(out, e.name));
  }
}
const work = await Deno.makeTempDir({ prefix: "termada-release-" });
const hashes = new Map<string, string>();
try {
  for (const target of targets) {
    const binary = await binaryFor(target, work);
    const archive = await gzip(
      createTar([{ name: memberName(target), data: binary, mode: 0o755 }]),
    );
    const name = assetName(version, target);
    await Deno.writeFile(join(out, name), archive);
    hashes.set(name, await sha256Hex(archive));
    say(`release: ${name} (${archive.length} bytes)`);
  }
} finally {
  await Deno.remove(work, { recursive: true });
}
// The installer rides along (the one-line install URL is <base>/latest/download/install.sh).
const installer = await Deno.readFile(join(ROOT, "install.sh"));
await Deno.writeFile(join(out, "install.sh"), installer, { mode: 0o755 });
hashes.set("install.sh", await sha256Hex(installer));
const sums = enc.encode(formatSums(hashes));
await Deno.writeFile(join(out, SUMS_FILE), sums);
if (signing) await Deno.writeFile(join(out, SIG_FILE), await sign(signing.key, sums));
await Deno.writeTextFile(join(out, LATEST_FILE), JSON.stringify({ version }) + "\n");
say(
  `release: v${version} in ${out} (${SUMS_FILE}${signing ? `, ${SIG_FILE}` : ", unsigned"}, ` +
    `${LATEST_FILE}); upload as the assets of tag v${version}`,
);

/**
 * `termada update`: replaces the installed binary with a newer release, verified (SHA-256 from
 * `SHA256SUMS`, Ed25519 over it when `SHA256SUMS.sig` is published) and swapped atomically; the
 * mechanics live in src/update. This file decides whether it may run: not from source, and not
 * while the daemon has active jobs (unless --force), and reports what happened.
 */
import { ACTIVE_JOB_STATUSES } from "../wire/mod.ts";
import { TermadaError } from "../shared/mod.ts";
import {
  binaryVersion,
  compareVersions,
  currentTarget,
  DEFAULT_RELEASE_URL,
  fetchRelease,
  latestVersion,
  parseVersion,
  releaseBase,
  releaseClient,
  releasePublicKey,
  replaceBinary,
  SIG_FILE,
  UpdateError,
} from "../update/mod.ts";
import { strictArgs } from "./_args.ts";
import { call, type OperatorContext, paths } from "./operator.ts";
import { VERSION } from "./mod.ts";

const USAGE =
  `Usage: termada update [--version V] [--check] [--force] [--require-signature] [--json]
Replaces this termada binary with the latest release (or version V), after checking its SHA-256
against the release's SHA256SUMS and, when published, the Ed25519 signature SHA256SUMS.sig.
  --check              only say whether a newer version exists (downloads latest.json)
  --version V          install exactly V (also an older one)
  --force              reinstall an equal version; update even while jobs run
  --require-signature  refuse a release without SHA256SUMS.sig (or TERMADA_REQUIRE_SIGNATURE=1)
Environment (operator knobs, see docs/INSTALL.md): TERMADA_RELEASE_URL, TERMADA_CA_FILE,
TERMADA_RELEASE_PUBKEY, TERMADA_REQUIRE_SIGNATURE, TERMADA_UPDATE_TARGET.
`;

const OPTIONS = {
  version: { type: "string" as const },
  check: { type: "boolean" as const },
  force: { type: "boolean" as const },
  "require-signature": { type: "boolean" as const },
  json: { type: "boolean" as const },
  config: { type: "string" as const },
  help: { type: "boolean" as const },
};

const JOBS_LIMIT = 200;

async function say(text: string): Promise<void> {
  const bytes = new TextEncoder().encode(text);
  let off = 0;
  while (off < bytes.length) off += await Deno.stderr.write(bytes.subarray(off));
}

/** The file to replace: the running binary, or TERMADA_UPDATE_TARGET. */
function targetPath(override: string | undefined): string {
  if (override) return override;
  // A compiled binary runs its embedded modules from a virtual "deno-compile-<name>" folder.
  if (!/[/\\]deno-compile-/.test(Deno.mainModule)) {
    throw new UpdateError("FROM_SOURCE", "running from source; use git pull or install.sh");
  }
  return Deno.execPath();
}

/** Active jobs of the daemon; 0 when none runs here. */
async function activeJobs(config: string | undefined): Promise<number> {
  const p = await paths(config);
  let jobs: { status: string }[];
  try {
    jobs = (await call(p, "GET", `/jobs?limit=${JOBS_LIMIT}`)).jobs as { status: string }[];
  } catch (err) {
    const code = err instanceof TermadaError ? err.code : "";
    if (code === "SERVER_UNREACHABLE" || code === "NOT_FOUND") return 0; // no daemon runs
    throw new UpdateError(
      "BUSY",
      `Cannot ask the daemon about active jobs: ${(err as Error).message}`,
      {
        cause: err,
        hint: "termada update --force updates anyway",
      },
    );
  }
  const active = new Set<string>(ACTIVE_JOB_STATUSES);
  return jobs.filter((j) => active.has(j.status)).length;
}

export async function updateCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values } = strictArgs("update", args, OPTIONS, 0);
  if (values.help) {
    await ctx.out(USAGE);
    return 0;
  }
  const env = Deno.env.toObject();
  const wantedVersion = values.version === undefined ? undefined : parseVersion(values.version);
  const base = releaseBase(env.TERMADA_RELEASE_URL || DEFAULT_RELEASE_URL);
  const requireSignature = values["require-signature"] === true ||
    env.TERMADA_REQUIRE_SIGNATURE === "1";
  const json = values.json === true;
  const report = async (r: Record<string, unknown>, line: string) =>
    await ctx.out(json ? JSON.stringify(r, null, 2) + "\n" : line);

  let client: Deno.HttpClient | undefined;
  try {
    // --check replaces nothing: it also answers from a source checkout.
    const target = values.check
      ? env.TERMADA_UPDATE_TARGET || Deno.execPath()
      : targetPath(env.TERMADA_UPDATE_TARGET);
    const publicKey = releasePublicKey(env.TERMADA_RELEASE_PUBKEY);
    const platform = currentTarget();
    client = releaseClient(env.TERMADA_CA_FILE);
    const current = env.TERMADA_UPDATE_TARGET
      ? await binaryVersion(target).catch(() => VERSION)
      : VERSION;
    const latest = wantedVersion ?? await latestVersion({ base, client });
    const newer = compareVersions(latest, current) > 0;

    if (values.check) {
      await report(
        { current, latest, update_available: newer, target },
        newer
          ? `termada ${latest} is available (this is ${current}): termada update\n`
          : `termada ${current} is up to date (latest ${latest})\n`,
      );
      return 0;
    }
    if (wantedVersion === undefined && !newer && !values.force) {
      await report(
        { current, latest, updated: false, target },
        `termada ${current} is up to date (latest ${latest})\n`,
      );
      return 0;
    }
    if (!values.force) {
      const active = await activeJobs(values.config);
      if (active > 0) {
        throw new UpdateError(
          "BUSY",
          `The daemon has ${active} active job${active === 1 ? "" : "s"}`,
          { hint: "Wait for them (termada jobs) or run termada update --force" },
        );
      }
    }
    const started = performance.now();
    const release = await fetchRelease({
      base,
      client,
      version: latest,
      target: platform,
      publicKey,
      requireSignature,
    });
    if (release.signature === "absent") {
      await say(
        `termada update: note: release v${latest} publishes no ${SIG_FILE}; ` +
          `verified by SHA-256 only\n`,
      );
    }
    const replaced = await replaceBinary(target, release.binary, {
      check: async (path) => {
        const v = await binaryVersion(path);
        if (v !== latest) {
          throw new UpdateError(
            "BAD_BINARY",
            `The new binary says it is version ${v}, the release is ${latest}`,
          );
        }
      },
    });
    const ms = Math.round(performance.now() - started);
    await report(
      {
        updated: true,
        previous: current,
        version: latest,
        target: replaced,
        asset: release.asset,
        sha256: release.sha256,
        signature: release.signature,
        bytes: release.downloaded,
        ms,
      },
      `Updated ${replaced}: ${current} -> ${latest} (sha256 ${release.sha256.slice(0, 12)}…, ` +
        `signature ${release.signature === "verified" ? "verified" : "absent"})\n` +
        "A running daemon keeps the old version until it restarts: termada daemon stop\n",
    );
    return 0;
  } catch (err) {
    if (!(err instanceof UpdateError)) throw err;
    const kept = err.reason === "FROM_SOURCE" ? "" : "; nothing was changed";
    if (json) {
      await ctx.out(
        JSON.stringify({ updated: false, reason: err.reason, message: err.message }, null, 2) +
          "\n",
      );
    }
    await say(
      `termada update: ${err.message}${kept}\n` + (err.hint ? `  hint: ${err.hint}\n` : ""),
    );
    return 1;
  } finally {
    client?.close();
  }
}

/**
 * One verified release download: which version is latest, then the asset for a target with
 * its `SHA256SUMS` (and `SHA256SUMS.sig` when published), checked in this order — signature over
 * SHA256SUMS, the asset's line in it, the archive, the one member. Nothing is written to disk.
 */
import { download } from "./download.ts";
import { UpdateError } from "./error.ts";
import {
  assetName,
  LATEST_FILE,
  LIMITS,
  memberName,
  parseLatest,
  type ReleaseTarget,
  releaseUrl,
  SIG_FILE,
  SUMS_FILE,
} from "./release.ts";
import { extractMember, gunzip } from "./tar.ts";
import { checkSum, verifySignature } from "./verify.ts";

export interface ReleaseSource {
  /** From `releaseBase()`: HTTPS, no trailing slash. */
  base: string;
  client?: Deno.HttpClient;
}

export interface FetchOptions extends ReleaseSource {
  version: string;
  target: ReleaseTarget;
  /** The raw Ed25519 release public key. */
  publicKey: Uint8Array;
  /** Refuse a release without `SHA256SUMS.sig`. */
  requireSignature: boolean;
}

export interface FetchedRelease {
  version: string;
  asset: string;
  /** The asset's SHA-256 (hex), as listed in SHA256SUMS. */
  sha256: string;
  /** "verified": SHA256SUMS.sig checked out; "absent": none published (SHA-256 only). */
  signature: "verified" | "absent";
  /** The binary's bytes, taken out of the archive. */
  binary: Uint8Array;
  /** Bytes downloaded (asset + SHA256SUMS + signature). */
  downloaded: number;
}

/** The version `<base>/latest/download/latest.json` names. */
export async function latestVersion(source: ReleaseSource): Promise<string> {
  const bytes = await download(releaseUrl(source.base, undefined, LATEST_FILE), {
    maxBytes: LIMITS.latest,
    client: source.client,
    timeoutMs: 30_000,
  });
  return parseLatest(new TextDecoder().decode(bytes));
}

export async function fetchRelease(options: FetchOptions): Promise<FetchedRelease> {
  const { base, client, version, target } = options;
  const url = (file: string) => releaseUrl(base, version, file);
  const sums = await download(url(SUMS_FILE), { maxBytes: LIMITS.sums, client, timeoutMs: 30_000 });
  const sig = await download(url(SIG_FILE), {
    maxBytes: LIMITS.sig,
    client,
    timeoutMs: 30_000,
    optional: true,
  });
  if (sig === undefined && options.requireSignature) {
    throw new UpdateError(
      "SIGNATURE_REQUIRED",
      `Release v${version} has no ${SIG_FILE} and a signature is required`,
    );
  }
  if (sig !== undefined && !(await verifySignature(options.publicKey, sums, sig))) {
    throw new UpdateError(
      "BAD_SIGNATURE",
      `The signature ${SIG_FILE} of release v${version} does not verify with the release key`,
    );
  }
  const asset = assetName(version, target);
  const archive = await download(url(asset), { maxBytes: LIMITS.asset, client });
  const sha256 = await checkSum(new TextDecoder().decode(sums), asset, archive);
  const tar = await gunzip(archive, LIMITS.member + 1024 * 1024);
  const binary = extractMember(tar, memberName(target), LIMITS.member);
  return {
    version,
    asset,
    sha256,
    signature: sig === undefined ? "absent" : "verified",
    binary,
    downloaded: sums.length + (sig?.length ?? 0) + archive.length,
  };
}

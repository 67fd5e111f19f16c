/**
 * Release assets and self-update: the layout of a release (targets, asset names, `SHA256SUMS`,
 * `SHA256SUMS.sig`, `latest.json` — the same one install.sh reads), bounded HTTPS downloads,
 * SHA-256 and Ed25519 checks against the pinned release key, a strict gzip+ustar reader that
 * takes out exactly one member, and the atomic swap of the installed binary. It does not decide
 * when an update may run (src/cli/update.ts asks the daemon about active jobs) and it does not
 * build binaries (scripts/release.ts packages `deno compile` outputs with these same helpers).
 */
export { UpdateError, type UpdateReason } from "./error.ts";
export {
  assetName,
  compareVersions,
  currentTarget,
  DEFAULT_RELEASE_URL,
  formatSums,
  isVersion,
  LATEST_FILE,
  LIMITS,
  memberName,
  parseLatest,
  parseSums,
  parseVersion,
  releaseBase,
  type ReleaseTarget,
  releaseUrl,
  SIG_FILE,
  SUMS_FILE,
  targetOf,
  TARGETS,
} from "./release.ts";
export { download, type DownloadOptions, releaseClient } from "./download.ts";
export {
  checkSum,
  importSigningKey,
  parsePublicKey,
  RELEASE_PUBKEY,
  releasePublicKey,
  sha256Hex,
  sign,
  verifySignature,
} from "./verify.ts";
export { createTar, extractMember, gunzip, gzip, type TarInput } from "./tar.ts";
export { binaryVersion, replaceBinary, type ReplaceOptions } from "./replace.ts";
export {
  type FetchedRelease,
  type FetchOptions,
  fetchRelease,
  latestVersion,
  type ReleaseSource,
} from "./fetch_release.ts";

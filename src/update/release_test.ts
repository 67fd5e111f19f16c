import assert from "node:assert/strict";
import {
  assetName,
  compareVersions,
  currentTarget,
  formatSums,
  memberName,
  parseLatest,
  parseSums,
  parseVersion,
  releaseBase,
  releaseUrl,
  targetOf,
  TARGETS,
} from "./release.ts";

const H1 = "a".repeat(64);
const H2 = "0123456789abcdef".repeat(4);

Deno.test("every Deno compile target maps to one release target and back", () => {
  assert.equal(targetOf("x86_64-unknown-linux-gnu"), "linux-x64");
  assert.equal(targetOf("aarch64-unknown-linux-gnu"), "linux-arm64");
  assert.equal(targetOf("x86_64-apple-darwin"), "darwin-x64");
  assert.equal(targetOf("aarch64-apple-darwin"), "darwin-arm64");
  assert.equal(targetOf("x86_64-pc-windows-msvc"), "windows-x64");
  assert.equal(targetOf("riscv64gc-unknown-linux-gnu"), undefined);
  assert.equal(new Set(Object.values(TARGETS)).size, Object.keys(TARGETS).length);
  assert.ok(Object.hasOwn(TARGETS, currentTarget()));
  assert.throws(() => currentTarget("x86_64-unknown-freebsd"), /No Termada release is built/);
});

Deno.test("asset and member names follow the release layout", () => {
  assert.equal(assetName("1.2.3", "linux-x64"), "termada-1.2.3-linux-x64.tar.gz");
  assert.equal(memberName("linux-arm64"), "termada");
  assert.equal(memberName("windows-x64"), "termada.exe");
  const base = releaseBase("https://example.test/r/releases/");
  assert.equal(base, "https://example.test/r/releases");
  assert.equal(releaseUrl(base, "1.2.3", "SHA256SUMS"), `${base}/download/v1.2.3/SHA256SUMS`);
  assert.equal(releaseUrl(base, undefined, "latest.json"), `${base}/latest/download/latest.json`);
});

Deno.test("the release base must be an HTTPS URL", () => {
  assert.throws(() => releaseBase("http://127.0.0.1:8080/r"), /is not HTTPS/);
  assert.throws(() => releaseBase("not a url"), /is not a URL/);
});

Deno.test("SHA256SUMS parses sha256sum's text and binary lines", () => {
  const sums = parseSums(`${H1}  termada-1.0.0-linux-x64.tar.gz\n${H2.toUpperCase()} *b.tar.gz\n`);
  assert.equal(sums.get("termada-1.0.0-linux-x64.tar.gz"), H1);
  assert.equal(sums.get("b.tar.gz"), H2);
  assert.equal(sums.size, 2);
  assert.equal(parseSums("").size, 0);
  assert.equal(parseSums(formatSums(sums)).get("b.tar.gz"), H2);
  assert.equal(formatSums(new Map([["b", H2], ["a", H1]])), `${H1}  a\n${H2}  b\n`);
});

Deno.test("SHA256SUMS refuses malformed lines and a name listed twice", async (t) => {
  await t.step("a short hash", () => assert.throws(() => parseSums(`abc  x\n`), /line 1/));
  await t.step("a path", () => assert.throws(() => parseSums(`${H1}  ../x\n`), /malformed/));
  await t.step("one space", () => assert.throws(() => parseSums(`${H1} x\n`), /malformed/));
  await t.step("a blank line", () => assert.throws(() => parseSums(`${H1}  x\n\n`), /line 2/));
  await t.step("twice", () => {
    assert.throws(() => parseSums(`${H1}  x\n${H2}  x\n`), /"x" more than once/);
  });
});

Deno.test("versions parse, compare and come from latest.json", () => {
  assert.equal(parseVersion("v1.2.3"), "1.2.3");
  assert.equal(parseVersion("1.2.3-rc.1"), "1.2.3-rc.1");
  assert.throws(() => parseVersion("1.2"), /is not a version/);
  assert.throws(() => parseVersion("1.2.3; rm -rf /"), /is not a version/);
  assert.equal(compareVersions("1.2.3", "1.2.3"), 0);
  assert.equal(compareVersions("1.10.0", "1.9.9"), 1);
  assert.equal(compareVersions("0.1.0", "9.9.9"), -1);
  assert.equal(compareVersions("1.2.3-rc.1", "1.2.3"), -1);
  assert.equal(compareVersions("1.2.3", "1.2.3-rc.2"), 1);
  assert.equal(parseLatest('{"version":"v2.0.1"}'), "2.0.1");
  assert.throws(() => parseLatest("2.0.1"), /does not name a version/);
  assert.throws(() => parseLatest('{"version":"latest"}'), /does not name a version/);
});

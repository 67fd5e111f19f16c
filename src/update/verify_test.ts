import assert from "node:assert/strict";
import { encodeBase64 } from "../shared/mod.ts";
import {
  checkSum,
  importSigningKey,
  parsePublicKey,
  RELEASE_PUBKEY,
  releasePublicKey,
  sha256Hex,
  sign,
  verifySignature,
} from "./verify.ts";

const enc = new TextEncoder();

async function keyPair(): Promise<{ pem: string; spki: string }> {
  const k = await crypto.subtle.generateKey({ name: "Ed25519" }, true, [
    "sign",
    "verify",
  ]) as CryptoKeyPair;
  const pem = (label: string, der: ArrayBuffer) =>
    `-----BEGIN ${label}-----\n${encodeBase64(new Uint8Array(der))}\n-----END ${label}-----\n`;
  return {
    pem: pem("PRIVATE KEY", await crypto.subtle.exportKey("pkcs8", k.privateKey)),
    spki: pem("PUBLIC KEY", await crypto.subtle.exportKey("spki", k.publicKey)),
  };
}

Deno.test("a SHA256SUMS signature verifies with the key as raw base64 or SPKI PEM", async () => {
  const { pem, spki } = await keyPair();
  const { key, publicKey } = await importSigningKey(pem);
  const data = enc.encode(`${"a".repeat(64)}  termada-1.0.0-linux-x64.tar.gz\n`);
  const sig = await sign(key, data);
  assert.equal(sig.length, 64);
  assert.deepEqual(parsePublicKey(spki), parsePublicKey(publicKey));
  assert.equal(await verifySignature(parsePublicKey(publicKey), data, sig), true);
  assert.equal(await verifySignature(parsePublicKey(spki), data, sig), true);
  const tampered = data.slice();
  tampered[0] = "b".charCodeAt(0);
  assert.equal(await verifySignature(parsePublicKey(spki), tampered, sig), false);
  assert.equal(await verifySignature(parsePublicKey(spki), data, sig.subarray(0, 63)), false);
  const other = await importSigningKey((await keyPair()).pem);
  assert.equal(await verifySignature(parsePublicKey(other.publicKey), data, sig), false);
});

Deno.test("the release key is pinned, the override replaces it, junk is refused", () => {
  assert.equal(parsePublicKey(RELEASE_PUBKEY).length, 32);
  assert.deepEqual(releasePublicKey(undefined), parsePublicKey(RELEASE_PUBKEY));
  assert.deepEqual(releasePublicKey(""), parsePublicKey(RELEASE_PUBKEY));
  const other = encodeBase64(new Uint8Array(32).fill(7));
  assert.deepEqual(releasePublicKey(other), new Uint8Array(32).fill(7));
  assert.throws(() => parsePublicKey("AAAA"), /not an Ed25519 key/);
  assert.throws(() => parsePublicKey("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"));
});

Deno.test("install.sh pins the same release key as src/update", async () => {
  const sh = await Deno.readTextFile(new URL("../../install.sh", import.meta.url));
  assert.equal(/^PINNED_PUBKEY='([^']+)'$/m.exec(sh)?.[1], RELEASE_PUBKEY);
});

Deno.test("checkSum accepts the listed hash and names what differs", async () => {
  const bytes = enc.encode("archive");
  const hash = await sha256Hex(bytes);
  assert.equal(hash, "0eb3e36bfb24dcd9bb1d1bece1531216b59539a8fde17ee80224af0653c92aa3");
  assert.equal(await checkSum(`${hash}  a.tar.gz\n`, "a.tar.gz", bytes), hash);
  await assert.rejects(
    checkSum(`${hash}  b.tar.gz\n`, "a.tar.gz", bytes),
    /does not list "a.tar.gz"/,
  );
  await assert.rejects(
    checkSum(`${"0".repeat(64)}  a.tar.gz\n`, "a.tar.gz", bytes),
    /SHA-256 of "a.tar.gz" is [0-9a-f]{64}, SHA256SUMS says 0{64}/,
  );
  await assert.rejects(
    checkSum(`${hash}  a.tar.gz\n${hash}  a.tar.gz\n`, "a.tar.gz", bytes),
    /more than once/,
  );
});

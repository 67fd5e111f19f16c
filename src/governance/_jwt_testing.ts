/**
 * Test helpers for JWT trust: mint key pairs and tokens with jose, write a pinned JWKS file.
 * For tests only (beside code and in `tests/`); nothing in the daemon imports this.
 */
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import { randomHex } from "../shared/mod.ts";
import type { JwtAlgorithm } from "./jwt.ts";

/** A fresh signing key and its public JWK (with a random `kid` and `alg`). */
export interface MintedKeys {
  privateKey: CryptoKey;
  publicJwk: JsonWebKey & { kid: string; alg: JwtAlgorithm };
}

/** A new key pair for `alg` (RSA: 2048 bits). */
export async function mintKeys(alg: JwtAlgorithm): Promise<MintedKeys> {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(publicKey);
  return {
    privateKey,
    publicJwk: { ...(jwk as JsonWebKey), kid: `k_${randomHex(6)}`, alg },
  };
}

export interface MintOptions {
  /** Extra protected-header members (e.g. `typ`), merged over `{alg, kid}`. */
  header?: Record<string, unknown>;
}

/** A compact JWT of `claims` signed by `privateKey`; `kid` undefined leaves it out. */
export async function mint(
  privateKey: CryptoKey | Uint8Array,
  alg: string,
  kid: string | undefined,
  claims: JWTPayload,
  opts: MintOptions = {},
): Promise<string> {
  const header = { alg, ...(kid === undefined ? {} : { kid }), ...opts.header };
  return await new SignJWT(claims).setProtectedHeader(header).sign(privateKey);
}

/** Writes `{"keys": jwks}` to `path`. */
export async function writeJwks(path: string, jwks: readonly unknown[]): Promise<void> {
  await Deno.writeTextFile(path, JSON.stringify({ keys: jwks }));
}

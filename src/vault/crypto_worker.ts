/**
 * The Web Worker that does all age encryption and decryption, so scrypt (≈1.4 s at work factor
 * 18, synchronous in age-encryption) never blocks the daemon's thread. Started and ended only by
 * `CryptoWorker` in crypto.ts; speaks the `CryptoRequest`/`CryptoReply` protocol below. Buffers
 * are transferred, never copied; plaintext handed in for encryption is zero-filled after use.
 */
import { Decrypter, Encrypter } from "age-encryption";

export type CryptoRequest =
  | {
    id: number;
    op: "decrypt";
    /** A binary (not armored) age file. */
    data: Uint8Array;
    key: { passphrase: string } | { identity: string };
  }
  | {
    id: number;
    op: "encrypt";
    /** Plaintext; zero-filled by the worker once encrypted. */
    data: Uint8Array;
    to: { passphrase: string; workFactor: number } | { recipient: string };
  };

export type CryptoReply =
  | { id: number; ok: true; data: Uint8Array }
  | { id: number; ok: false; reason: "bad_key" | "corrupt" | "internal"; message: string };

/** age-encryption's message when no passphrase/identity unwraps the file key. */
const NO_MATCH = "no identity matched any of the file's recipients";

async function handle(req: CryptoRequest): Promise<CryptoReply> {
  if (req.op === "encrypt") {
    try {
      const enc = new Encrypter();
      if ("passphrase" in req.to) {
        enc.setPassphrase(req.to.passphrase);
        enc.setScryptWorkFactor(req.to.workFactor);
      } else {
        enc.addRecipient(req.to.recipient);
      }
      return { id: req.id, ok: true, data: await enc.encrypt(req.data) };
    } catch (err) {
      return { id: req.id, ok: false, reason: "internal", message: messageOf(err) };
    } finally {
      req.data.fill(0);
    }
  }
  try {
    const dec = new Decrypter();
    if ("passphrase" in req.key) dec.addPassphrase(req.key.passphrase);
    else dec.addIdentity(req.key.identity);
    return { id: req.id, ok: true, data: await dec.decrypt(req.data) };
  } catch (err) {
    const message = messageOf(err);
    return { id: req.id, ok: false, reason: message === NO_MATCH ? "bad_key" : "corrupt", message };
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

const scope = self as unknown as {
  onmessage: ((ev: MessageEvent<CryptoRequest>) => void) | null;
  postMessage(msg: CryptoReply, transfer: Transferable[]): void;
};

scope.onmessage = (ev) => {
  handle(ev.data).then((reply) => {
    scope.postMessage(reply, reply.ok ? [reply.data.buffer as ArrayBuffer] : []);
  });
};

/**
 * The caller's side of the crypto worker: one lazily started Web Worker, a bounded queue of
 * requests (each with a deadline), and `close()` that ends it. The owner (VaultFile) must close.
 */
import { TermadaError } from "../shared/mod.ts";
import type { CryptoReply, CryptoRequest } from "./crypto_worker.ts";
import { VaultError } from "./errors.ts";

export const CRYPTO_LIMITS = Object.freeze({
  /** Requests sent to the worker and not yet answered. */
  queued: 16,
  /** From sending a request to its answer (scrypt at factor 18 takes ~1.4 s). */
  timeoutMs: 30_000,
});

export interface CryptoWorkerOptions {
  /** Defaults to `CRYPTO_LIMITS.queued`. */
  maxQueued?: number;
  /** Defaults to `CRYPTO_LIMITS.timeoutMs`. */
  timeoutMs?: number;
}

export type DecryptResult =
  | { ok: true; plaintext: Uint8Array }
  | { ok: false; reason: "bad_key" | "corrupt" | "internal"; message: string };

type EncryptTo = { passphrase: string; workFactor: number } | { recipient: string };
type DecryptKey = { passphrase: string } | { identity: string };

interface Pending {
  resolve(reply: CryptoReply): void;
  reject(err: Error): void;
  timer: ReturnType<typeof setTimeout>;
}

export class CryptoWorker {
  #worker: Worker | undefined;
  #pending = new Map<number, Pending>();
  #nextId = 1;
  #maxQueued: number;
  #timeoutMs: number;

  constructor(opts: CryptoWorkerOptions = {}) {
    this.#maxQueued = opts.maxQueued ?? CRYPTO_LIMITS.queued;
    this.#timeoutMs = opts.timeoutMs ?? CRYPTO_LIMITS.timeoutMs;
  }

  /** Whether a worker is running now. */
  get running(): boolean {
    return this.#worker !== undefined;
  }

  /** Encrypts to binary age. `plaintext` is transferred to the worker (and zero-filled there). */
  async encrypt(plaintext: Uint8Array, to: EncryptTo): Promise<Uint8Array> {
    const reply = await this.#request({ id: 0, op: "encrypt", data: plaintext, to }, [
      plaintext.buffer as ArrayBuffer,
    ]);
    if (reply.ok) return reply.data;
    throw new TermadaError("INTERNAL", `Cannot encrypt the vault: ${reply.message}`);
  }

  /** Decrypts binary age; key and format failures come back as a result, not thrown. */
  async decrypt(age: Uint8Array, key: DecryptKey): Promise<DecryptResult> {
    const reply = await this.#request({ id: 0, op: "decrypt", data: age, key }, []);
    if (reply.ok) return { ok: true, plaintext: reply.data };
    return { ok: false, reason: reply.reason, message: reply.message };
  }

  /** Ends the worker; pending requests fail. Idempotent; a later request starts a new one. */
  close(): Promise<void> {
    this.#stop(new TermadaError("INTERNAL", "The vault was closed while encrypting"));
    return Promise.resolve();
  }

  #request(req: CryptoRequest, transfer: Transferable[]): Promise<CryptoReply> {
    if (this.#pending.size >= this.#maxQueued) {
      return Promise.reject(
        new VaultError(
          "VAULT_BUSY",
          `Cannot queue vault work: ${this.#pending.size} requests are already waiting`,
          { hint: "Retry in a few seconds" },
        ),
      );
    }
    const worker = this.#start();
    const id = this.#nextId++;
    req.id = id;
    return new Promise<CryptoReply>((resolve, reject) => {
      const timer = setTimeout(() => {
        // The worker is single-threaded: whatever is stuck blocks everything queued behind it.
        this.#stop(
          new VaultError(
            "VAULT_BUSY",
            `Vault encryption did not answer within ${this.#timeoutMs} ms`,
            { hint: "Retry; if it keeps happening the machine is overloaded" },
          ),
        );
      }, this.#timeoutMs);
      this.#pending.set(id, { resolve, reject, timer });
      worker.postMessage(req, transfer);
    });
  }

  #start(): Worker {
    if (this.#worker) return this.#worker;
    const worker = new Worker(new URL("./crypto_worker.ts", import.meta.url).href, {
      type: "module",
    });
    worker.onmessage = (ev: MessageEvent<CryptoReply>) => {
      const p = this.#pending.get(ev.data.id);
      if (!p) return; // answered after a timeout already failed it
      this.#pending.delete(ev.data.id);
      clearTimeout(p.timer);
      p.resolve(ev.data);
    };
    worker.onerror = (ev: ErrorEvent) => {
      ev.preventDefault();
      this.#stop(new TermadaError("INTERNAL", `The vault crypto worker failed: ${ev.message}`));
    };
    worker.onmessageerror = () => {
      this.#stop(new TermadaError("INTERNAL", "The vault crypto worker sent an unreadable reply"));
    };
    this.#worker = worker;
    return worker;
  }

  #stop(reason: Error): void {
    this.#worker?.terminate();
    this.#worker = undefined;
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pending) {
      clearTimeout(p.timer);
      p.reject(reason);
    }
  }
}

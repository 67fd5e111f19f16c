/**
 * Test helper: a real OpenSSH `sshd` (Debian's openssh-server) on 127.0.0.1 and a free port,
 * with its own generated host key, an authorized client key and its own config — nothing of
 * the machine's own sshd is used. Stop it with `close()` (by PID).
 */
import { join } from "node:path";

export const SSHD_BIN = "/usr/sbin/sshd";

export function sshdAvailable(): boolean {
  try {
    return Deno.statSync(SSHD_BIN).isFile;
  } catch {
    return false;
  }
}

export interface SshdOptions {
  /** Directory holding keys and config (a fresh temp dir when absent). */
  dir?: string;
  /** Client keys that may log in (public key lines); a generated key is added always. */
  extraAuthorized?: string[];
  /** Reuse this host key (path of a private key) instead of generating one. */
  hostKey?: string;
}

export class TestSshd implements AsyncDisposable {
  readonly dir: string;
  readonly port: number;
  readonly user: string;
  /** Private key (OpenSSH format, unencrypted) the server accepts. */
  readonly clientKey: string;
  readonly clientKeyPath: string;
  readonly hostKeyPath: string;
  #proc: Deno.ChildProcess | undefined;
  #stderr = "";

  private constructor(dir: string, port: number, user: string, clientKeyPath: string) {
    this.dir = dir;
    this.port = port;
    this.user = user;
    this.clientKeyPath = clientKeyPath;
    this.clientKey = Deno.readTextFileSync(clientKeyPath);
    this.hostKeyPath = join(dir, "host_ed25519");
  }

  static async start(options: SshdOptions = {}): Promise<TestSshd> {
    const dir = options.dir ?? Deno.makeTempDirSync({ prefix: "termada-sshd-" });
    const user = whoami();
    const hostKey = join(dir, "host_ed25519");
    if (options.hostKey) Deno.copyFileSync(options.hostKey, hostKey);
    else if (!exists(hostKey)) await keygen(hostKey);
    Deno.chmodSync(hostKey, 0o600);
    const clientKey = join(dir, "client_ed25519");
    if (!exists(clientKey)) await keygen(clientKey);
    const authorized = [
      Deno.readTextFileSync(`${clientKey}.pub`).trim(),
      ...(options.extraAuthorized ?? []),
    ];
    Deno.writeTextFileSync(join(dir, "authorized_keys"), authorized.join("\n") + "\n", {
      mode: 0o600,
    });
    if (Deno.uid() === 0) Deno.mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
    const s = new TestSshd(dir, freePort(), user, clientKey);
    await s.#spawn();
    return s;
  }

  /** ssh2 connect options for this server (the generated client key). */
  get connectOptions(): { host: string; port: number; username: string; privateKey: string } {
    return { host: "127.0.0.1", port: this.port, username: this.user, privateKey: this.clientKey };
  }

  /** The host key line as a known_hosts entry would hold it (`[127.0.0.1]:port type key`). */
  get hostKeyLine(): string {
    const pub = Deno.readTextFileSync(`${this.hostKeyPath}.pub`).trim().split(/\s+/);
    return `[127.0.0.1]:${this.port} ${pub[0]} ${pub[1]}`;
  }

  async #spawn(): Promise<void> {
    const cfg = join(this.dir, "sshd_config");
    Deno.writeTextFileSync(
      cfg,
      [
        `Port ${this.port}`,
        "ListenAddress 127.0.0.1",
        `HostKey ${this.hostKeyPath}`,
        `AuthorizedKeysFile ${join(this.dir, "authorized_keys")}`,
        `PidFile ${join(this.dir, "sshd.pid")}`,
        "UsePAM no",
        "StrictModes no",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PubkeyAuthentication yes",
        "PermitRootLogin yes",
        "AllowTcpForwarding yes",
        "PermitUserEnvironment no",
        "Subsystem sftp internal-sftp",
        "LogLevel ERROR",
        "MaxStartups 100",
        "MaxSessions 100",
        "ClientAliveInterval 0",
        "",
      ].join("\n"),
    );
    this.#proc = new Deno.Command(SSHD_BIN, {
      args: ["-D", "-e", "-f", cfg],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    this.#drain(this.#proc.stderr);
    // Ready when the port accepts.
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      try {
        const c = await Deno.connect({ hostname: "127.0.0.1", port: this.port });
        c.close();
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 25));
      }
    }
    throw new Error(`sshd did not start on ${this.port}: ${this.#stderr}`);
  }

  async #drain(stream: ReadableStream<Uint8Array>): Promise<void> {
    const dec = new TextDecoder();
    for await (const c of stream) {
      if (this.#stderr.length < 64 * 1024) this.#stderr += dec.decode(c);
    }
  }

  /** What sshd logged (errors only). */
  get log(): string {
    return this.#stderr;
  }

  /** Kills every connection (the per-connection sshd processes); the listener keeps running. */
  async dropConnections(): Promise<number> {
    const pid = this.#proc?.pid;
    if (pid === undefined) return 0;
    const out = await new Deno.Command("pkill", { args: ["-KILL", "-P", String(pid)] }).output();
    return out.code === 0 ? 1 : 0;
  }

  /** Stops the server (its connections end too). */
  async stop(): Promise<void> {
    const p = this.#proc;
    if (!p) return;
    this.#proc = undefined;
    await this.dropConnections();
    try {
      p.kill("SIGTERM");
    } catch {
      // already gone
    }
    await p.status;
  }

  /** Starts it again on the same port with the same keys (after `stop`). */
  async restart(): Promise<void> {
    await this.stop();
    await this.#spawn();
  }

  async close(): Promise<void> {
    await this.stop();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
    try {
      Deno.removeSync(this.dir, { recursive: true });
    } catch {
      // already gone
    }
  }
}

/**
 * A fresh HOME for a daemon whose `~/.ssh/id_ed25519` is the key `sshd` accepts (the default-key
 * path of src/remote/auth.ts). The caller removes it.
 */
export function clientHome(sshd: TestSshd, prefix = "termada-sshhome-"): string {
  const home = Deno.makeTempDirSync({ prefix });
  Deno.mkdirSync(`${home}/.ssh`, { mode: 0o700 });
  Deno.writeTextFileSync(`${home}/.ssh/id_ed25519`, sshd.clientKey, { mode: 0o600 });
  return home;
}

/** A port nothing listens on right now (bound then released). */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

async function keygen(path: string): Promise<void> {
  const out = await new Deno.Command("ssh-keygen", {
    args: ["-q", "-t", "ed25519", "-N", "", "-C", "termada-test", "-f", path],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (out.code !== 0) throw new Error(`ssh-keygen: ${new TextDecoder().decode(out.stderr)}`);
}

function exists(p: string): boolean {
  try {
    Deno.statSync(p);
    return true;
  } catch {
    return false;
  }
}

function whoami(): string {
  const out = new Deno.Command("id", { args: ["-un"], stdout: "piped" }).outputSync();
  return new TextDecoder().decode(out.stdout).trim();
}

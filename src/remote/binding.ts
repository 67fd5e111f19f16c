/**
 * A server as a session, fleet run, forward or file call uses it: the inventory entry copied
 * when the call is admitted (pinned), so editing the inventory never redirects work that is
 * running or was approved.
 */
export interface ServerBinding {
  /** The inventory name (what agents and operators call it). */
  readonly name: string;
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly tags: readonly string[];
  /** A vault entry naming the credential; absent: ssh-agent, then ~/.ssh default keys. */
  readonly auth?: string;
  /** A pinned host key (`ssh-ed25519 AAAA…` or `SHA256:…`); absent: trust on first use. */
  readonly hostKey?: string;
}

/** Same server, same credentials, same trust: connections may be shared between these. */
export function bindingKey(b: ServerBinding): string {
  return JSON.stringify([b.name, b.host, b.port, b.user, b.auth ?? null, b.hostKey ?? null]);
}

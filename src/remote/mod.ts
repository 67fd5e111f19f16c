/**
 * Remote servers (SSH, with ssh2 and its pure-JS crypto): the inventory of servers by name,
 * trust on first use of host keys (`<state>/known_hosts`), credentials (ssh-agent, default
 * keys; the vault later), shared connections, terminals for sessions on a server, fleet runs,
 * port forwards and remote files over SFTP. Mechanics only: what may happen is decided by
 * src/control's gateway before any of this is called.
 */
export { bindingKey, type ServerBinding } from "./binding.ts";
export {
  Inventory,
  type InventoryEntry,
  MAX_SERVERS,
  type ServerStatus,
  writeAtomic,
} from "./inventory.ts";
export { credentials, type CredentialSource, DEFAULT_KEY_FILES } from "./auth.ts";
export { fingerprint, type HostKeyEvent, keyType, KnownHosts } from "./known_hosts.ts";
export { POOL_LIMITS, type PoolOptions, type SshLease, SshPool } from "./pool.ts";
export { RemoteTerm } from "./term.ts";
export { remoteLauncher, type RemoteSessionOptions, run, shellCommand } from "./sessions.ts";
export {
  FILE_LIMITS,
  type FileBackend,
  type FileRead,
  type FileWritten,
  localFiles,
  sftpFiles,
  sftpHome,
} from "./files.ts";
export type { ClientChannel, SFTPWrapper, SshClient } from "./ssh2.ts";
export {
  FLEET_LIMITS,
  fleetCommandLine,
  FleetLimiter,
  type FleetTargetResult,
  runFleet,
} from "./fleet.ts";
export { FORWARD_LIMITS, type ForwardInfo, Forwards, type PendingForward } from "./forward.ts";
export { canonicalHost, isLoopbackHost } from "./hosts.ts";

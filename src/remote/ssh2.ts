/**
 * The one import of the `ssh2` package (pure-JS crypto under Deno; its optional native addon is
 * never built or loaded), with the part of its API Termada uses, typed here. (`@types/ssh2`
 * pulls an old `@types/node` that replaces Deno's own Node types — `node:sqlite` disappears —
 * so it is not used.) Everything else imports ssh2 from here. It is loaded on first use
 * ({@link loadSsh2}): a daemon with no servers never pays its ~110 ms of module loading at start.
 */
import type { EventEmitter } from "node:events";
import type { Buffer } from "node:buffer";
import type { Duplex, Readable } from "node:stream";

type Buf = Uint8Array;
/** An SFTP file handle (opaque bytes from the server). */
type Handle = Buffer;
/** SFTP attributes set on open, setstat and fsetstat. */
export interface SftpAttrs {
  mode?: number;
  uid?: number;
  gid?: number;
  atime?: number;
  mtime?: number;
}
type Cb<T = void> = (err: Error | undefined | null, value: T) => void;

export interface PublicKeyAuthMethod {
  type: "publickey";
  username: string;
  key: string | Buf;
  passphrase?: string;
}
export interface AgentAuthMethod {
  type: "agent";
  username: string;
  agent: string;
}
export interface PasswordAuthMethod {
  type: "password";
  username: string;
  password: string;
}
export type AuthMethod = PublicKeyAuthMethod | AgentAuthMethod | PasswordAuthMethod;

export interface ConnectConfig {
  host?: string;
  port?: number;
  username?: string;
  privateKey?: string | Buf;
  agent?: string;
  readyTimeout?: number;
  keepaliveInterval?: number;
  keepaliveCountMax?: number;
  authHandler?: AuthMethod[];
  /**
   * Must return nothing and answer through `verify`: ssh2 takes any other return value (a
   * promise too) as the answer itself.
   */
  hostVerifier?: (key: Buf, verify: (ok: boolean) => void) => void;
}

export interface PseudoTtyOptions {
  term?: string;
  rows?: number;
  cols?: number;
  width?: number;
  height?: number;
}

/** A session or forwarding channel: a Node Duplex with SSH extras. */
export interface ClientChannel extends Duplex {
  readonly stderr: Readable;
  signal(name: string): boolean;
  setWindow(rows: number, cols: number, height: number, width: number): boolean;
  close(): void;
}

export interface Stats {
  mode: number;
  size: number;
  uid: number;
  gid: number;
  atime: number;
  mtime: number;
  isFile(): boolean;
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
  isFIFO(): boolean;
  isSocket(): boolean;
  isBlockDevice(): boolean;
  isCharacterDevice(): boolean;
}

export interface SFTPWrapper extends EventEmitter {
  open(
    path: string,
    flags: string | number,
    attrs: number | SftpAttrs,
    cb: (err: Error | undefined | null, handle?: Handle) => void,
  ): boolean;
  open(
    path: string,
    flags: string | number,
    cb: (err: Error | undefined | null, handle?: Handle) => void,
  ): boolean;
  close(handle: Handle, cb: (err?: Error | null) => void): boolean;
  readlink(path: string, cb: Cb<string>): boolean;
  fsetstat(handle: Handle, attrs: SftpAttrs, cb: (err?: Error | null) => void): boolean;
  setstat(path: string, attrs: SftpAttrs, cb: (err?: Error | null) => void): boolean;
  read(
    handle: Handle,
    buffer: Buf,
    offset: number,
    length: number,
    position: number,
    cb: (err: Error | undefined | null, bytesRead: number, buffer: Buf, position: number) => void,
  ): boolean;
  write(
    handle: Handle,
    buffer: Buf,
    offset: number,
    length: number,
    position: number,
    cb: (err?: Error | null) => void,
  ): boolean;
  fstat(handle: Handle, cb: Cb<Stats>): boolean;
  stat(path: string, cb: Cb<Stats>): boolean;
  lstat(path: string, cb: Cb<Stats>): boolean;
  fchmod(handle: Handle, mode: number | string, cb: (err?: Error | null) => void): boolean;
  chmod(path: string, mode: number | string, cb: (err?: Error | null) => void): boolean;
  unlink(path: string, cb: (err?: Error | null) => void): boolean;
  rename(from: string, to: string, cb: (err?: Error | null) => void): boolean;
  mkdir(path: string, attrs: { mode?: number }, cb: (err?: Error | null) => void): boolean;
  realpath(path: string, cb: Cb<string>): boolean;
  /** posix-rename@openssh.com: an atomic rename over an existing file. */
  ext_openssh_rename(from: string, to: string, cb: (err?: Error | null) => void): boolean;
  /** fsync@openssh.com. */
  ext_openssh_fsync(handle: Handle, cb: (err?: Error | null) => void): boolean;
  end(): void;
}

export interface SshClient extends EventEmitter {
  connect(config: ConnectConfig): this;
  exec(command: string, cb: Cb<ClientChannel>): this;
  exec(
    command: string,
    options: { pty?: PseudoTtyOptions | boolean; env?: Record<string, string> },
    cb: Cb<ClientChannel>,
  ): this;
  sftp(cb: Cb<SFTPWrapper>): this;
  forwardOut(
    srcIP: string,
    srcPort: number,
    dstIP: string,
    dstPort: number,
    cb: Cb<ClientChannel>,
  ): this;
  /** TCP_NODELAY on the socket: without it each keystroke-sized write waits for delayed ACKs. */
  setNoDelay(noDelay?: boolean): this;
  end(): this;
  destroy(): this;
}

interface Ssh2Module {
  Client: new () => SshClient;
  utils: { parseKey(data: string | Buf, passphrase?: string): unknown };
}

let loading: Promise<{ Client: new () => SshClient; sshUtils: Ssh2Module["utils"] }> | undefined;

/** The ssh2 package's client class and key utilities, imported once, on first use. */
export function loadSsh2(): Promise<
  { Client: new () => SshClient; sshUtils: Ssh2Module["utils"] }
> {
  return loading ??= import("ssh2").then((m) => {
    const mod = (m.default ?? m) as unknown as Ssh2Module;
    return { Client: mod.Client, sshUtils: mod.utils };
  });
}

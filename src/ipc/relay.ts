import { LINUX, openLibc } from "../../ffi/mod.ts";

const encoder = new TextEncoder();
/** Bytes moved per read. */
const CHUNK = 64 * 1024;

function errno(libc: ReturnType<typeof openLibc>): number {
  const p = libc.__errno_location();
  return p === null ? 0 : new Deno.UnsafePointerView(p).getInt32();
}

/** A connected stream socket to `path`, or undefined when nothing listens there. */
export function connectUnix(path: string): number | undefined {
  const libc = openLibc();
  const bytes = encoder.encode(path);
  if (bytes.length >= LINUX.SIZEOF_SOCKADDR_UN - 2) {
    throw new RangeError(`Socket path "${path}" is too long`);
  }
  const fd = libc.socket(LINUX.AF_UNIX, LINUX.SOCK_STREAM | LINUX.SOCK_CLOEXEC, 0);
  if (fd < 0) throw new Error(`socket() failed (errno ${errno(libc)})`);
  const addr = new Uint8Array(LINUX.SIZEOF_SOCKADDR_UN);
  new DataView(addr.buffer).setUint16(0, LINUX.AF_UNIX, true);
  addr.set(bytes, 2);
  if (libc.connect(fd, addr, LINUX.SIZEOF_SOCKADDR_UN) !== 0) {
    libc.close(fd);
    return undefined;
  }
  return fd;
}

/** Why the relay ended: the client closed stdin (and the daemon then closed), or the daemon went. */
export type RelayEnd = "client" | "daemon";

/**
 * Sends `first` to the socket, then relays stdin → socket and socket → stdout until the socket
 * closes. When stdin ends, the socket is half-closed (the daemon ends the session and closes).
 * Blocks the calling thread; closes `fd`. Returns who ended it.
 */
export function relayStdio(fd: number, first: Uint8Array): RelayEnd {
  const libc = openLibc();
  const buf = new Uint8Array(CHUNK);
  const writeAll = (to: number, data: Uint8Array): boolean => {
    let off = 0;
    while (off < data.length) {
      const n = Number(libc.write(to, data.subarray(off), BigInt(data.length - off)));
      if (n < 0) {
        if (errno(libc) === LINUX.EINTR) continue;
        return false;
      }
      off += n;
    }
    return true;
  };
  try {
    if (!writeAll(fd, first)) return "daemon";
    // struct pollfd[2]: {stdin, POLLIN}, {socket, POLLIN}
    const pfd = new Uint8Array(16);
    const v = new DataView(pfd.buffer);
    v.setInt32(0, 0, true);
    v.setInt16(4, LINUX.POLLIN, true);
    v.setInt32(8, fd, true);
    v.setInt16(12, LINUX.POLLIN, true);
    let stdinOpen = true;
    for (;;) {
      v.setInt16(6, 0, true);
      v.setInt16(14, 0, true);
      const rc = stdinOpen ? libc.poll_here(pfd, 2n, -1) : libc.poll_here(pfd.subarray(8), 1n, -1);
      if (rc < 0) {
        if (errno(libc) === LINUX.EINTR) continue;
        return "daemon";
      }
      if (stdinOpen && v.getInt16(6, true) !== 0) {
        const n = Number(libc.read(0, buf, BigInt(CHUNK)));
        if (n > 0) {
          if (!writeAll(fd, buf.subarray(0, n))) return "daemon";
        } else if (n === 0 || errno(libc) !== LINUX.EINTR) {
          stdinOpen = false;
          libc.shutdown(fd, LINUX.SHUT_WR);
        }
      }
      if (v.getInt16(14, true) !== 0) {
        const n = Number(libc.read(fd, buf, BigInt(CHUNK)));
        if (n > 0) {
          // The client stopped reading (closed stdout): nothing more can reach it.
          if (!writeAll(1, buf.subarray(0, n))) return "client";
        } else if (n === 0 || errno(libc) !== LINUX.EINTR) {
          return stdinOpen ? "daemon" : "client";
        }
      }
    }
  } finally {
    libc.close(fd);
  }
}

/**
 * Unix domain sockets over libc, for the one process that must not pay for an event loop: the
 * stdio shim. `connectUnix` opens a connection; `relayStdio` then shuttles bytes between the
 * shim's stdin/stdout and that socket in a blocking `poll()` loop on the calling thread — no
 * thread hand-off per message, so a relayed call costs a few system calls. Owns the fd it is
 * given. Also the newline framing both ends of the MCP socket read with (`readLines`, bounded).
 * Knows nothing about MCP itself: bytes and lines.
 */
export { connectUnix, type RelayEnd, relayStdio } from "./relay.ts";
export { type LineItem, MAX_LINE_BYTES, readLines } from "./lines.ts";

/**
 * Terminal output, two ways. For agents: a stateful VT cleaner (escape sequences out, progress
 * bars collapsed), redaction of secrets (never lengthens text), and a cursor buffer with bounded
 * retention, explicit gaps and UTF-8-safe pages, whose paging rules (readPage, summarize over a
 * ByteSource) also serve the spool: each job's output on disk in bounded segment files, read back
 * after a restart exactly as the live buffer did. For people: a raw byte ring for replay, an
 * asciicast v2 recording on disk, and a lazily rendered screen (@xterm/headless). Owns no
 * processes and knows nothing about shells or jobs.
 */
export { VtCleaner, type VtCleanerOptions } from "./vt_cleaner.ts";
export { ALL_FLAGS, classify, HAS_ANCHOR, HAS_CONTROL, HAS_ESC } from "./scan.ts";
export {
  type Matcher,
  MAX_LINE_HEAD,
  MAX_SHARED_LITERALS,
  type RedactContext,
  Redactor,
  type RedactorOptions,
  type RedactStream,
  SecretSet,
} from "./redact.ts";
export { CursorBuffer, type CursorBufferOptions } from "./cursor_buffer.ts";
export { pruneSpools, removeSpool, type SpoolOptions, SpoolReader, SpoolWriter } from "./spool.ts";
export {
  type ByteSource,
  decodeCursor,
  encodeCursor,
  MAX_PAGE_BYTES,
  type Page,
  readPage,
  summarize,
  type Summary,
} from "./paging.ts";
export { completeEnd, isCont, utf8Length } from "./utf8.ts";
export { RAW_RING_DEFAULT_CAPACITY, RawRing, type RawSince } from "./raw_ring.ts";
export { type AsciicastOptions, AsciicastRecorder } from "./asciicast.ts";
export {
  type ScreenChanges,
  ScreenMirror,
  type ScreenMirrorOptions,
  type ScreenModes,
  type ScreenRow,
  type ScreenSnapshot,
} from "./screen.ts";

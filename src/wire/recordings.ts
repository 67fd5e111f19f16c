/**
 * Session recordings on the wire: the operator routes `GET /api/recordings`,
 * `GET /api/recordings/:id` and `GET /api/sessions/:id/recording` (the asciicast itself, not
 * JSON), used by `termada replay | export` and the dashboard's player.
 */
import { z } from "zod";

/** Bounds of the recording routes. */
export const RECORDING_WIRE_LIMITS = {
  /** Recordings one list returns at most (newest first). */
  listMax: 1000,
  /** Bytes of recorded files one cast joins at most (the newest ones are kept). */
  castMaxBytes: 256 * 1024 * 1024,
} as const;

/** The media type of an asciicast v2 file. */
export const ASCIICAST_MEDIA_TYPE = "application/x-asciicast";

export const RecordingsQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(RECORDING_WIRE_LIMITS.listMax).optional(),
});
export type RecordingsQuery = z.output<typeof RecordingsQuery>;

export const RecordingInfo = z.object({
  session_id: z.string(),
  /** The agent that owned the session; null when the store no longer knows it. */
  owner: z.string().nullable(),
  /** The session still runs (its newest part is still being written). */
  live: z.boolean(),
  /** Bytes of every recorded file (headers included), as on disk now. */
  bytes: z.number().int(),
  /** Files on disk: the current one plus rotated ones (`<id>.cast.1` …). */
  parts: z.number().int(),
  started_at: z.string(),
  /** When the session closed (absent while it runs, or when the store does not know). */
  ended_at: z.string().optional(),
  close_reason: z.string().optional(),
});
export type RecordingInfo = z.infer<typeof RecordingInfo>;

export const RecordingList = z.object({
  recordings: z.array(RecordingInfo),
  /** Sessions with a recording on disk (the list holds at most `limit` of them). */
  total: z.number().int(),
  /** Whether new sessions are recorded (`sessions.record`). */
  enabled: z.boolean(),
});
export type RecordingList = z.infer<typeof RecordingList>;

/** Response headers of `GET /api/sessions/:id/recording` besides the content type. */
export const RECORDING_HEADERS = {
  /** Files joined into the cast. */
  parts: "x-termada-recording-parts",
  /** Recorded bytes left out (oldest first) to stay under `castMaxBytes`; 0 when none. */
  omittedBytes: "x-termada-recording-omitted-bytes",
  live: "x-termada-recording-live",
} as const;

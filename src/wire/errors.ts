/**
 * The error shape every failed call returns (`structuredContent.error` of MCP results, the body
 * of HTTP errors): `{code, message, retriable, hint?, details?}`. `details` is closed: its keys
 * are those of `ErrorDetails` in src/shared/errors.ts, declared here once more for the schema
 * (the type check below keeps the two equal).
 */
import { z } from "zod";
import { ERROR_CODES, type ErrorBody, type ErrorDetails } from "../shared/mod.ts";

export const ErrorDetailsSchema = z.object({
  job_id: z.string().optional(),
  session_id: z.string().optional(),
  approval_id: z.string().optional(),
  state: z.string().optional(),
  rule: z.string().optional(),
  key: z.string().optional(),
  file: z.string().optional(),
  line: z.number().int().optional(),
  problems: z.array(z.string()).optional(),
  server: z.string().optional(),
  host_key: z.object({ known: z.string(), offered: z.string() }).optional(),
  broken: z.object({
    seq: z.number().int().nullable(),
    segment: z.string(),
    line: z.number().int(),
    reason: z.string(),
  }).optional(),
  votes: z.number().int().optional(),
  quorum: z.number().int().optional(),
  per_owner: z.number().int().optional(),
  total: z.number().int().optional(),
  budget: z.string().optional(),
  scope: z.string().optional(),
  scope_key: z.string().optional(),
  metric: z.string().optional(),
  limit: z.number().optional(),
  used: z.number().optional(),
  reserved: z.number().optional(),
  reset_at: z.string().nullable().optional(),
});

export const ErrorBodySchema = z.object({
  code: z.enum(ERROR_CODES),
  message: z.string(),
  retriable: z.boolean(),
  hint: z.string().optional(),
  details: ErrorDetailsSchema.optional(),
});

/** `structuredContent` of a failed tool call. */
export const ToolError = z.object({ error: ErrorBodySchema });
export type ToolError = z.infer<typeof ToolError>;

// Compile-time proof that the schema and the domain type describe the same object.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const _detailsMatch: Same<z.infer<typeof ErrorDetailsSchema>, ErrorDetails> = true;
const _bodyMatch: Same<z.infer<typeof ErrorBodySchema>, ErrorBody> = true;
void _detailsMatch;
void _bodyMatch;

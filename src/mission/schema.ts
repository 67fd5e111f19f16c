/**
 * Input schemas of the mission operations, shared by the MCP tools and the operator routes.
 * Bounds are those of docs/MISSION.md.
 */
import { z } from "zod";
import { MISSION_STATUSES, MISSION_TEXT_LIMITS, STEP_STATUSES } from "../store/mod.ts";
import { schema as engineSchema } from "../engine/mod.ts";

/** Bounds, documented in docs/MISSION.md. */
export const MISSION_LIMITS = {
  ...MISSION_TEXT_LIMITS,
  steps: 24,
  /** Missions of one agent that are not terminal. */
  activePerAgent: 16,
  timeline: 512,
  anchors: 4096,
  attempts: 32,
  listLimit: 200,
  /** Timeline entries in a `mission_get` result (the operator route returns all). */
  timelineInView: 50,
} as const;

const noNul = (s: string) => !s.includes("\0");
const Text = (max: number) =>
  z.string().min(1).max(max).refine(noNul, "must not contain NUL bytes");

export const MissionId = z.string().regex(/^msn_[0-9a-z]{12}$/, "is not a mission id");
export const StepId = z.string().regex(/^s([1-9]|1[0-9]|2[0-4])$/, "is not a step id (s1 … s24)");
const JobId = z.string().min(1).max(64).regex(/^[A-Za-z0-9_.:-]+$/, "is not a valid id");

export const MissionCreateInput = z.object({
  goal: Text(MISSION_LIMITS.goal),
  plan: z.array(Text(MISSION_LIMITS.step)).min(1, "needs at least one step").max(
    MISSION_LIMITS.steps,
    `has at most ${MISSION_LIMITS.steps} steps`,
  ),
  title: Text(MISSION_LIMITS.title).optional(),
  target: z.string().min(1).max(128).optional(),
  workspace: Text(64).optional(),
  cwd: engineSchema.SessionCreateInput.shape.cwd,
  shell: engineSchema.SessionCreateInput.shape.shell,
});
export type MissionCreateInput = z.infer<typeof MissionCreateInput>;

export const MissionIdInput = z.object({ mission_id: MissionId });
export type MissionIdInput = z.infer<typeof MissionIdInput>;

export const MissionListInput = z.object({
  status: z.enum(MISSION_STATUSES).optional(),
  limit: z.number().int().min(1).max(MISSION_LIMITS.listLimit).optional(),
});
export type MissionListInput = z.infer<typeof MissionListInput>;

export const MissionUpdateInput = z.object({
  mission_id: MissionId,
  step_id: StepId.optional(),
  step_status: z.enum(STEP_STATUSES).optional(),
  job_id: JobId.optional(),
  note: Text(MISSION_LIMITS.note).optional(),
  status: z.enum(["succeeded", "failed", "cancelled"]).optional(),
  summary: Text(MISSION_LIMITS.summary).optional(),
});
export type MissionUpdateInput = z.infer<typeof MissionUpdateInput>;

export const MissionReportInput = z.object({
  mission_id: MissionId,
  format: z.enum(["markdown", "json"]).optional(),
});
export type MissionReportInput = z.infer<typeof MissionReportInput>;

export const MissionCancelInput = z.object({
  reason: Text(1000).optional(),
});
export type MissionCancelInput = z.infer<typeof MissionCancelInput>;

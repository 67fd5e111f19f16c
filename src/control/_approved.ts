/**
 * What each approved job was approved with (the approval book writes it, the gateway reads it
 * at exec): an exec-time confirm is covered by the job's approval only when that approval met
 * what the exec-time rule asks for (src/policy requirementCovered).
 */
import type { ApprovalRequirement } from "../policy/mod.ts";

export const APPROVED_WITH: WeakMap<object, ApprovalRequirement> = new WeakMap();

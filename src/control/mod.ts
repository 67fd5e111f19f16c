/**
 * Control: the admission gateway every side effect passes (policy, approvals, audit intent,
 * kill switch) and the operator's decisions. Agents have no path into the operator half.
 */
export {
  type Actor,
  type ActorKind,
  type ApprovalRecord,
  type ApprovalStorePort,
  type AuditPort,
  Gateway,
  type GatewayOptions,
  type PolicyPort,
  type PolicyVerdict,
  type StopResult,
} from "./gateway.ts";

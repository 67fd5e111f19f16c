/**
 * Governance (docs/GOVERNANCE.md): who callers are and what they may spend, and proof of the
 * record beyond this machine — offline JWT verification for agents and operators (`jwt.ts`), the
 * budget ledger with every admitted action's intent and outcome (`budgets.ts`, on the store's
 * `actions`, `budget_*` and `grants` tables), and the signed anchors of the audit chain
 * (`anchors.ts`: key, local anchors, delivery to receivers, the offline check). It decides no
 * policy (src/policy and the gateway do), does not write the audit log (src/audit does) and does
 * not read the config (the daemon passes parsed options).
 */
export {
  type Anchor,
  ANCHOR_KEY_FILE,
  ANCHOR_PUBLIC_KEY_FILE,
  ANCHOR_SIGNING_DOMAIN,
  anchorKeyId,
  type AnchorLog,
  type AnchorReceiver,
  type AnchorReceiverStatus,
  type AnchorRetry,
  ANCHORS_DIR,
  ANCHORS_FILE,
  AnchorService,
  type AnchorServiceOptions,
  type AnchorStatus,
  type AnchorVerifyFailure,
  type AnchorVerifyResult,
  DEFAULT_RECEIVER_TIMEOUT_MS,
  DEFAULT_RETRY,
  MAX_PENDING_ANCHORS,
  MAX_RECEIPT_BODY_BYTES,
  OUTBOX_FILE,
  RECEIPTS_FILE,
  verifyAnchors,
  type VerifyAnchorsOptions,
} from "./anchors.ts";
export {
  JWT_ALGORITHMS,
  JWT_LIMITS,
  type JwtAlgorithm,
  JwtError,
  type JwtErrorReason,
  type JwtTrust,
  JwtVerifier,
  looksLikeJwt,
  type VerifiedClaims,
} from "./jwt.ts";
export {
  ACTIONS_KEPT_MS,
  BUDGET_METRICS,
  BUDGET_SCOPES,
  type BudgetExceededDetails,
  BudgetLedger,
  type BudgetMetric,
  type BudgetOutcome,
  type BudgetRule,
  type BudgetScope,
  type BudgetSubject,
  type BudgetUsage,
  type CostEstimate,
  MAX_RULES_PER_ADMISSION,
  MAX_USAGE_KEYS_PER_BUDGET,
  USAGE_KEPT_MS,
} from "./budgets.ts";

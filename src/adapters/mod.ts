/**
 * Adapters: typed, durable side effects beyond the terminal (a file patch, an HTTP request). This
 * folder owns the adapter contract (sdk.ts), the `adapter_runs` table (store.ts), the runner that
 * moves a run through its phases and resumes it after a crash (runner.ts), and the two adapters.
 * It does not decide whether a run may happen: the caller passes the gateway as `admit`. It does
 * not own the database connection either: the daemon passes its own and closes it.
 */
export {
  type Adapter,
  ADAPTER_ERROR_REASONS,
  ADAPTER_REASON_CODES,
  AdapterError,
  type AdapterErrorOptions,
  type AdapterErrorReason,
  type AnyAdapter,
  type Compensation,
  type ExecuteContext,
  type FailureOutcome,
  type JsonValue,
  type PhaseContext,
  type PrepareContext,
  type Prepared,
  type Reconciled,
  type Risk,
  type Verification,
} from "./sdk.ts";
export {
  ADAPTER_RUN_PHASES,
  ADAPTER_RUNS_SCHEMA,
  ADAPTER_STORE_LIMITS,
  type AdapterRunPhase,
  type AdapterRunRow,
  AdapterRunStore,
  type AdapterRunStoreOptions,
  type ListRunsOptions,
  type NewAdapterRun,
  type PhasePatch,
  type RunError,
} from "./store.ts";
export {
  type AdapterRun,
  AdapterRunner,
  type AdapterRunnerOptions,
  type Admission,
  type AdmissionRequest,
  type AdmitHook,
  RUNNER_LIMITS,
  type RunOptions,
} from "./runner.ts";
export { DIFF_LIMITS, type FileDiff, type Hunk, parseUnifiedDiff } from "./diff.ts";
export {
  FILE_PATCH_LIMITS,
  type FileChangeKind,
  filePatchAdapter,
  FilePatchInput,
  type FilePatchOptions,
  type FilePatchPlan,
  type FilePatchReceipt,
  type PlannedFile,
} from "./file_patch.ts";
export {
  httpTargetsAdapter,
  HttpTargetsInput,
  type HttpTargetsPlan,
  MAX_HTTP_TARGETS,
} from "./http_targets.ts";
export {
  HTTP_REQUEST_LIMITS,
  httpRequestAdapter,
  HttpRequestInput,
  type HttpRequestOptions,
  type HttpRequestPlan,
  type HttpRequestReceipt,
} from "./http_request.ts";

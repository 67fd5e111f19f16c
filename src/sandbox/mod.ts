/**
 * The kernel boundary around sessions (docs/SECURITY.md): the launcher (`termada __launch`)
 * that sets it up in the child before `execve`, the exec gate (seccomp user notification,
 * answered on a thread of its own, gate_thread.ts), Landlock, per-session cgroups, the
 * subreaper, and `security.run_as` (who the user is, whether the daemon may become it, the drop
 * itself).
 */
export {
  type ExecGateMode,
  type Feature,
  type FeatureState,
  Sandbox,
  type SandboxOptions,
  type SandboxReport,
  SandboxUnavailable,
  type Spawned,
  type SpawnRequest,
} from "./sandbox.ts";
export {
  type ExecAnswer,
  type ExecDecider,
  type ExecEvent,
  GATE_LIMITS,
  type GateStats,
} from "./gate.ts";
export { type ExecFastPath, fastAnswer } from "./fast_path.ts";
export { type FileIdentity, fileIdentity, programDirs } from "./identity.ts";
export { runLauncher } from "./launcher_main.ts";
export { launchProblems, type LaunchReady } from "./spec.ts";
export { runAsForDaemon, type RunAsSpec, type RunAsUser } from "./run_as.ts";
export { nowTicks, ProcessScope } from "./scope.ts";
export { type EscalateResult, type ProcessRef, type Survivor } from "./reaper.ts";
export { LauncherCode, MAX_PINNED_FILES } from "./launcher_code.ts";
export type { Cgroup } from "./cgroup.ts";

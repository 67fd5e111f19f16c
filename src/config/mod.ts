/**
 * Termada's configuration: where its files live (XDG base directories, `TERMADA_HOME`,
 * `--config`, the Unix socket fallback for long paths), the strict schema of `config.yaml` with
 * the embedded defaults, and loading it with `${ENV}` expansion and line-precise errors. It owns
 * no running state: the daemon reads the config once at start and passes plain values on
 * (`engineOptionsFrom` for the engine). It imports nothing but `src/shared` and `src/paths` (whose
 * exports it passes on).
 */
export {
  ensurePrivateDir,
  ensureStateDirs,
  MAX_SOCKET_PATH_BYTES,
  mcpSocketBeside,
  resolvePaths,
  type ResolvePathsOptions,
  type TermadaPaths,
} from "../paths/mod.ts";
export {
  AGENT_ID_PATTERN,
  Config,
  CONFIG_LIMITS,
  DEFAULT_CONFIG,
  effectivePaths,
  engineOptionsFrom,
  type EngineSettings,
  parseBind,
  POLICY_NAME_PATTERN,
  policyFor,
  type PolicyRules,
  SERVER_NAME_PATTERN,
  ServerEntry,
  weakToken,
} from "./schema.ts";
export {
  ACTION_KINDS,
  AgentJwtTrust,
  type ApprovalRequirement,
  type BudgetEntry,
  GOVERNANCE_LIMITS,
  OperatorJwtTrust,
  type StructuredRule,
} from "./governance_schema.ts";
export {
  AdaptersConfig,
  DEFAULT_CALLS_PER_MINUTE,
  DEFAULT_TIMEOUT_MS,
  HttpTargetConfig,
  MAX_PLUGINS,
  PluginConfig,
} from "./plugins_schema.ts";
export {
  loadConfig,
  type LoadConfigOptions,
  type LoadedConfig,
  loadYaml,
  parseConfig,
  type ParseConfigOptions,
} from "./load.ts";

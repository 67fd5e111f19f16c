/**
 * The command policy: classifies what an agent asks to run as allow, deny or confirm. It parses
 * shell lines with a real bash parser (mvdan-sh), finds every simple command they would run —
 * through pipelines, lists, substitutions, here-documents, `bash -c` payloads, functions and
 * wrappers like `sudo`, `env`, `xargs` and `find -exec` — and matches each against the policy's
 * glob rules. What cannot be known before it runs (interpreter code, `eval` of a variable, a
 * command name built at run time) is opaque and denied whenever the policy has rules.
 *
 * It owns no state and runs nothing: the gateway asks it, then the engine acts (docs/POLICY.md).
 * The bash parser (mvdan-sh) is loaded on demand: call `loadShellParser()` before deciding with a
 * policy that has rules (until then every shell line is opaque, so such a policy denies it).
 * Loading it needs `--allow-env` (mvdan-sh reads the environment).
 */
export {
  ALLOWED_AT_EXEC,
  type AutoAnswer,
  CompiledPolicy,
  compilePolicy,
  decide,
  decideEach,
  decideExec,
  decideLine,
  type DecideOptions,
  type Decision,
  execMayMatch,
  type ExecSubject,
  type PolicyAction,
  type PolicyRules,
  type RuleList,
  ruleProgramNames,
} from "./policy.ts";
export { type CompiledGlob, compileGlob, globMatch } from "./glob.ts";
export { POLICY_LIMITS } from "./_analyze.ts";
export {
  type ApprovalRequirement,
  classifyRisk,
  combineRequirements,
  CompiledGovernance,
  decideGoverned,
  type GovernedFacts,
  type GovernedKind,
  type GovernedVerdict,
  holdsRoles,
  isProduction,
  isReversible,
  NO_ALLOW_RULE,
  ONE_OPERATOR,
  RANK,
  requirementCovered,
  type Risk,
  roleSets,
  type StructuredRuleInput,
} from "./governed.ts";
export { loadShellParser, shellParserLoaded } from "./_parser.ts";
export {
  CompiledResourceRules,
  decideResource,
  describeSubject,
  type ResourceDecision,
  type ResourceKind,
  type ResourceRules,
  type ResourceSubject,
} from "./resource.ts";

// Pure rules with no state of their own: host patterns, path rules and what a change of them adds,
// how a credential goes into a URL, the minted auth types' fields, and the size limits every input is
// held to. Saying any of it in words for people and agents is words/'s.

export { coveringPatternTexts, hostMatches, isIpName, parseHostPattern, type HostPattern } from "./hosts.ts";
export * from "./minted-auth.ts";
export * from "./limits.ts";
export {
  canonicalPath,
  matchRule,
  needsApproval,
  RULE_METHODS,
  type CanonicalPath,
  type Rules,
  type ServiceRule,
} from "./path-rules.ts";
export { covers, widening } from "./rules-diff.ts";
export { EVERYTHING_RULE, keepOthersAllowed, RulesList } from "./rules-schema.ts";
export { readPathTemplate, readQueryParam, splitPathTemplate, VALUE_PLACEHOLDER } from "./url-auth.ts";
export { formatReference, parseReference, pathAllowed, type CredentialSource, type SecretReference } from "./secret-reference.ts";
export { budgetApplies, judgeBudgets, limitReached, softCrossed, type BudgetSubject, type BudgetVerdict } from "./budget-decision.ts";
export { periodEnd, periodStart } from "./budget-periods.ts";
export * from "./llm-prices.ts";
export {
  ACCESS_TOKEN_TYPE,
  CLAIM_LIMITS,
  claimValues,
  JWKS_MAX_CHARS,
  JWKS_MAX_KEYS,
  JWT_TOKEN_TYPES,
  TOKEN_EXCHANGE_GRANT,
  conditionHolds,
  conditionsHold,
  globMatches,
} from "./workload-claims.ts";

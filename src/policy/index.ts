// Pure rules with no state of their own: host patterns, path rules, how a credential goes into a URL,
// the minted auth types' fields, and the size limits every input is held to.

export { hostMatches, parseHostPattern, type HostPattern } from "./hosts.ts";
export * from "./minted-auth.ts";
export * from "./limits.ts";
export {
  canonicalPath,
  describeRules,
  matchRule,
  needsApproval,
  parseRules,
  RULE_METHODS,
  type CanonicalPath,
  type Rules,
  type ServiceRule,
} from "./path-rules.ts";
export { describeUrlAuth, readPathTemplate, readQueryParam, splitPathTemplate, VALUE_PLACEHOLDER } from "./url-auth.ts";

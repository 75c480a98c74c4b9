// (module index: describe this module)
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

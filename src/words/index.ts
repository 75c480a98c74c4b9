// Saying it in words: a service's auth, its rules, a proposal's changes and a session, phrased once for the
// approval pages, the console, the CLI, /discover, the pipeline's refusals and the approver's
// warnings. Pure functions over names and settings; never a credential value.

export {
  authCell,
  authSummary,
  AUTH_TYPE_LABELS,
  describeAuth,
  describeAuthForAgent,
  describeMintedAuth,
  describeUrlAuth,
  isPemSlot,
  PEM_HINT,
  slotUses,
  type AuthShape,
  type Phrase,
} from "./auth.ts";
export { describeRules, describeRulesInWords, EVERYTHING } from "./rules.ts";
export {
  describeProposalChange,
  newHostWarning,
  replacedServiceWarning,
  rulesRemovedWarning,
  type ProposalChange,
  type RulesChangeKind,
} from "./proposal.ts";
export { describeOperations, describeTemplateChoice, operationLines } from "./template.ts";
export { describeClient, describeSessionKind, type SessionFacts } from "./session.ts";

// What the CLI's commands share: argument checks, the API client, the local context and state, output
// and prompts, help, dispatch and completion scripts, failure messages, `vault run`'s supervision and
// containment, doctor's checks.

export { CliExit } from "./fail.ts";
export { CliFailure } from "./fail.ts";
export { UsageFailure } from "./fail.ts";
export { assertArgs } from "./args.ts";
export { renderHelp } from "./help.ts";
export { renderUsageLine } from "./help.ts";
export { commandLine } from "./help.ts";
export { stripAnsi } from "./help.ts";
export { resolve } from "./help.ts";
export { splitCommand } from "./help.ts";
export { addHelpFooter } from "./help.ts";
export { addUsageTail } from "./help.ts";
export { assertKnownCommand, planCommand } from "./dispatch.ts";
export { addWordChoices, type CommandNode, loadCommandTree } from "./command-tree.ts";
export { renderBashCompletion } from "./completion-bash.ts";
export { renderZshCompletion } from "./completion-zsh.ts";
export { renderFishCompletion } from "./completion-fish.ts";
export { jsonArg } from "./args.ts";
export { vaultArg } from "./args.ts";
export { vaultPath } from "./client.ts";
export { openContext } from "./context.ts";
export { pickVault } from "./context.ts";
export { pickVaultOrOnly } from "./context.ts";
export { hintOnForbidden } from "./fail.ts";
export { SECRET_READ_HINT } from "./fail.ts";
export { SECRET_WRITE_HINT } from "./fail.ts";
export { formatTime } from "./output.ts";
export { printJson } from "./output.ts";
export { printLine } from "./output.ts";
export { printSecret } from "./output.ts";
export { printTable } from "./output.ts";
export { promptHidden } from "./prompt.ts";
export { readStdinValue } from "./prompt.ts";
export { stdinIsTerminal } from "./prompt.ts";
export { hasCutCells } from "./output.ts";
export { printNote } from "./output.ts";
export { type Column } from "./output.ts";
export { addressArg } from "./args.ts";
export { passwordStdinArg } from "./args.ts";
export { apiPath } from "./client.ts";
export { rememberVault } from "./context.ts";
export { saveLogin } from "./context.ts";
export { promptNewPassword } from "./prompt.ts";
export { readStdinLine } from "./prompt.ts";
export { type Client } from "./client.ts";
export { AUTH_EXAMPLES } from "./service-auth.ts";
export { AUTH_NOTES } from "./service-auth.ts";
export { authKeyNames } from "./service-auth.ts";
export { buildAuth } from "./service-auth.ts";
export { describeAuth } from "./service-auth.ts";
export { MINTED_AUTH_ARGS } from "./service-auth.ts";
export { nameAuthFlag } from "./service-auth.ts";
export { type ServiceAuth } from "./service-auth.ts";
export { ADD_RULES_EXAMPLE } from "./service-rules.ts";
export { ADD_RULES_NOTES } from "./service-rules.ts";
export { ALLOW_EXAMPLE } from "./service-rules.ts";
export { allowArg } from "./service-rules.ts";
export { approveArg } from "./service-rules.ts";
export { collectFlagValues, collectRuleFlags } from "./service-rules.ts";
export { describeAllowed } from "./service-rules.ts";
export { parseRuleFlags } from "./service-rules.ts";
export { rulesFromFlags } from "./service-rules.ts";
export { rulesModeArg, rulesModeLine } from "./service-rules.ts";
export { UPDATE_EXAMPLES } from "./service-rules.ts";
export { updateCliState } from "./state.ts";
export { statePath } from "./state.ts";
export { isAgentToken } from "./client.ts";
export { checkGuard } from "./doctor-checks.ts";
export { checkOidc } from "./doctor-checks.ts";
export { checkPorts } from "./doctor-checks.ts";
export { probeHealth } from "./doctor-checks.ts";
export { checkPublicUrl } from "./doctor-checks.ts";
export { type Finding } from "./doctor-checks.ts";
export { checkCa } from "./doctor-store.ts";
export { checkDataDir } from "./doctor-store.ts";
export { checkDatabase } from "./doctor-store.ts";
export { checkKeyring } from "./doctor-store.ts";
export { parseTokenTtl } from "./args.ts";
export { formatTable } from "./output.ts";
export { ApiFailure } from "./client.ts";
export { forgetLogin } from "./context.ts";
export { type CliContext } from "./context.ts";
export { loginWithSso } from "./sso.ts";
export { nodeProxyWarning } from "./node-proxy.ts";
export { runSupervised } from "./supervise.ts";
export { watchRunActivity } from "./run-activity.ts";
export { assertContainable } from "./contain.ts";
export { CONTAIN_ENV } from "./contain.ts";
export { containedArgv } from "./contain.ts";
export { startBridges } from "./contain.ts";
export { type ContainSpec } from "./contain.ts";
export { checkWholePem } from "./service-auth.ts";
export { slotPrompt } from "./service-auth.ts";
export { promptLine } from "./prompt.ts";
export { parseDomainList } from "./args.ts";
export { namesCatalogueTemplate, refuseStrayTemplateFlags, TEMPLATE_ARGS, TEMPLATE_EXAMPLES, templateFields } from "./service-template.ts";
export { settingsToCheck } from "./doctor-running.ts";
export { warnIfNoKeys } from "./service-keys.ts";
export { sqliteStoreConfig } from "./sqlite-config.ts";
export { limitArg, parseListLimit, readPages } from "./pages.ts";
export { STORE_KINDS, STORE_SETTING_ARGS, storeBodyFromFlags, type StoreFlags, type StoreKind } from "./secret-store-flags.ts";
export { readAuthSecrets, SECRETS_NOTES } from "./secret-store-secrets.ts";
export { LIST_STORES_HINT, nameRefFlag, nameStoreFlag, storeHints } from "./secret-store-failures.ts";
export { REF_EXAMPLE, refAnswers, refBody, type RefBody } from "./secret-store-refs.ts";
export {
  authWords,
  CREDENTIAL_REFERENCE_COLUMNS,
  firstReadWords,
  kindWords,
  ownerWords,
  REFERENCE_COLUMNS,
  referenceStatus,
  storeWhere,
} from "./secret-store-words.ts";
export { checkSecretStores } from "./doctor-secret-stores.ts";
export { readVaultFile, writeVaultFile } from "./vault-file.ts";
export { exchangeIdentityToken, watchIdentityToken, type ExchangedSession } from "./identity-token.ts";
export { checkWorkers } from "./doctor-workers.ts";

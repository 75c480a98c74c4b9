// The fields that name people, agents and vaults, as every body reads them: an email address, a
// password (read straight into its Secret), a vault's or an agent's name, and a role in a vault. Each
// refusal is worded once here and names its field wherever the field sits (`{field}`, schema-input.ts).

import { z } from "zod";
import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from "../crypto/index.ts";
import { NAME_PATTERN } from "../policy/index.ts";
import { says } from "../schema-input.ts";
import { Secret } from "../secret.ts";
import type { VaultRole } from "../store/index.ts";

const EMAIL_SHAPE = /^[^\s@]{1,64}@[^\s@]+\.[^\s@]+$/;
const EMAIL = "{field} must be an email address";

/** An email address, read trimmed and lower-cased: accounts are found by it whatever its case. */
export const Email = z
  .string(says(EMAIL))
  .max(254, says(EMAIL))
  .refine((v) => EMAIL_SHAPE.test(v.trim()), says(EMAIL))
  .transform((v) => v.trim().toLowerCase())
  .describe("an email address");

const PASSWORD_LENGTH = `{field} must be ${MIN_PASSWORD_LENGTH} to ${MAX_PASSWORD_LENGTH} characters`;

/** A password, in its Secret wrapper from the moment it is read: nothing after this prints it. */
export const Password = z
  .string(says("{field} is required"))
  .min(MIN_PASSWORD_LENGTH, says(PASSWORD_LENGTH))
  .max(MAX_PASSWORD_LENGTH, says(PASSWORD_LENGTH))
  .transform((v) => new Secret(v))
  .describe(`${MIN_PASSWORD_LENGTH} to ${MAX_PASSWORD_LENGTH} characters`);

// Worded without `{field}`: the body calls it `name` or `vault`, and the message says what it is.
const VAULT_NAME = "vault name must be 1-63 lower-case letters, digits or '-', starting with a letter or digit";

export const VaultName = z.string(says(VAULT_NAME)).regex(NAME_PATTERN, says(VAULT_NAME)).describe("1-63 lower-case letters, digits or '-'");

const AGENT_NAME = "{field} must be 1-63 lower-case letters, digits or '-'";

export const AgentName = z.string(says(AGENT_NAME)).regex(NAME_PATTERN, says(AGENT_NAME));

const VAULT_ROLES = ["admin", "member", "proxy"] as const satisfies readonly VaultRole[];

/** A role in a vault. Whether the caller may grant it is the domain's decision (never above their own). */
export const VaultRoleInput = z.enum(VAULT_ROLES, says("{field} must be admin, member or proxy"));

// What a credential slot is for, in words, when a proposed service names it in one of the minted
// types' fields ("the GitHub App private key for api.github.com"): shown beside the slot on the approval
// page and the console's proposals, so the person pastes the right value. Key names only, never values.

import { authKeyFields, type ServiceAuth } from "../../workflows/index.ts";

const FIELD_WORDS: Record<string, string> = {
  client_id: "the OAuth client ID",
  client_secret: "the OAuth client secret",
  refresh_token: "the OAuth refresh token",
  access_key_id: "the AWS access key ID",
  secret_access_key: "the AWS secret access key",
  session_token: "the AWS session token",
  private_key: "the GitHub App private key",
};

/** "the GitHub App private key for api.github.com", for each proposed service whose minted auth names `key`. */
export function slotUses(services: readonly { host: string; auth: ServiceAuth }[], key: string): string[] {
  return services.flatMap((s) =>
    authKeyFields(s.auth).flatMap(([field, k]) => (k === key && FIELD_WORDS[field] ? [`${FIELD_WORDS[field]} for ${s.host}`] : [])),
  );
}

/** A private key slot takes a whole PEM file; the password field drops its line breaks and the broker puts them back. */
export function isPemSlot(services: readonly { host: string; auth: ServiceAuth }[], key: string): boolean {
  return services.some((s) => s.auth.type === "github_app" && s.auth.private_key === key);
}

export const PEM_HINT = "Paste the whole .pem file the app's settings page gave you, BEGIN and END lines included.";

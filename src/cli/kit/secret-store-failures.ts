// What `broker secret-store` and `credential set --ref` say when the broker refuses: a 400 on a body field
// told against the flag that set it (`--address must be an https:// URL`), and each status's next step.
// Flag values are not repeated: a pasted secret must not echo.

import { ApiFailure } from "./client.ts";
import { CliFailure } from "./fail.ts";
import { flagOfField } from "./secret-store-flags.ts";
import { METHOD_SECRETS } from "./secret-store-secrets.ts";

export const LIST_STORES_HINT = "`broker secret-store list` shows the connections you may see";

/** The next steps by status for a call on one connection. */
export function storeHints(name: string): Record<number, string> {
  return {
    403:
      "the owner's connections are the instance owner's to manage (a vault's human admin may add the vault's own: " +
      "`broker secret-store add <name> --vault <vault> …`); agents and `vault run` sessions never manage them",
    404: LIST_STORES_HINT,
    409: `\`broker secret-store show ${name}\` lists the credentials that refer to it: point them elsewhere or delete them, then try again`,
  };
}

/** Awaits a call that sent flags; a 400 naming a body field is told against its flag, with a next step. */
export async function nameStoreFlag<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (err) {
    if (!(err instanceof ApiFailure) || err.status !== 400 || !err.field) throw err;
    const said = err.message.replace(/ \(400 [^)]*\)$/, "");
    const rest = said.startsWith(err.field) ? said.slice(err.field.length).replace(/^:?\s*/, "") : said;
    const secret = Object.values(METHOD_SECRETS)
      .flat()
      .find((f) => `auth.${f.field}` === err.field);
    if (secret) throw new CliFailure(`the ${secret.what} ${rest}`, "type it again at the prompt, or pipe it on standard input", 2);
    // The auth as a whole (a change of address without it: the stored auth was given for the old place).
    if (err.field === "auth" && !/^(must|is)\b/.test(rest))
      throw new CliFailure(rest, "give --auth <method> with the change; its secrets are typed at a prompt or piped, as for `add`", 2);
    const flag = flagOfField(err.field);
    if (!flag) throw err;
    throw new CliFailure(`${flag} ${rest}`, "`broker secret-store add --help` says what each flag takes", 2);
  }
}

/** Awaits `credential set --ref` or a proposal's approval: a 400 on the reference says where the usable connections are. */
export async function nameRefFlag<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (err) {
    if (!(err instanceof ApiFailure) || err.status !== 400 || !/^(ref|version|credentials\.)/.test(err.field ?? "")) throw err;
    throw new CliFailure(
      err.message.replace(/^ref: /, "--ref: "),
      `${LIST_STORES_HINT}; the owner shares one with a vault by \`broker secret-store share <name> <vault>\``,
      err.exitCode,
    );
  }
}

/** @jsxImportSource hono/jsx */
// `/vaults/:vault/credentials`: key names and update times for every role; setting, replacing and
// deleting values, and revealing one after the password is typed again, for human members and
// admins, through the API's own calls (setCredential, deleteCredential, revealCredential) so the
// permission rule is decided in one place, and the API's own schemas (KeyName, CredentialInput) read
// what is typed. A credential may instead read its value from a secret store the vault may use, by
// reference (`<connection>:<path>#<field>`, issue 36): the list shows where it reads from and how its
// last read went, and such a credential has no Reveal (its value lives in the store). A value is never
// prefilled, never put in a URL or a flash, and appears in exactly one response: the no-store page
// that answers the reveal post. The pages themselves: the list (vault-credential-list.tsx), one key
// (vault-credential-manage.tsx), the reveal (vault-credential-reveal.tsx), their forms
// (vault-credential-forms.tsx).

import { Hono } from "hono";
import { BrokerError } from "../../errors.ts";
import { CredentialInput, KeyName, parseWith } from "../../contract/index.ts";
import { deleteCredential, setCredential } from "../../workflows/index.ts";
import {
  describeError,
  formOf,
  openConsoleVault,
  redirectWithFlash,
  requireConfirmation,
  requireSignedIn,
  runAction,
  type ConsoleContext,
  type ConsoleEnv,
} from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { referenceOf, savedWords } from "./vault-credential-forms.tsx";
import { renderList } from "./vault-credential-list.tsx";
import { renderManage } from "./vault-credential-manage.tsx";
import { credentialPath } from "./vault-credential-paths.ts";
import { renderRevealForm, revealAfterPassword } from "./vault-credential-reveal.tsx";

export function vaultCredentialRoutes() {
  const r = new Hono<ConsoleEnv>();
  r.use("/vaults/:vault/credentials", requireSignedIn);
  r.use("/vaults/:vault/credentials/*", requireSignedIn);

  r.get("/vaults/:vault/credentials", renderList);

  const save = async (c: ConsoleContext, key: string, replacing: boolean) => {
    const list = vaultPath(c.req.param("vault") ?? "", "credentials");
    const failure = replacing ? credentialPath(c.req.param("vault") ?? "", key) : list;
    const form = formOf(c);
    if (form.source === "reference") {
      // The reference is read by CredentialInput as a body's `ref` and `version` are; the domain checks the vault may use its connection.
      try {
        const open = await openConsoleVault(c, "write_secrets");
        const name = parseWith(KeyName, key, "key");
        const saved = await setCredential(c.get("kit").d, open, name, parseWith(CredentialInput, referenceOf(form)));
        const words = savedWords(saved.key, saved.reference, replacing);
        return redirectWithFlash(c, replacing ? credentialPath(open.vault.name, saved.key) : list, words.kind, words.text);
      } catch (err) {
        if (!(err instanceof BrokerError)) throw err;
        return redirectWithFlash(
          c,
          `${failure}#${replacing ? "change-reference" : "by-reference"}`,
          "error",
          describeError(err).replace(/^Ref: (.)/, (_, first: string) => first.toUpperCase()),
        );
      }
    }
    return runAction(c, {
      run: async () => {
        const open = await openConsoleVault(c, "write_secrets");
        const name = parseWith(KeyName, key, "key");
        return setCredential(c.get("kit").d, open, name, parseWith(CredentialInput, { value: form.value }));
      },
      success: (r) => (replacing ? `The value of ${r.key} was replaced.` : `Credential ${r.key} saved.`),
      redirect: list,
      failure,
    });
  };
  r.post("/vaults/:vault/credentials", (c) => save(c, (formOf(c).key ?? "").trim(), false));
  r.post("/vaults/:vault/credentials/:key", (c) => save(c, c.req.param("key"), true));

  r.get("/vaults/:vault/credentials/:key", renderManage);
  r.get("/vaults/:vault/credentials/:key/reveal", renderRevealForm);
  r.post("/vaults/:vault/credentials/:key/reveal", revealAfterPassword);

  r.post("/vaults/:vault/credentials/:key/delete", (c) => {
    const key = c.req.param("key");
    return runAction(c, {
      run: async () => {
        const open = await openConsoleVault(c, "write_secrets");
        requireConfirmation(c, key);
        await deleteCredential(c.get("kit").d, open, parseWith(KeyName, key, "key"));
      },
      success: `Credential ${key} deleted.`,
      redirect: vaultPath(c.req.param("vault") ?? "", "credentials"),
      failure: credentialPath(c.req.param("vault") ?? "", key),
    });
  });

  return r;
}

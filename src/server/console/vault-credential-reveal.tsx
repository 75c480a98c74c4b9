/** @jsxImportSource hono/jsx */
// Revealing a stored credential's value (`/vaults/:vault/credentials/:key/reveal`): the person types
// their password again, checked as a sign-in is (same verification, same throttle), and the value is
// shown in exactly one response, the no-store page that answers that post. A credential by reference
// has no Reveal: its value lives in the store.

import { BrokerError, Unauthorized } from "../../errors.ts";
import { KeyName, Password, parseWith } from "../../contract/index.ts";
import { authenticateUser } from "../../identity/index.ts";
import { revealCredential } from "../../workflows/index.ts";
import { clientIp } from "../kit/index.ts";
import { Badge, Button, FormField, LinkButton, Name, PostForm, Section, Time } from "../ui/index.ts";
import { describeError, formOf, openConsoleVault, redirectWithFlash, renderPage, signedIn, type ConsoleContext } from "./context.tsx";
import { credentialPath, requireKey, vaultOf } from "./vault-credential-paths.ts";

// `keyName`, not `key`: JSX strips a prop named key.
function PasswordForm(props: { vault: string; keyName: string }) {
  return (
    <PostForm action={credentialPath(props.vault, props.keyName, "reveal")} id="reveal-form" label={`Reveal ${props.keyName}`}>
      <FormField
        label="Your password"
        name="password"
        type="password"
        autocomplete="current-password"
        required
        autofocus
        hint="The same password you sign in with. Wrong attempts count towards the sign-in limit."
      />
      <div class="actions">
        <Button variant="primary" id="reveal">
          Reveal value
        </Button>
        <LinkButton href={credentialPath(props.vault, props.keyName)}>Cancel</LinkButton>
      </div>
    </PostForm>
  );
}

export async function renderRevealForm(c: ConsoleContext) {
  const open = await openConsoleVault(c, "reveal");
  const item = await requireKey(c, open, c.req.param("key") ?? "");
  if (item.reference) {
    const body = (
      <Section title="Its value lives in a secret store" id="reveal-reference">
        <p>
          <Name>{item.key}</Name> reads its value from <Name>{item.reference.text}</Name>. The broker does not show it: reveal it in the store itself.
        </p>
        <div class="actions">
          <LinkButton href={credentialPath(open.vault.name, item.key)}>Back</LinkButton>
        </div>
      </Section>
    );
    return renderPage(c, { title: `Reveal ${item.key}`, nav: "vaults", vault: vaultOf(open) }, body);
  }
  const body = (
    <Section title="Confirm it is you" description="The value is shown once on the next page. It is not stored in your browser's cache; nobody else is told.">
      <PasswordForm vault={open.vault.name} keyName={item.key} />
    </Section>
  );
  return renderPage(c, { title: `Reveal ${item.key}`, nav: "vaults", vault: vaultOf(open) }, body);
}

/** The one response that carries a value: after the password check, no-store like every page (setPageHeaders). */
export async function revealAfterPassword(c: ConsoleContext) {
  const { d } = c.get("kit");
  const user = signedIn(c);
  const open = await openConsoleVault(c, "reveal");
  const key = c.req.param("key") ?? "";
  const back = credentialPath(open.vault.name, key, "reveal");
  const wrong = "That password is not right. Nothing was shown.";
  let password;
  try {
    password = parseWith(Password, formOf(c).password, "password");
  } catch {
    return redirectWithFlash(c, back, "error", wrong);
  }
  let cred;
  try {
    // The sign-in check itself: same Argon2id verification, same throttle keyed on the email.
    await authenticateUser(d, { email: user.email, password }, clientIp(c));
    cred = await revealCredential(d, open, parseWith(KeyName, key, "key"));
  } catch (err) {
    if (!(err instanceof BrokerError)) throw err;
    return redirectWithFlash(c, back, "error", err instanceof Unauthorized ? wrong : describeError(err));
  }
  c.get("kit").log.info("console_credential_revealed", { vault: open.vault.name, key, user: user.userId });
  const body = (
    <Section title={`Value of ${cred.key}`} description="Copy it now. Leaving or reloading this page hides it again.">
      <pre class="note revealed" id="revealed-value">
        {cred.value?.reveal() /* reveal: a member/admin typed their password to see this one value */ ?? `lives in a secret store: ${cred.reference?.text}`}
      </pre>
      <div class="actions">
        <LinkButton href={credentialPath(open.vault.name)} variant="primary">
          Done
        </LinkButton>
      </div>
    </Section>
  );
  const lead = (
    <>
      Updated <Time iso={cred.updated_at} /> · <Badge tone="warning">shown once</Badge>
    </>
  );
  return renderPage(c, { title: `Credential ${cred.key}`, nav: "vaults", vault: vaultOf(open), lead }, body);
}

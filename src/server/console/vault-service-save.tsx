/** @jsxImportSource hono/jsx */
// Saving a service from any of the console's forms (template or custom, add or edit): the form is read
// by the API's own schemas, a credential about to go to a host it does not go to today is confirmed
// first (the same warning the approval page shows), the domain's addService/updateService write it,
// and a key the service names that the vault does not store yet sends the person on to the Credentials
// page to store it. A refusal shows the form again as typed. Nothing here reads or shows a value.

import { BrokerError } from "../../errors.ts";
import type { OpenVault } from "../../identity/index.ts";
import {
  addService,
  authKeys,
  serviceOfHost,
  newHostUses,
  operatorClient,
  patchedAuth,
  updateService,
  type ServicePatch,
  type ServiceSpec,
} from "../../workflows/index.ts";
import { Button, LinkButton, Name, PostForm, Section } from "../ui/index.ts";
import { describeError, formOf, openConsoleVault, renderPage, type ConsoleContext } from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { keysOf, servicePath, vaultOf } from "./vault-service-paths.ts";
import { labelAuthField } from "./vault-service-summary.tsx";

export type RefusedStatus = 400 | 404 | 409;

export interface SaveRequest {
  /** The host of the service being edited; absent when adding. */
  readonly editing?: string;
  /** The form read through the API's schemas into what the domain takes; throws a BrokerError when refused. */
  readonly read: (open: OpenVault) => ServiceSpec | (ServicePatch & { readonly host: string });
  /** The page the form is on, for "Go back" from the new-host question. */
  readonly back: (vault: string) => string;
  /** The form again as posted, the refusal already set as the flash. */
  readonly rerender: (status: RefusedStatus) => Response | Promise<Response>;
}

/** Asks before a stored credential goes to a new host; the posted form rides along in hidden fields. */
function renderWarning(c: ConsoleContext, open: OpenVault, host: string, uses: { key: string; host: string }[], action: string, back: string) {
  const carried = Object.entries(formOf(c)).filter(([name]) => name !== "csrf" && name !== "confirm_new_host");
  const body = (
    <Section title="Check before you continue">
      {uses.map((u) => (
        <p class="warning" role="alert">
          This service sends your existing credential <Name>{u.key}</Name> to a new host, <Name>{u.host}</Name>. Whoever runs that host receives the value.
          Continue only if you trust it with this credential.
        </p>
      ))}
      <PostForm action={action} id="confirm-new-host" label="Confirm the new host">
        {carried.map(([name, value]) => (
          <input type="hidden" name={name} value={value} />
        ))}
        <input type="hidden" name="confirm_new_host" value="yes" />
        <div class="actions">
          <Button variant="primary" id="confirm-service">
            Yes, send {uses.map((u) => u.key).join(", ")} to {host}
          </Button>
          <LinkButton href={back}>Go back</LinkButton>
        </div>
      </PostForm>
    </Section>
  );
  return renderPage(c, { title: "Send an existing credential to a new host?", nav: "vaults", vault: vaultOf(open) }, body);
}

/** Where to go after saving: the list, or the Credentials page to store a key the service names that is not stored yet. */
function nextStep(vault: string, host: string, done: string, missing: string[]): { to: string; text: string } {
  if (missing.length === 0) return { to: servicePath(vault), text: `${done}.` };
  const first = missing[0]!;
  const which = missing.length === 1 ? first : `${missing.slice(0, -1).join(", ")} and ${missing.at(-1)}`;
  return {
    to: `${vaultPath(vault, "credentials")}?key=${encodeURIComponent(first)}#set-credential`,
    text: `${done}. Next, store the value of ${which}: until then agents' requests to ${host} get an error.`,
  };
}

/** Add or edit: validate as the API does, ask about a new host once, write through the domain, say what is next. */
export async function saveService(c: ConsoleContext, req: SaveRequest): Promise<Response> {
  const { d } = c.get("kit");
  try {
    const open = await openConsoleVault(c, "write_secrets");
    const spec = req.read(open);
    const vault = open.vault.name;
    const current = await serviceOfHost(d, open.vault.id, spec.host);
    // What the service will send once saved: an edit that names the template again keeps a connected account's auth.
    const auth = req.editing && current ? patchedAuth(current, spec) : (spec.auth ?? current?.auth);
    const uses = auth ? await newHostUses(d, open.vault.id, [{ host: spec.host, auth }]) : [];
    if (uses.length && formOf(c).confirm_new_host !== "yes") return renderWarning(c, open, spec.host, uses, servicePath(vault, req.editing), req.back(vault));
    const stored = await keysOf(c, open);
    const saved = req.editing ? await updateService(d, open, req.editing, spec) : await addService(d, open, spec as ServiceSpec);
    // A connected account's client id and secret are the operator's app's, never stored in the vault.
    const operators: readonly string[] = operatorClient(c.get("kit").connect, saved.auth)?.keys ?? [];
    const done = `Service ${saved.host} ${req.editing ? "updated" : "added"}${saved.enabled ? "" : " (disabled)"}`;
    const next = nextStep(
      vault,
      saved.host,
      done,
      authKeys(saved.auth).filter((k) => !stored.includes(k) && !operators.includes(k)),
    );
    c.get("kit").flash.write(c, { kind: "success", text: next.text });
    return c.redirect(next.to, 303);
  } catch (err) {
    if (!(err instanceof BrokerError)) throw err;
    // Shown now, as a flash on the same form, so what was typed (nothing secret) stays in the fields.
    c.set("flash", { kind: "error", text: labelAuthField(describeError(err), (err as { field?: string }).field) });
    return req.rerender(err.status === 404 ? 404 : err.status === 409 ? 409 : 400);
  }
}

/** @jsxImportSource hono/jsx */
// `/settings/workload-identity` (the instance owner only; every domain call refuses anyone else): the trusted
// workload issuers and their bindings (docs/architecture.md D27), with the forms to trust, change and remove an issuer
// and to add and remove a binding. Each form is read by the API's schema (WorkloadIssuerInput, WorkloadBindingInput)
// and goes to the API's domain functions, so the page and /v1/workload-issuers agree; a refused form is shown again
// as typed, the refusal beside its field and as the flash. The cards and forms are workload-{issuers,issuer-form,
// binding-form}.tsx, the forms' reading workload-draft.ts.

import { Hono } from "hono";
import type { WorkloadBindingViewBody, WorkloadIssuerViewBody } from "../../contract/index.ts";
import { BrokerError, NotFound } from "../../errors.ts";
import {
  addWorkloadBinding,
  addWorkloadIssuer,
  listVaults,
  listWorkloadBindings,
  listWorkloadIssuers,
  removeWorkloadBinding,
  removeWorkloadIssuer,
  requireOwner,
  updateWorkloadIssuer,
  type Domain,
} from "../../identity/index.ts";
import { Section } from "../ui/index.ts";
import {
  formOf,
  redirectWithFlash,
  renderPage,
  requireConfirmation,
  requireSignedIn,
  runAction,
  signedIn,
  type ConsoleContext,
  type ConsoleEnv,
  type PageOptions,
} from "./context.tsx";
import {
  BINDING_FIELDS,
  draftOf,
  EMPTY_BINDING,
  EMPTY_ISSUER,
  ISSUER_FIELDS,
  readBinding,
  readIssuer,
  refusalOf,
  type Draft,
  type Refusal,
} from "./workload-draft.ts";
import { IssuerForm } from "./workload-issuer-form.tsx";
import { HowItWorks, issuerAnchor, IssuerCard, NoIssuers, WORKLOAD_BASE, type IssuerForms } from "./workload-issuers.tsx";

/** A form the domain or its schema refused, to show again as typed: adding an issuer, or one issuer's change or binding form. */
interface Refused {
  readonly form: "issuer" | "change" | "binding";
  readonly issuer?: string;
  readonly draft: Draft;
  readonly refusal: Refusal;
}

/** The change form's fields as the issuer has them; its key set is the document given (public keys), which the view names only by kid. */
async function changeDraft(d: Domain, i: WorkloadIssuerViewBody): Promise<Draft> {
  const stored = i.jwks_kids === null ? undefined : (await d.store.workload.issuerByName(i.name))?.jwks;
  return {
    ...EMPTY_ISSUER,
    name: i.name,
    issuer: i.issuer,
    jwks_url: i.jwks_url ?? "",
    jwks: stored ? JSON.stringify(JSON.parse(stored), null, 2) : "",
    audiences: i.audiences.join("\n"),
    clock_skew_seconds: String(i.clock_skew_seconds),
    require_jti: i.require_jti ? "on" : "",
  };
}

async function bindingsOf(c: ConsoleContext, issuer: string): Promise<WorkloadBindingViewBody[]> {
  try {
    return (await listWorkloadBindings(c.get("kit").d, signedIn(c), issuer)).bindings;
  } catch (err) {
    if (err instanceof NotFound) return []; // removed meanwhile (another tab, another instance)
    throw err;
  }
}

async function renderWorkloads(c: ConsoleContext, refused?: Refused, status: PageOptions["status"] = 200) {
  const d = c.get("kit").d;
  const { issuers } = await listWorkloadIssuers(d, signedIn(c)); // the owner check, before anything is read
  const vaults = (await listVaults(d, signedIn(c))).map((v) => v.name).sort();
  const cards = await Promise.all(
    issuers.map(async (i) => {
      const mine = refused?.issuer === i.name ? refused : undefined;
      const forms: IssuerForms = {
        binding: mine?.form === "binding" ? mine : { draft: EMPTY_BINDING },
        change: mine?.form === "change" ? mine : { draft: await changeDraft(d, i) },
        open: mine?.form === "binding" || mine?.form === "change" ? mine.form : undefined,
        removing: c.req.query("issuer") === i.name ? c.req.query("remove") : undefined,
      };
      return <IssuerCard i={i} bindings={await bindingsOf(c, i.name)} vaults={vaults} forms={forms} />;
    }),
  );
  const adding = refused?.form === "issuer" ? refused : { draft: EMPTY_ISSUER };
  const body = (
    <>
      <HowItWorks />
      {issuers.length === 0 ? (
        <Section title="Trusted issuers" id="issuers">
          <NoIssuers />
        </Section>
      ) : (
        cards
      )}
      <Section
        title="Trust an issuer"
        id="add-issuer"
        description="Its keys are found by OIDC discovery from the issuer URL unless you give a JWKS URL or paste its key set."
      >
        <IssuerForm action={`${WORKLOAD_BASE}/issuers`} id="add-issuer-form" prefix="f-issuer" state={adding} submit="Trust issuer" />
      </Section>
    </>
  );
  const lead =
    "CI jobs and Kubernetes pods sign in with the token their platform already gives them, instead of a broker token stored in the pipeline. Only you, the owner, see this page.";
  return renderPage(c, { title: "Workload identity", nav: "workload-identity", lead, status }, body);
}

/** Shows the page again with the refused form as typed, its refusal as the flash too. */
function refuse(c: ConsoleContext, err: BrokerError, refused: Omit<Refused, "refusal">, fields: readonly string[]) {
  const refusal = refusalOf(err, fields);
  c.set("flash", { kind: "error", text: refusal.text });
  const status = err.status === 403 || err.status === 404 || err.status === 409 ? err.status : 400;
  return renderWorkloads(c, { ...refused, refusal }, status);
}

export function workloadIdentityRoutes() {
  const r = new Hono<ConsoleEnv>();
  r.use(WORKLOAD_BASE, requireSignedIn);
  r.use(`${WORKLOAD_BASE}/*`, requireSignedIn);

  r.get(WORKLOAD_BASE, (c) => renderWorkloads(c));
  // The addresses a refused form is shown at: reloading one goes back to the page.
  r.get(`${WORKLOAD_BASE}/*`, (c) => c.redirect(WORKLOAD_BASE, 303));

  r.post(`${WORKLOAD_BASE}/issuers`, async (c) => {
    requireOwner(signedIn(c)); // anyone else is refused before what they typed is read
    const draft = draftOf(formOf(c), ISSUER_FIELDS);
    try {
      const i = await addWorkloadIssuer(c.get("kit").d, signedIn(c), readIssuer(draft));
      return redirectWithFlash(
        c,
        `${WORKLOAD_BASE}#${issuerAnchor(i.name)}`,
        "success",
        `Trusting ${i.name}. Add a binding to say which of its workloads get which vault.`,
      );
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      return refuse(c, err, { form: "issuer", draft }, ISSUER_FIELDS);
    }
  });

  r.post(`${WORKLOAD_BASE}/issuers/:issuer`, async (c) => {
    requireOwner(signedIn(c));
    const name = c.req.param("issuer");
    const draft = { ...draftOf(formOf(c), ISSUER_FIELDS), name };
    try {
      const i = await updateWorkloadIssuer(c.get("kit").d, signedIn(c), name, readIssuer(draft, name));
      return redirectWithFlash(
        c,
        `${WORKLOAD_BASE}#${issuerAnchor(i.name)}`,
        "success",
        `Saved ${i.name}: its tokens are checked by these settings from now on.`,
      );
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      return refuse(c, err, { form: "change", issuer: name, draft }, ISSUER_FIELDS);
    }
  });

  r.post(`${WORKLOAD_BASE}/issuers/:issuer/delete`, (c) => {
    const name = c.req.param("issuer");
    return runAction(c, {
      run: async () => {
        requireOwner(signedIn(c)); // before the typed phrase is read
        requireConfirmation(c, name);
        await removeWorkloadIssuer(c.get("kit").d, signedIn(c), name);
      },
      success: `Issuer ${name} removed, with its bindings and their agents; their sessions have ended.`,
      redirect: WORKLOAD_BASE,
      failure: `${WORKLOAD_BASE}#${issuerAnchor(name)}`,
    });
  });

  r.post(`${WORKLOAD_BASE}/issuers/:issuer/bindings`, async (c) => {
    requireOwner(signedIn(c));
    const issuer = c.req.param("issuer");
    const draft = draftOf(formOf(c), BINDING_FIELDS);
    try {
      const b = await addWorkloadBinding(c.get("kit").d, signedIn(c), issuer, readBinding(draft));
      const text = `Binding ${b.name} added: tokens of ${issuer} that match it get ${b.vault} as ${b.role}, acting as the agent ${b.agent}.`;
      return redirectWithFlash(c, `${WORKLOAD_BASE}#${issuerAnchor(issuer)}`, "success", text);
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      return refuse(c, err, { form: "binding", issuer, draft }, BINDING_FIELDS);
    }
  });

  r.post(`${WORKLOAD_BASE}/issuers/:issuer/bindings/:name/delete`, (c) => {
    const issuer = c.req.param("issuer");
    const name = c.req.param("name");
    return runAction(c, {
      run: async () => {
        requireOwner(signedIn(c));
        requireConfirmation(c, name);
        await removeWorkloadBinding(c.get("kit").d, signedIn(c), issuer, name);
      },
      success: `Binding ${name} removed, with its agent; its sessions have ended.`,
      redirect: `${WORKLOAD_BASE}#${issuerAnchor(issuer)}`,
      failure: `${WORKLOAD_BASE}#${issuerAnchor(issuer)}`,
    });
  });

  return r;
}

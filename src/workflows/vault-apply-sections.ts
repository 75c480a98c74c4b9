// `broker apply`'s larger sections (issue 39): a vault's services, webhooks and budgets compared with its file,
// changed where they differ, and each difference said in words (architecture.md D27).

import { InvalidRequest } from "../errors.ts";
import type { BudgetRow, ServiceRow } from "../store/index.ts";
import { authSummary, describeRulesInWords } from "../words/index.ts";
import { budgetRowFor } from "./budgets.ts";
import { toRow, viewService, type ServiceSpec, type ServiceView } from "./services.ts";
import type { Applying } from "./vault-plan.ts";
import { addWebhook } from "./webhooks.ts";
import { maskWebhookReceiver } from "./webhook-url.ts";

/** JSON with every object's keys in order: two values compare equal whatever order they were written in. */
function stable(v: unknown): string {
  return JSON.stringify(v, (_k, value: unknown) =>
    value && typeof value === "object" && !Array.isArray(value)
      ? Object.fromEntries(Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : value,
  );
}

/** "template stripe, operations read, write" or "bearer STRIPE_KEY; GET on /v1/*". */
function serviceWords(v: ServiceView): string {
  const off = v.enabled ? "" : ", disabled";
  if (v.template) return `template ${v.template.id}, operations ${v.template.operations.join(", ")}${off}`;
  return `${authSummary(v.auth)}; ${describeRulesInWords(v.rules)}${off}`;
}

/** What differs between a service as stored and as the file states it, field by field. */
function serviceDiff(now: ServiceView, next: ServiceView): string[] {
  const out: string[] = [];
  if (now.description !== next.description) out.push(`description ${JSON.stringify(now.description)} → ${JSON.stringify(next.description)}`);
  if (now.enabled !== next.enabled) out.push(next.enabled ? "enabled" : "disabled");
  const template = (v: ServiceView) => (v.template ? `${v.template.id} (${v.template.operations.join(", ")})` : "none");
  if (template(now) !== template(next)) out.push(`template ${template(now)} → ${template(next)}`);
  if (stable(now.auth) !== stable(next.auth)) out.push(`auth ${authSummary(now.auth)} → ${authSummary(next.auth)}`);
  if (stable(now.rules ?? null) !== stable(next.rules ?? null)) out.push(`rules: ${describeRulesInWords(next.rules)}`);
  return out;
}

export async function applyServices(a: Applying): Promise<void> {
  const { spec, vault, tx } = a;
  if (!spec.services) return;
  const current = new Map((await tx.services.allOfVault(vault.id)).map((r) => [r.host, r]));
  for (const s of spec.services) await applyService(a, s, current.get(s.host));
  const wanted = new Set(spec.services.map((s) => s.host));
  for (const host of current.keys()) {
    if (wanted.has(host)) continue;
    await tx.services.remove(vault.id, host);
    a.change("remove", "service", host, `remove service ${host}`);
  }
}

async function applyService(a: Applying, s: ServiceSpec, cur: ServiceRow | undefined): Promise<void> {
  const { vault, tx } = a;
  const row = toRow(vault.id, s.host, s.description, s.auth, s.enabled, s.rules, s.from);
  const next = viewService({ ...row, updatedAt: a.now });
  const mode = s.rules_mode ?? null;
  const modeNow = cur?.rulesMode ?? null;
  const modeWords = mode !== modeNow ? [`rules mode ${modeNow ?? "the vault's"} → ${mode ?? "the vault's"}`] : [];
  if (!cur) {
    await tx.services.put(row, a.now);
    if (mode) await tx.policyModes.setServiceMode(vault.id, s.host, mode);
    return a.change("add", "service", s.host, `add service ${s.host} (${serviceWords(next)}${mode ? `, rules mode ${mode}` : ""})`);
  }
  const diff = [...serviceDiff(viewService(cur), next), ...modeWords];
  if (diff.length === 0) return;
  await tx.services.put(row, a.now); // a put keeps the row's rules mode; set apart below
  if (modeWords.length) await tx.policyModes.setServiceMode(vault.id, s.host, mode);
  a.change("change", "service", s.host, `change service ${s.host}: ${diff.join("; ")}`);
}

export async function applyWebhooks(a: Applying): Promise<void> {
  const { spec, vault, tx } = a;
  if (!spec.webhooks) return;
  const current = await tx.webhooks.list(vault.id);
  const taken = new Set<number>();
  const match = spec.webhooks.map(() => undefined as (typeof current)[number] | undefined);
  // Whole URLs first, then the hidden ones by their mask, so a hidden entry never takes a webhook a whole URL names.
  spec.webhooks.forEach((w, i) => {
    if (!("url" in w)) return;
    match[i] = current.find((c) => !taken.has(c.id) && c.url === w.url);
    if (match[i]) taken.add(match[i]!.id);
  });
  spec.webhooks.forEach((w, i) => {
    if (!("hidden" in w)) return;
    match[i] = current.find((c) => !taken.has(c.id) && maskWebhookReceiver(c.url) === w.hidden);
    if (match[i]) taken.add(match[i]!.id);
  });
  for (const c of current) {
    if (taken.has(c.id)) continue;
    await tx.webhooks.remove(vault.id, c.id);
    a.change("remove", "webhook", maskWebhookReceiver(c.url), `remove webhook ${maskWebhookReceiver(c.url)}`);
  }
  for (const [i, w] of spec.webhooks.entries()) {
    const found = match[i];
    const shown = found ? maskWebhookReceiver(found.url) : "url" in w ? maskWebhookReceiver(w.url) : w.hidden;
    if (found && found.format === w.format) continue;
    if (!found && "hidden" in w) {
      a.pend(
        "webhook",
        shown,
        `webhook ${shown}: the file hides its URL, so it cannot be added here; write it in full, or as \${NAME} for broker apply to read from the environment`,
      );
      continue;
    }
    // A new receiver, or a new format (the webhook is added again, with a new signing secret).
    if (found) await tx.webhooks.remove(vault.id, found.id);
    const { secret } = await addWebhook(a.d, a.open, { url: found ? found.url : (w as { url: string }).url, format: w.format });
    a.secrets.push({ vault: vault.name, url: shown, secret });
    if (found) a.change("change", "webhook", shown, `webhook ${shown}: format ${found.format} → ${w.format} (a new signing secret)`);
    else a.change("add", "webhook", shown, `add webhook ${shown} (${w.format})`);
  }
}

type BudgetFields = Omit<BudgetRow, "id" | "createdAt" | "updatedAt">;

/** "the vault: 1000 requests, 200000 total tokens per day, soft at 80% (notify)". */
function budgetWords(b: BudgetFields, scope: string): string {
  const l = b.limits;
  const limits = [
    l.requests !== null && `${l.requests} requests`,
    l.inputTokens !== null && `${l.inputTokens} input tokens`,
    l.outputTokens !== null && `${l.outputTokens} output tokens`,
    l.totalTokens !== null && `${l.totalTokens} total tokens`,
    l.costMicros !== null && `cost ${l.costMicros / 1_000_000}`,
  ].filter(Boolean);
  const per = b.period === "none" ? "in all" : `per ${b.period}`;
  return `${scope}: ${limits.join(", ")} ${per}${b.softPercent !== null ? `, soft at ${b.softPercent}% (${b.softAction})` : ""}`;
}

/** What a budget counts, in words: "the vault", "agent ci-bot", "service api.openai.com", "hosts a.example, b.example". */
async function scopeWords(a: Applying, b: BudgetFields): Promise<string> {
  if (b.scope === "vault") return "the vault";
  if (b.scope === "agent") return `agent ${(await a.tx.agents.byId(Number(b.scopeRef)))?.name ?? b.scopeRef}`;
  if (b.scope === "service") return `service ${b.scopeRef}`;
  return `hosts ${(JSON.parse(b.scopeRef ?? "[]") as string[]).join(", ")}`;
}

async function budgetDiff(a: Applying, now: BudgetFields, next: BudgetFields): Promise<string[]> {
  const out: string[] = [];
  const say = (what: string, a: unknown, b: unknown) => {
    if (stable(a) !== stable(b)) out.push(`${what} ${a ?? "none"} → ${b ?? "none"}`);
  };
  if (now.scope !== next.scope || now.scopeRef !== next.scopeRef) out.push(`counts ${await scopeWords(a, now)} → ${await scopeWords(a, next)}`);
  say("period", now.period, next.period);
  say("requests", now.limits.requests, next.limits.requests);
  say("input_tokens", now.limits.inputTokens, next.limits.inputTokens);
  say("output_tokens", now.limits.outputTokens, next.limits.outputTokens);
  say("total_tokens", now.limits.totalTokens, next.limits.totalTokens);
  const money = (m: number | null) => (m === null ? null : m / 1_000_000);
  say("cost", money(now.limits.costMicros), money(next.limits.costMicros));
  say("soft_percent", now.softPercent, next.softPercent);
  say("soft_action", now.softAction, next.softAction);
  return out;
}

export async function applyBudgets(a: Applying): Promise<void> {
  const { spec, vault, tx } = a;
  if (!spec.budgets) return;
  const current = new Map((await tx.budgets.list(vault.id)).map((b) => [b.name, b]));
  for (const [name, body] of Object.entries(spec.budgets)) {
    const cur = current.get(name);
    current.delete(name);
    let row: BudgetFields;
    try {
      row = await budgetRowFor(a.d, vault, name, body); // an agent's budget needs the agent's role, given above
    } catch (err) {
      if (!(err instanceof InvalidRequest)) throw err;
      a.pend("budget", name, `budget ${name}: ${err.message}; it is set by an apply once that is so`);
      continue;
    }
    if (!cur) {
      await tx.budgets.put(row, a.now);
      a.change("add", "budget", name, `add budget ${name} (${budgetWords(row, await scopeWords(a, row))})`);
      continue;
    }
    const diff = await budgetDiff(a, cur, row);
    if (diff.length === 0) continue;
    await tx.budgets.put(row, a.now); // what it counted this period stays
    a.change("change", "budget", name, `change budget ${name}: ${diff.join("; ")}`);
  }
  for (const name of current.keys()) {
    await tx.budgets.remove(vault.id, name);
    a.change("remove", "budget", name, `remove budget ${name}`);
  }
}

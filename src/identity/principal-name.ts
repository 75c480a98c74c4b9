// Names a stored principal id for people (proposal pages, webhook events): an email or an agent's
// name, never the raw `agent:1`. A leaf under the domain operations that need it.

import type { Domain } from "./context.ts";

export type PrincipalKind = "agent" | "user" | "unknown";

/** Names a stored principal id (`user:N`, `agent:N`) for people: an email or an agent's name. */
export async function namePrincipal(d: Domain, id: string): Promise<{ name: string; kind: PrincipalKind }> {
  const m = /^(user|agent):(\d{1,15})$/.exec(id);
  if (m?.[1] === "agent") return { name: (await d.store.agents.byId(Number(m[2])))?.name ?? "a removed agent", kind: "agent" };
  if (m?.[1] === "user") return { name: (await d.store.users.byId(Number(m[2])))?.email ?? "a removed user", kind: "user" };
  return { name: "unknown", kind: "unknown" };
}

export type RequesterKind = PrincipalKind | "session";

/**
 * Who filed a proposal or sent a held request: a person, an agent, or a `vault run` session acting for
 * one (`viaSession`), which must not read as the person's own doing.
 */
export async function nameRequester(d: Domain, id: string, viaSession: boolean): Promise<{ name: string; kind: RequesterKind }> {
  const who = await namePrincipal(d, id);
  return viaSession && who.kind !== "unknown" ? { name: who.name, kind: "session" } : who;
}

/** The words before the requester's name: "the agent ", "a `broker vault run` session of ", or none. */
export function requesterPrefix(kind: RequesterKind): string {
  return kind === "agent" ? "the agent " : kind === "session" ? "a `broker vault run` session of " : "";
}

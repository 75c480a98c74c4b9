// Row builders shared by the store conformance tests (conformance*.test.ts).

import type { AuditRow, SessionRow, Store, UserRow } from "../../../src/store/index.ts";

/** `n` deterministic bytes starting at `seed`; 256 or more of them hold every byte value, NUL and 0xff included. */
export function bytes(n: number, seed: number): Uint8Array {
  return Uint8Array.from({ length: n }, (_, i) => (seed + i) & 0xff);
}

export function addUser(store: Pick<Store, "users">, email: string, role: UserRow["role"] = "member"): Promise<UserRow> {
  return store.users.create({ email, passwordHash: bytes(32, 0), passwordSalt: bytes(16, 0), passwordParams: "{}", role, createdAt: 1 });
}

/** A session row tagged `tag` (public id ses_<tag>, token hash hash-<tag>); a user session unless overridden. */
export function newSession(tag: string, over: Partial<Omit<SessionRow, "id" | "revokedAt">> = {}): Omit<SessionRow, "id" | "revokedAt"> {
  return {
    publicId: `ses_${tag}`,
    tokenHash: `hash-${tag}`,
    kind: "user",
    userId: null,
    agentId: null,
    vaultId: null,
    role: null,
    createdAt: 10,
    expiresAt: null,
    lastSeenAt: 10,
    contained: false,
    channel: null,
    clientAgent: null,
    clientAddress: null,
    ...over,
    ...(over.createdAt !== undefined && over.lastSeenAt === undefined ? { lastSeenAt: over.createdAt } : {}),
  };
}

export function auditRow(over: Partial<Omit<AuditRow, "id">> = {}): Omit<AuditRow, "id"> {
  return {
    at: 1,
    principal: "user:1",
    vaultId: 1,
    vault: "v",
    ingress: "proxy",
    method: "GET",
    host: "api.example.com",
    path: "/",
    service: "api.example.com",
    credentialKeys: "K",
    credentialRefs: null, // as list() returns a row without references
    chainSeq: null, // written without the audit writer: outside any chain
    chainPrev: null,
    chainHash: null,
    llmModel: null, // not an LLM call, as list() returns a row without usage
    inputTokens: null,
    outputTokens: null,
    totalTokens: null,
    costMicros: null,
    workloadIssuer: null, // not a workload's request
    workloadSubject: null,
    status: 200,
    bytesIn: 10,
    bytesOut: 20,
    durationMs: 3,
    error: null,
    contained: false,
    approvedBy: null,
    ...over,
  };
}

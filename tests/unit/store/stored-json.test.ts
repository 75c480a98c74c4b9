// JSON columns are parsed and checked once, when the store reads the row, on every backend: a proposal's
// services and credential slots and a held request's headers come back typed, stored as the same JSON
// text as before (existing databases read as they are), and a row altered outside the broker (text that
// is not JSON, or JSON of another shape) is refused at read with CorruptRow naming table, row and column.

import { expect, test } from "bun:test";
import { CorruptRow, type ProposedService, type ProposedSlot, type Store } from "../../../src/store/index.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";

const SERVICES: ProposedService[] = [
  {
    action: "set",
    host: "api.github.com",
    description: "GitHub",
    auth: { type: "bearer", token: "GH_TOKEN" },
    rules: [
      { methods: ["GET"], paths: ["/repos/**"] },
      { methods: ["POST"], paths: ["/repos/*/issues"], approve: "each" },
    ],
  },
  {
    action: "set",
    host: "api.example.com",
    description: "",
    auth: {
      type: "oauth2_client_credentials",
      client_id: "CID",
      client_secret: "CSECRET",
      token_url: "https://auth.example.com/token",
      scopes: ["read", "write"],
      client_auth: "post",
    },
  },
];
const SLOTS: ProposedSlot[] = [
  { action: "set", key: "GH_TOKEN", description: "a token", obtain: "https://github.com/settings/tokens", obtain_instructions: "repo scope" },
  { action: "set", key: "CID", description: "", obtain: "", obtain_instructions: "" },
];

async function propose(store: Store, vaultId: number, tag: string) {
  return store.proposals.create({
    vaultId,
    message: "m",
    userMessage: "u",
    services: SERVICES,
    credentials: SLOTS,
    createdBy: "agent:1",
    createdAt: 10,
    expiresAt: 1000,
    approvalTokenHash: `appr-${tag}`,
    approvalExpiresAt: 500,
  });
}

const heldRow = (vaultId: number) => ({
  publicId: "apr_AAAAAAAAAAAAAAAA",
  vaultId,
  principal: "agent:1",
  viaSession: false,
  fingerprint: "f".repeat(64),
  method: "POST",
  host: "api.example.com",
  target: "/v1/refunds",
  service: "api.example.com",
  headers: [["content-type", "application/json"]] as [string, string][],
  bodyPreview: null,
  bodyBytes: 0,
  bodySha256: "e".repeat(64),
  createdAt: 100,
  expiresAt: 1000,
  sealedNonce: null,
  sealedDescription: null,
});

/** What reading the row refuses with: CorruptRow, its message naming the table, row, column and problem. */
async function expectCorrupt(read: Promise<unknown>, table: string, id: number, column: string, problem: string) {
  const err = await read.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CorruptRow);
  expect(err).toMatchObject({ table, rowId: id, column });
  expect((err as CorruptRow).message).toBe(`${table} row ${id}: ${column} ${problem}; the row was changed outside the broker or is damaged`);
}

forEachBackend((backend) => {
  test("proposals: services and slots come back typed, stored as the same JSON text as before", async () => {
    const store = await backend.open();
    const v = await store.vaults.create("v", 1);
    const p = await propose(store, v.id, "1");
    expect(p.services).toEqual(SERVICES);
    expect(p.credentials).toEqual(SLOTS);
    expect(await store.proposals.byId(p.id)).toEqual(p);
    // The columns hold what JSON.stringify wrote before the store parsed them: the database format is unchanged.
    const raw = await store.db.get<{ services: string; credentials: string }>("SELECT services, credentials FROM proposals WHERE id = ?", [p.id]);
    expect(raw).toEqual({ services: JSON.stringify(SERVICES), credentials: JSON.stringify(SLOTS) });
    // A row written as an older broker wrote it (the text put there directly) reads the same.
    await store.db.run("UPDATE proposals SET services = ?, credentials = ? WHERE id = ?", [
      '[{"action":"set","host":"h.example","description":"","auth":{"type":"passthrough"}}]',
      "[]",
      p.id,
    ]);
    expect(await store.proposals.byId(p.id)).toMatchObject({
      services: [{ action: "set", host: "h.example", description: "", auth: { type: "passthrough" } }],
      credentials: [],
    });
  });

  test("proposals: a row whose JSON was altered is refused at read, by every reader, naming what is wrong", async () => {
    const store = await backend.open();
    const v = await store.vaults.create("v", 1);
    const p = await propose(store, v.id, "1");
    const tamper = (column: "services" | "credentials", text: string) => store.db.run(`UPDATE proposals SET ${column} = ? WHERE id = ?`, [text, p.id]);

    await tamper("services", "[{not json");
    await expectCorrupt(store.proposals.byId(p.id), "proposals", p.id, "services", "is not valid JSON");
    await expectCorrupt(store.proposals.list(v.id, null, 10), "proposals", p.id, "services", "is not valid JSON");
    await expectCorrupt(store.proposals.expireReturning(2000), "proposals", p.id, "services", "is not valid JSON");

    const wrong: [column: "services" | "credentials", value: unknown, problem: string][] = [
      ["services", { host: "api.github.com" }, "must be a list"],
      ["services", [{ ...SERVICES[0], auth: undefined }], "at [0] lacks auth"],
      ["services", [{ ...SERVICES[0], auth: { type: "telepathy", token: "K" } }], "at [0].auth.type has the wrong type"],
      ["services", [{ ...SERVICES[0], auth: { type: "bearer", token: 7 } }], "at [0].auth.token has the wrong type"],
      ["services", [SERVICES[1], { ...SERVICES[0], auth: { type: "bearer", token: "K", extra: "x" } }], 'at [1].auth has an unknown field "extra"'],
      ["services", [{ ...SERVICES[0], rules: [{ methods: "GET", paths: ["/"] }] }], "at [0].rules[0].methods has the wrong type"],
      ["services", [{ ...SERVICES[0], action: "delete" }], "at [0].action has the wrong type"],
      ["services", [null], "at [0] must be an object"],
      ["credentials", [{ key: "K" }], "at [0] lacks action"],
      ["credentials", [{ ...SLOTS[0], value: "sk-live-1" }], 'at [0] has an unknown field "value"'],
      ["credentials", "GH_TOKEN", "must be a list"],
    ];
    for (const [column, value, problem] of wrong) {
      await tamper("services", JSON.stringify(SERVICES));
      await tamper("credentials", JSON.stringify(SLOTS));
      await tamper(column, JSON.stringify(value));
      await expectCorrupt(store.proposals.byId(p.id), "proposals", p.id, column, problem);
    }
    // The message names the place, never the stored value.
    await tamper("credentials", JSON.stringify([{ ...SLOTS[0], key: 12345 }]));
    const err = await store.proposals.byId(p.id).catch((e: unknown) => e);
    expect(String((err as Error).message)).not.toContain("12345");
  });

  test("request approvals: headers come back typed, and altered headers are refused at read", async () => {
    const store = await backend.open();
    const v = await store.vaults.create("v", 1);
    const held = await store.requestApprovals.create(heldRow(v.id));
    expect(held.headers).toEqual([["content-type", "application/json"]]);
    expect(await store.db.get<{ headers: string }>("SELECT headers FROM request_approvals WHERE id = ?", [held.id])).toEqual({
      headers: '[["content-type","application/json"]]',
    });
    for (const [text, problem] of [
      ["nope", "is not valid JSON"],
      ['{"content-type":"application/json"}', "must be a list"],
      ['[["content-type"]]', "at [0] must be a [name, value] pair of text"],
      ['[["x-n", 1]]', "at [0] must be a [name, value] pair of text"],
    ] as const) {
      await store.db.run("UPDATE request_approvals SET headers = ? WHERE id = ?", [text, held.id]);
      await expectCorrupt(store.requestApprovals.byPublicId(held.publicId), "request_approvals", held.id, "headers", problem);
      await expectCorrupt(store.requestApprovals.list(v.id, 0, 10), "request_approvals", held.id, "headers", problem);
    }
  });
});

// `broker doctor`'s check of the secret store connections, when it is signed in as the running broker's owner:
// each connection reads every reference through it again at once (POST /v1/secret-stores/{name}/check),
// and each is reported ok, or a problem naming the references that fail and why. Names and the broker's
// words only, never a value.

import type { SecretStoreCheckBody, SecretStoreConnectionListBody } from "../../contract/index.ts";
import { apiPath, type Client } from "./client.ts";
import type { Finding } from "./doctor-checks.ts";
import { kindWords, referenceStatus } from "./secret-store-words.ts";

export async function checkSecretStores(owner: Client): Promise<Finding[]> {
  let connections: SecretStoreConnectionListBody["connections"];
  try {
    ({ connections } = await owner.request<SecretStoreConnectionListBody>("GET", "/v1/secret-stores"));
  } catch (err) {
    return [
      {
        check: "secret stores",
        level: "warning",
        message: `the running broker did not list its connections: ${(err as Error).message}`,
        fix: "check the server's log",
      },
    ];
  }
  const findings: Finding[] = [];
  for (const c of connections) {
    const check = `secret store ${c.name}`;
    let res: SecretStoreCheckBody;
    try {
      res = await owner.request<SecretStoreCheckBody>("POST", apiPath("v1", "secret-stores", c.name, "check"));
    } catch (err) {
      findings.push({ check, level: "problem", message: `could not be checked: ${(err as Error).message}`, fix: "check the server's log" });
      continue;
    }
    const failed = res.references.filter((r) => referenceStatus(r.reference) !== "ok");
    if (res.references.length === 0) {
      findings.push({ check, level: "ok", message: `${kindWords(c.kind)}; no credential refers to it yet, so nothing was read` });
    } else if (res.ok && failed.length === 0) {
      findings.push({ check, level: "ok", message: `${kindWords(c.kind)}; all ${res.references.length} reference(s) read` });
    } else {
      const why = failed.map((r) => `${r.vault}/${r.key} (${r.reference.text}): ${r.reference.last_error ?? "not read yet"}`).join("; ");
      findings.push({
        check,
        level: "problem",
        message: `${failed.length} of ${res.references.length} reference(s) fail: ${why}`,
        fix: `fix the secret in the store, or the connection (\`broker secret-store set ${c.name} …\`); \`broker secret-store check ${c.name}\` reads them again`,
      });
    }
  }
  return findings;
}

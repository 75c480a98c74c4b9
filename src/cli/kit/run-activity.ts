// What `vault run` tells its agent on stderr: each host it reached through a blind tunnel (not a service of
// the vault, so no credential), once, with how to ask for access; and, when the command ends with a known
// "TLS certificate not verified" exit code, why. Reads GET /v1/sessions/{id}/activity with the run's own
// session (a long poll: one request per ~25 s, answered at once when a new host appears). Never prints a token.

import { basename } from "node:path";
import type { SessionActivityBody } from "../../contract/index.ts";
import { printNote } from "./output.ts";

const WAIT_SECONDS = 25;
/** Polls that come back early with nothing new (an older server answers at once) are spaced this far apart. */
const MIN_INTERVAL_MS = 2_000;

export interface RunActivityOptions {
  readonly addr: string;
  readonly token: string; // SECRET: never log (the run's scoped session)
  readonly sessionId: string;
  readonly vault: string;
  readonly write?: (line: string) => void;
}

export interface RunActivity {
  /** Stops watching, prints what is left, and says why a TLS failure happened if `code` looks like one. */
  finish(command: readonly string[], code: number, noProxy: string | undefined): Promise<void>;
}

export function watchRunActivity(o: RunActivityOptions): RunActivity {
  const write = o.write ?? printNote;
  const stop = new AbortController();
  let printed = 0;
  let latest: SessionActivityBody | undefined;

  async function poll(wait: number): Promise<SessionActivityBody | undefined> {
    const url = `${o.addr}/v1/sessions/${encodeURIComponent(o.sessionId)}/activity?after=${printed}&wait=${wait}`;
    const res = await fetch(url, { headers: { authorization: `Bearer ${o.token}` }, signal: wait > 0 ? stop.signal : undefined });
    if (!res.ok) {
      await res.body?.cancel();
      return undefined;
    }
    const body = (await res.json()) as SessionActivityBody;
    for (const h of body.unmatched_hosts.slice(printed)) write(unmatchedLine(h, o.vault, o.addr));
    printed = Math.max(printed, body.unmatched_hosts.length);
    latest = body;
    return body;
  }

  const loop = (async () => {
    while (!stop.signal.aborted) {
      const started = Date.now();
      const before = printed;
      const answer = await poll(WAIT_SECONDS).catch(() => undefined);
      const early = MIN_INTERVAL_MS - (Date.now() - started);
      if (!stop.signal.aborted && printed === before && early > 0) await sleep(answer ? early : 10_000, stop.signal);
    }
  })();

  return {
    async finish(command, code, noProxy) {
      stop.abort();
      await loop;
      // Written by the broker when the CONNECT arrived, so a host the command reached last is there by now.
      await poll(0).catch(() => undefined);
      const why = tlsFailure(command, code);
      if (why) write(tlsHint(why, latest, o.vault, noProxy));
    },
  };
}

function unmatchedLine(h: SessionActivityBody["unmatched_hosts"][number], vault: string, addr: string): string {
  const template = (h.proposal_hint as { template?: { id?: unknown } }).template?.id;
  const what = typeof template === "string" ? `a proposal for the template ${template} (read only, to start)` : "a proposal";
  return (
    `broker: ${h.host} is not a service of vault ${vault}: it was reached through a blind tunnel, without a credential. ` +
    `To ask for access, file ${what}: POST ${addr}/v1/proposals (the body: curl ${addr}/v1/skills/agent, or a 403's proposal_hint; MCP: propose_access)`
  );
}

/** What a known exit code says about TLS verification, or undefined. */
export function tlsFailure(command: readonly string[], code: number): string | undefined {
  const program = basename(command[0] ?? "");
  if (code === 60) return `exit code 60${program === "curl" ? "" : " (if it is curl's)"}: the TLS certificate was not verified`;
  if (code === 5 && program === "wget") return "wget's exit code 5: the TLS certificate was not verified";
  return undefined;
}

function tlsHint(why: string, seen: SessionActivityBody | undefined, vault: string, noProxy: string | undefined): string {
  const bypass = `${noProxy ? `NO_PROXY=${noProxy}, ` : ""}--noproxy, or a proxy setting of its own`;
  if (seen && seen.connects === 0)
    return (
      `broker: ${why}, and nothing went through the broker: the command reached the host directly (${bypass}), ` +
      `where the broker's CA does not apply and no credential is added. Let it use HTTPS_PROXY: there a service of vault ${vault} is verified with the broker's CA and gets its credential.`
    );
  const blind = seen && seen.unmatched_hosts.length > 0 ? "a host that is not a service (blind tunnel, listed above) shows its own certificate; " : "";
  return (
    `broker: ${why}. Services of vault ${vault} verify with the broker's CA, in the file SSL_CERT_FILE and CURL_CA_BUNDLE name; ` +
    `${blind}a host reached directly (${bypass}) or checked against a --cacert of its own does not.`
  );
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done);
  });
}

// A small HTTP client for the broker API (docs/api.md) over fetch. It turns the JSON error
// envelope into a CliFailure carrying the server's message and a hint for the person at the
// terminal. Secrets in request bodies are revealed only while serialising onto the wire.

import { Secret } from "../../secret.ts";
import { VERSION } from "../../version.ts";
import { CliFailure } from "./fail.ts";

export const AGENT_TOKEN_PREFIX = "av_agt_";
/** Sent with every call, so a person's list of sessions can say "broker CLI 0.1.0" for a CLI login. */
export const CLI_USER_AGENT = `broker-cli/${VERSION}`;

export interface ClientOptions {
  readonly addr: string;
  readonly token?: Secret; // SECRET: never log
  /** Where the token came from, so a 401 hint can say what to fix. */
  readonly tokenSource?: "env" | "file";
  readonly fetch?: (req: Request) => Response | Promise<Response>;
}

export interface RequestOptions {
  readonly body?: unknown;
  /** The vault a vault-scoped call addresses: agent tokens must repeat it in X-Vault. */
  readonly vault?: string;
  /** Send no Authorization header even when a token is known. */
  readonly anonymous?: boolean;
  /** Send X-Vault with any token (the agent protocol endpoints read the vault from it for user sessions too). */
  readonly headerVault?: boolean;
  /** This call's own next step for a status, in place of the generic one (e.g. the command that lists what a 404 did not find). */
  readonly hints?: Readonly<Partial<Record<number, string>>>;
}

export interface Client {
  readonly addr: string;
  readonly hasToken: boolean;
  request<T = unknown>(method: string, path: string, opts?: RequestOptions): Promise<T>;
}

/** A failed API call: the envelope's code and message, plus the HTTP status. */
export class ApiFailure extends CliFailure {
  constructor(
    message: string,
    hint: string | undefined,
    readonly status: number,
    readonly code: string,
    readonly field?: string,
  ) {
    super(message, hint);
  }
}

export function createClient(opts: ClientOptions): Client {
  const send = opts.fetch ?? ((req: Request) => fetch(req));
  return {
    addr: opts.addr,
    hasToken: opts.token !== undefined,
    async request<T>(method: string, path: string, ro: RequestOptions = {}): Promise<T> {
      const headers = new Headers({ accept: "application/json", "user-agent": CLI_USER_AGENT });
      const token = ro.anonymous ? undefined : opts.token;
      if (token) headers.set("authorization", `Bearer ${token.reveal()}`);
      if (token && ro.vault && (ro.headerVault || isAgentToken(token))) headers.set("x-vault", ro.vault);
      let body: string | undefined;
      if (ro.body !== undefined) {
        headers.set("content-type", "application/json");
        body = serialiseBody(ro.body);
      }
      let res: Response;
      try {
        res = await send(new Request(`${opts.addr}${path}`, { method, headers, body, redirect: "manual" }));
      } catch (err) {
        throw unreachable(opts.addr, err);
      }
      if (res.ok) return (res.status === 204 ? undefined : await readJson(res)) as T;
      throw await toFailure(res, { addr: opts.addr, hadToken: token !== undefined, tokenSource: opts.tokenSource, vault: ro.vault, hints: ro.hints });
    },
  };
}

export function isAgentToken(token: Secret): boolean {
  return token.reveal().startsWith(AGENT_TOKEN_PREFIX);
}

/** Encodes each segment, so names and hosts (`*.example.com`, `host:8443`) cannot alter the path. */
export function apiPath(...segments: string[]): string {
  return `/${segments.map((s) => encodeURIComponent(s)).join("/")}`;
}

export function vaultPath(vault: string, ...segments: string[]): string {
  return apiPath("v1", "vaults", vault, ...segments);
}

/** JSON.stringify calls toJSON (which redacts) before a replacer, so the replacer reads the holder's raw value. */
export function serialiseBody(body: unknown): string {
  return JSON.stringify(body, function (this: Record<string, unknown>, key, value) {
    const raw = this[key];
    return raw instanceof Secret ? raw.reveal() : value;
  });
}

/** More than any broker answer holds (an audit page of 1,000 records is well under 1 MiB). */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

async function readJson(res: Response): Promise<unknown> {
  const text = await cappedText(res);
  if (text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new CliFailure(`the server answered ${res.status} with a body that is not JSON`, "check that the address points at a broker");
  }
}

/** The answer as text, read no further than MAX_ANSWER_BYTES: an address (an invite link) may lead to anything. */
async function cappedText(res: Response): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > MAX_ANSWER_BYTES) {
      await reader.cancel();
      throw new CliFailure(
        `the server's answer is larger than ${MAX_ANSWER_BYTES} bytes, more than any broker sends`,
        "check that the address points at a broker",
      );
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function unreachable(addr: string, err: unknown): CliFailure {
  const code = (err as { code?: unknown } | undefined)?.code;
  const why = code === "ConnectionRefused" || code === "ECONNREFUSED" ? "connection refused" : err instanceof Error ? err.message : String(err);
  return new CliFailure(
    `cannot reach the broker at ${addr}: ${why}`,
    `is the server running at ${addr}? start it with \`broker server\`, or pass --address / set BROKER_ADDR`,
  );
}

interface FailureContext {
  readonly addr: string;
  readonly hadToken: boolean;
  readonly tokenSource: "env" | "file" | undefined;
  readonly vault: string | undefined;
  readonly hints: RequestOptions["hints"];
}

async function toFailure(res: Response, ctx: FailureContext): Promise<ApiFailure> {
  let envelope: { error?: unknown; message?: unknown; field?: unknown; retry_after?: unknown } = {};
  try {
    envelope = (await res.json()) as typeof envelope;
  } catch {
    // Not the broker's envelope (a proxy in between, or not a broker at all): fall back to the status.
  }
  const code = typeof envelope.error === "string" ? envelope.error : `http_${res.status}`;
  const field = typeof envelope.field === "string" ? envelope.field : undefined;
  const text = typeof envelope.message === "string" ? envelope.message : res.statusText || "request failed";
  const message = `${text} (${res.status} ${code}${field ? `, field ${field}` : ""})`;
  // A missing vault is a 404 too: the call's own hint (what lists the item) would send the person the wrong way.
  const own = res.status === 404 && text.startsWith("vault not found") ? undefined : ctx.hints?.[res.status];
  return new ApiFailure(message, own ?? hintFor(res, ctx, envelope.retry_after), res.status, code, field);
}

function hintFor(res: Response, ctx: FailureContext, retryAfter: unknown): string | undefined {
  switch (res.status) {
    case 401:
      if (!ctx.hadToken) return "you are not logged in: run `broker auth login --email <you>` (or `broker auth register` on a new broker)";
      if (ctx.tokenSource === "env") return "BROKER_SESSION_TOKEN is invalid, expired or revoked: unset it, or log in again with `broker auth login`";
      return "your session is invalid, expired or revoked: log in again with `broker auth login`";
    case 403:
      return ctx.vault ? `your role in vault "${ctx.vault}" does not allow this; a vault admin can change it` : "your account or role does not allow this";
    case 404:
      return ctx.vault ? "check the names: `broker vault list` shows your vaults" : undefined;
    case 409:
      return "it already exists: pick another name, or remove the existing one first";
    case 429: {
      const after = typeof retryAfter === "number" ? retryAfter : Number(res.headers.get("retry-after"));
      return Number.isFinite(after) && after > 0 ? `wait ${after} s and try again` : "wait a moment and try again";
    }
    case 503:
      return "the broker is locked or busy: check the server's log";
    default:
      return res.status >= 500 ? `the server failed; its log at ${ctx.addr} has details` : undefined;
  }
}

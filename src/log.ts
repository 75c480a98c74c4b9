// Structured logger: one JSON line per event, with levels. It cannot print a secret:
// Secret values serialise as "[redacted]", fields with secret-sounding names are dropped to
// "[redacted]", anything shaped like a broker token is masked wherever it appears, and (defence in
// depth) every credential value the server currently holds in memory is replaced before a line is
// written, whatever path put it there.

import { REDACTED } from "./secret.ts";

export type LogLevel = "debug" | "info" | "warn" | "error";
export const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];

export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(event: string, fields?: LogFields): void;
  info(event: string, fields?: LogFields): void;
  warn(event: string, fields?: LogFields): void;
  error(event: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
  /** The same logger, also replacing every value `secrets` currently yields in each line it writes. */
  scrubbing(secrets: LiveSecrets): Logger;
}

/** The credential values in memory right now (the egress plan cache). */
export interface LiveSecrets {
  /** SECRET: revealed values, used only as search patterns; never stored by the logger. */
  values(): Iterable<string>;
}

/** Values shorter than this are not searched for (they would mangle every line without protecting anything). */
const MIN_SCRUBBED_LENGTH = 4;

export interface LoggerOptions {
  level?: LogLevel;
  write?: (line: string) => void;
  now?: () => number;
  secrets?: readonly LiveSecrets[];
}

const SENSITIVE_FIELD = /pass(word)?|secret|token|authorization|cookie|credential_value|^value$|data_?key/i;
const TOKEN_SHAPE = /av_(?:sess|agt|inv|appr|uinv)_[A-Za-z0-9_-]+/g;

function maskString(s: string): string {
  return s.replace(TOKEN_SHAPE, (m) => `${m.slice(0, m.indexOf("_", 3) + 1)}${REDACTED}`);
}

function sanitise(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return maskString(value);
  if (value === null || typeof value !== "object") return value;
  if (depth > 4) return "[truncated]";
  if (value instanceof Error) return { name: value.name, message: maskString(value.message) };
  if (value instanceof Uint8Array) return `[${value.byteLength} bytes]`;
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") return sanitise((value as { toJSON(): unknown }).toJSON(), depth + 1);
  if (Array.isArray(value)) return value.map((v) => sanitise(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = SENSITIVE_FIELD.test(k) ? REDACTED : sanitise(v, depth + 1);
  return out;
}

export function createLogger(opts: LoggerOptions = {}, base: LogFields = {}): Logger {
  const threshold = LOG_LEVELS.indexOf(opts.level ?? "info");
  const write = opts.write ?? ((line: string) => process.stderr.write(`${line}\n`));
  const now = opts.now ?? Date.now;
  const emit = (level: LogLevel, event: string, fields?: LogFields) => {
    if (LOG_LEVELS.indexOf(level) < threshold) return;
    const record = sanitise({ ...base, ...fields }) as LogFields;
    const line = JSON.stringify({ time: new Date(now()).toISOString(), level, event: maskString(event), ...record });
    write(opts.secrets?.length ? scrubLine(line, opts.secrets) : line);
  };
  return {
    debug: (e, f) => emit("debug", e, f),
    info: (e, f) => emit("info", e, f),
    warn: (e, f) => emit("warn", e, f),
    error: (e, f) => emit("error", e, f),
    child: (fields) => createLogger(opts, { ...base, ...fields }),
    scrubbing: (secrets) => createLogger({ ...opts, secrets: [...(opts.secrets ?? []), secrets] }, base),
  };
}

/** Replaces each live value, as written and as JSON escapes it, in a serialised line. */
function scrubLine(line: string, sources: readonly LiveSecrets[]): string {
  let out = line;
  for (const source of sources) {
    for (const value of source.values()) {
      if (value.length < MIN_SCRUBBED_LENGTH) continue;
      const escaped = JSON.stringify(value).slice(1, -1);
      if (out.includes(value)) out = out.split(value).join(REDACTED);
      if (escaped !== value && out.includes(escaped)) out = out.split(escaped).join(REDACTED);
    }
  }
  return out;
}

/** A logger that keeps lines in memory: for tests that assert nothing secret was logged. */
export function createMemoryLogger(level: LogLevel = "debug"): Logger & { lines: string[] } {
  const lines: string[] = [];
  return Object.assign(createLogger({ level, write: (l) => lines.push(l) }), { lines });
}

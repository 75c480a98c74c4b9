// Structured logger: one JSON line per event, with levels. It cannot print a secret:
// Secret values serialise as "[redacted]", fields with secret-sounding names are dropped to
// "[redacted]", and anything shaped like a broker token is masked wherever it appears.

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
}

export interface LoggerOptions {
  level?: LogLevel;
  write?: (line: string) => void;
  now?: () => number;
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
    write(JSON.stringify({ time: new Date(now()).toISOString(), level, event: maskString(event), ...record }));
  };
  return {
    debug: (e, f) => emit("debug", e, f),
    info: (e, f) => emit("info", e, f),
    warn: (e, f) => emit("warn", e, f),
    error: (e, f) => emit("error", e, f),
    child: (fields) => createLogger(opts, { ...base, ...fields }),
  };
}

/** A logger that keeps lines in memory: for tests that assert nothing secret was logged. */
export function createMemoryLogger(level: LogLevel = "debug"): Logger & { lines: string[] } {
  const lines: string[] = [];
  return Object.assign(createLogger({ level, write: (l) => lines.push(l) }), { lines });
}

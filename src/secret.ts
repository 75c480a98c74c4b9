// Secret: the only carrier for credential values, passwords and key material in memory.
// Every printing path (String, JSON, inspect, template literals) yields "[redacted]";
// reading the value is one greppable call, `reveal()`, whose call sites are reviewed.

export const REDACTED = "[redacted]";

const inspectCustom = Symbol.for("nodejs.util.inspect.custom");

export class Secret<T extends string | Uint8Array = string> {
  readonly #value: T;

  constructor(value: T) {
    this.#value = value;
  }

  /** Returns the raw value. Every call site must be justified: it is where a secret leaves the wrapper. */
  reveal(): T {
    return this.#value;
  }

  toString(): string {
    return REDACTED;
  }

  toJSON(): string {
    return REDACTED;
  }

  [Symbol.toPrimitive](): string {
    return REDACTED;
  }

  [inspectCustom](): string {
    return REDACTED;
  }
}

/** Overwrites key material we no longer need, so it does not linger in the heap. */
export function wipe(bytes: Uint8Array): void {
  bytes.fill(0);
}

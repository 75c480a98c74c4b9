// JSON kept in a text column (a proposal's services and credential slots, a held request's headers) is
// parsed and checked once, when the store reads the row, so every reader gets typed values and a row
// that is not what the store writes (altered by hand, damaged) is refused here, naming the table, the
// row and the column, never the value. The checks are of shape only: what a value may say (a host
// pattern, an https URL) was checked by the domain before the row was written.

/** A stored row whose JSON column is not valid JSON, or not of the shape the store writes. */
export class CorruptRow extends Error {
  constructor(
    readonly table: string,
    readonly rowId: number,
    readonly column: string,
    readonly problem: string,
  ) {
    super(`${table} row ${rowId}: ${column} ${problem}; the row was changed outside the broker or is damaged`);
    this.name = "CorruptRow";
  }
}

/** What a shape check throws: where in the value (`[0].auth.type`) and what is wrong there. */
export class ShapeMismatch extends Error {
  constructor(
    readonly at: string,
    readonly problem: string,
  ) {
    super(`${at} ${problem}`);
  }
}

/** Parses column `column` of row `rowId` and checks it with `check`, which narrows the value or throws ShapeMismatch. */
export function parseStoredJson<T>(table: string, rowId: number, column: string, text: unknown, check: (v: unknown, at: string) => asserts v is T): T {
  if (typeof text !== "string") throw new CorruptRow(table, rowId, column, "is not text");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new CorruptRow(table, rowId, column, "is not valid JSON");
  }
  try {
    check(value, "");
  } catch (err) {
    if (err instanceof ShapeMismatch) throw new CorruptRow(table, rowId, column, `${err.at ? `at ${err.at} ` : ""}${err.problem}`);
    throw err;
  }
  return value;
}

export function fail(at: string, problem: string): never {
  throw new ShapeMismatch(at, problem);
}

export const isText = (v: unknown): v is string => typeof v === "string";
export const isTextList = (v: unknown): v is string[] => Array.isArray(v) && v.every(isText);

export function assertObject(v: unknown, at: string): asserts v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) fail(at, "must be an object");
}

export function assertList(v: unknown, at: string): asserts v is unknown[] {
  if (!Array.isArray(v)) fail(at, "must be a list");
}

/**
 * Checks an object's fields against `fields` (each a test of the value): every key of `required` must be
 * present, and a key `fields` does not name is refused (a stray field would otherwise ride along into
 * what is written next, e.g. a service's auth settings).
 */
export function assertFields(o: Record<string, unknown>, at: string, fields: ReadonlyMap<string, (v: unknown) => boolean>, required: readonly string[]): void {
  for (const key of required) if (!Object.hasOwn(o, key)) fail(at, `lacks ${key}`);
  for (const [key, value] of Object.entries(o)) {
    const test = fields.get(key);
    if (!test) fail(at, `has an unknown field ${JSON.stringify(key.slice(0, 64))}`);
    if (!test(value)) fail(`${at}.${key}`.replace(/^\./, ""), "has the wrong type");
  }
}

// SQL stays parameterized: inside any SQL template literal in src/store, the only interpolation
// allowed is a module-level constant fragment such as `${COLUMNS}`, itself a fixed string; and on
// every backend, values that look like SQL (quotes, `?`, `$1`, comments) travel as data.

import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { numberPlaceholders } from "../../../src/store/postgres.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";

const STORE_DIR = join(import.meta.dir, "../../../src/store");
const SQL_VERB = /\b(SELECT|INSERT|UPDATE|DELETE)\b/;

/** Template literals of a source file, with the `${...}` expressions found inside each. */
function templateLiterals(src: string): { text: string; interpolations: string[] }[] {
  const out: { text: string; interpolations: string[] }[] = [];
  for (let i = 0; i < src.length; i++) {
    if (src[i] !== "`") continue;
    const start = i;
    const interpolations: string[] = [];
    for (i++; i < src.length && src[i] !== "`"; i++) {
      if (src[i] === "\\") i++;
      else if (src[i] === "$" && src[i + 1] === "{") {
        let depth = 1;
        const from = i;
        for (i += 2; i < src.length && depth > 0; i++) depth += src[i] === "{" ? 1 : src[i] === "}" ? -1 : 0;
        interpolations.push(src.slice(from, i));
        i--;
      }
    }
    out.push({ text: src.slice(start, i + 1), interpolations });
  }
  return out;
}

/** Names of module-level `const NAME = "..."` declarations whose value is a fixed string (no `${`). */
function fixedStringConstants(src: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of src.matchAll(/^const ([A-Z][A-Z0-9_]*)\s*=\s*(["'`])([\s\S]*?)\2;/gm)) {
    if (!m[3]!.includes("${")) out.set(m[1]!, m[3]!);
  }
  return out;
}

/** db.ts's placeholderRows(rows, width): numbers in, `(?, ?), (?, ?)` out; never data. */
const PLACEHOLDER_ROWS = /^\$\{placeholderRows\([\w.]+, [\w.]+\)\}$/;

/**
 * `${...}` expressions inside SQL template literals that are not fixed-string constants of the file
 * (nor placeholder rows). A template is SQL when its own text or a constant it interpolates has a verb.
 */
function sqlOffenders(src: string): string[] {
  const constants = fixedStringConstants(src);
  const allowed = new Set([...constants.keys()].map((name) => `\${${name}}`));
  const isSql = (t: { text: string; interpolations: string[] }) =>
    SQL_VERB.test(t.text) || t.interpolations.some((x) => SQL_VERB.test(constants.get(x.slice(2, -1)) ?? ""));
  return templateLiterals(src)
    .filter(isSql)
    .flatMap((t) => t.interpolations.filter((x) => !allowed.has(x) && !PLACEHOLDER_ROWS.test(x)).map((x) => `${x} in ${t.text.slice(0, 80)}`));
}

const files = readdirSync(STORE_DIR).filter((f) => f.endsWith(".ts"));

describe("src/store SQL", () => {
  test("the scanner finds the store's SQL templates and constants", () => {
    const all = files.flatMap((f) => templateLiterals(readFileSync(join(STORE_DIR, f), "utf8")));
    expect(all.filter((t) => SQL_VERB.test(t.text)).length).toBeGreaterThan(5);
    expect(templateLiterals("x = `SELECT ${a} FROM t WHERE b = ${`${c}`}`;")[0]!.interpolations).toEqual(["${a}", "${`${c}`}"]);
    const consts = fixedStringConstants('const COLUMNS = "a, b";\nconst BAD = `x ${y}`;\n  const INNER = "z";');
    expect([...consts.keys()]).toEqual(["COLUMNS"]);
    expect(fixedStringConstants(readFileSync(join(STORE_DIR, "credentials.ts"), "utf8")).has("COLUMNS")).toBe(true);
    const bad = "const COLUMNS = \"id\";\nconst f = (name) => sql.get(`SELECT ${COLUMNS} FROM vaults WHERE name = '${name}'`);";
    expect(sqlOffenders(bad)).toEqual(["${name} in `SELECT ${COLUMNS} FROM vaults WHERE name = '${name}'`"]);
    // The verb may sit in a constant; besides constants only placeholder rows are interpolated.
    const head = 'const HEAD = "INSERT INTO t (a) VALUES";\n';
    expect(sqlOffenders(`${head}sql.run(\`\${HEAD} \${rows}\`)`)).toEqual(["${rows} in `${HEAD} ${rows}`"]);
    expect(sqlOffenders(`${head}sql.run(\`\${HEAD} \${placeholderRows(n, 1)}\`)`)).toEqual([]);
  });

  // `${COLUMNS}` (and any other module-level constant SQL fragment, like a shared WHERE clause) is
  // fixed text written in the source; anything else interpolated into SQL could carry data.
  test.each(files)("%s: SQL template literals interpolate only fixed-string constants", (file) => {
    expect(sqlOffenders(readFileSync(join(STORE_DIR, file), "utf8"))).toEqual([]);
  });

  test.each(files)("%s: a COLUMNS constant, when present, is a fixed string", (file) => {
    const src = readFileSync(join(STORE_DIR, file), "utf8");
    if (!/\$\{COLUMNS\}/.test(src)) return;
    expect(fixedStringConstants(src).has("COLUMNS")).toBe(true);
  });

  test.each(files)("%s: no SQL built by string concatenation", (file) => {
    const src = readFileSync(join(STORE_DIR, file), "utf8");
    const concatenated = src.match(/(["'`])[^"'`\n]*\b(SELECT|INSERT|UPDATE|DELETE|WHERE)\b[^"'`\n]*\1\s*\+/g) ?? [];
    expect(concatenated).toEqual([]);
  });
});

describe("numberPlaceholders", () => {
  test("numbers ? in order and leaves quoted literals and identifiers alone", () => {
    expect(numberPlaceholders("SELECT a FROM t WHERE b = ? AND c = ?")).toEqual("SELECT a FROM t WHERE b = $1 AND c = $2");
    expect(numberPlaceholders(`SELECT '?' AS "x?", ? AS y`)).toEqual(`SELECT '?' AS "x?", $1 AS y`);
    expect(numberPlaceholders("SELECT 1")).toEqual("SELECT 1");
  });
});

const HOSTILE = [`a'b"c`, "x?y ? $1 $2", "'); DROP TABLE vaults; --", "a;b /* c */ -- d", "naïve ☃ \\ %_"];

forEachBackend((backend) => {
  test("values that look like SQL are stored and matched verbatim", async () => {
    const store = await backend.open();
    for (const [i, name] of HOSTILE.entries()) await store.vaults.create(name, i);
    expect((await store.vaults.list()).map((v) => v.name).sort()).toEqual([...HOSTILE].sort());
    for (const name of HOSTILE) expect((await store.vaults.byName(name))?.name).toBe(name);
    expect(await store.vaults.byName("%")).toBeUndefined(); // equality, not LIKE
    const vault = (await store.vaults.byName(HOSTILE[2]!))!;
    await store.credentials.put({ vaultId: vault.id, key: "K?", nonce: new Uint8Array(12), ciphertext: new Uint8Array(17) }, 1);
    expect(await store.credentials.keys(vault.id)).toEqual(["K?"]);
    expect(await store.settings.get("x")).toBeUndefined();
    await store.settings.put("?", { v: HOSTILE }, 1);
    expect(await store.settings.get("?")).toEqual({ v: HOSTILE });
  });
});

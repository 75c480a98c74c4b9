// SQL stays parameterized: inside any SQL template literal in src/store, the only interpolation
// allowed is a module-level constant fragment such as `${COLUMNS}`, itself a fixed string.

import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

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

/** `${...}` expressions inside SQL template literals that are not fixed-string constants of the file. */
function sqlOffenders(src: string): string[] {
  const allowed = new Set([...fixedStringConstants(src).keys()].map((name) => `\${${name}}`));
  return templateLiterals(src)
    .filter((t) => SQL_VERB.test(t.text))
    .flatMap((t) => t.interpolations.filter((x) => !allowed.has(x)).map((x) => `${x} in ${t.text.slice(0, 80)}`));
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
    const bad = 'const COLUMNS = "id";\nconst f = (name) => sql.get(`SELECT ${COLUMNS} FROM vaults WHERE name = \'${name}\'`);';
    expect(sqlOffenders(bad)).toEqual(["${name} in `SELECT ${COLUMNS} FROM vaults WHERE name = '${name}'`"]);
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

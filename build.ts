// Builds dist/broker: one self-contained executable (bun build --compile) with every dependency,
// the migrations and the pages embedded. Run with `bun run build`.

import { mkdirSync } from "node:fs";

const outfile = process.argv[2] ?? "dist/broker";
mkdirSync(outfile.slice(0, outfile.lastIndexOf("/")) || ".", { recursive: true });
const result = await Bun.build({
  // The store's read worker (src/store/sqlite-reader.ts) is a thread with an entry of its own: Bun embeds
  // each entry point at its path under src/, where `new Worker` finds it (tests/e2e/binary.test.ts proves it).
  entrypoints: ["src/index.ts", "src/store/sqlite-read-worker.ts"],
  compile: { outfile },
  minify: { syntax: true, whitespace: true },
  sourcemap: "linked",
  target: "bun",
});
if (!result.success) {
  for (const log of result.logs) console.error(log);
  process.exit(1);
}
console.log(`built ${outfile}`);

// The module map of docs/architecture.md, checked mechanically: modules meet only through their
// index.ts, each imports only the modules below it (so the server and the tunnel never import each
// other, and the core stays free of Hono and sockets), leaves import no module, and no file imports
// itself through others (an import cycle, type-only ones included: a shared type belongs to the module
// that owns it).

import { expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const SRC = resolve(import.meta.dir, "..", "..", "src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sourceFiles(path) : /\.tsx?$/.test(name) ? [path] : [];
  });
}

function moduleOf(path: string): string {
  const rel = relative(SRC, path);
  return rel.includes("/") ? rel.split("/")[0]! : rel.replace(/\.tsx?$/, "");
}

const edges = sourceFiles(SRC).flatMap((file) => {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/(?:import|export)[^"']*?from\s+["']([^"']+)["']/g)].map((m) => ({ file, spec: m[1]! }));
});

test("cross-module imports go through the other module's index.ts", () => {
  const bad = edges.filter(({ file, spec }) => {
    if (!spec.startsWith(".")) return false;
    const target = resolve(dirname(file), spec);
    if (!target.startsWith(`${SRC}/`)) return false; // package.json and the like
    const from = moduleOf(file);
    const to = moduleOf(target);
    return from !== to && relative(SRC, target).includes("/") && !target.endsWith("/index.ts");
  });
  expect(bad.map(({ file, spec }) => `${relative(SRC, file)} → ${spec}`)).toEqual([]);
});

test("inside a module, no folder imports its parent, and a sibling folder only through its index.ts", () => {
  const bad = edges.filter(({ file, spec }) => {
    if (!spec.startsWith(".")) return false;
    const target = resolve(dirname(file), spec);
    if (!target.startsWith(`${SRC}/`) || moduleOf(target) !== moduleOf(file)) return false;
    const from = dirname(file);
    const to = dirname(target);
    if (from === to) return false;
    if (from.startsWith(`${to}/`)) return true; // a parent folder
    return !target.endsWith("/index.ts");
  });
  expect(bad.map(({ file, spec }) => `${relative(SRC, file)} → ${spec}`)).toEqual([]);
});

// Who may import whom, bottom to top (docs/architecture.md, "Module map"). A module not listed
// here fails the test: a new folder takes its place in the map on purpose.
const LEAVES = [
  "errors",
  "secret",
  "schema-input",
  "log",
  "config",
  "config-client",
  "config-connect",
  "config-host",
  "config-master-password",
  "config-oidc",
  "config-secret-file",
  "config-otel",
  "config-workers",
  "errors-base",
  "errors-proxy",
  "config-settings",
  "version",
];
const MAY_IMPORT: Record<string, string[]> = {
  store: [],
  policy: ["store"],
  templates: ["store", "policy"],
  words: ["store", "policy"],
  crypto: ["store"],
  ratelimit: [],
  identity: ["store", "policy", "crypto", "ratelimit"],
  workflows: ["store", "policy", "templates", "words", "crypto", "identity"],
  contract: ["store", "policy", "templates", "crypto", "ratelimit"],
  http: [],
  egress: ["store", "policy", "templates", "words", "crypto", "workflows", "http"],
  minting: ["policy", "egress", "http"],
  "secret-stores": ["policy", "egress", "http"],
  webhooks: ["store", "identity", "workflows", "egress"],
  telemetry: ["egress"],
  tunnel: ["policy", "crypto", "ratelimit", "identity", "egress", "http"],
  server: ["store", "policy", "templates", "words", "crypto", "ratelimit", "identity", "workflows", "contract", "egress"],
  app: ["store", "policy", "crypto", "ratelimit", "identity", "workflows", "egress", "minting", "secret-stores", "webhooks", "telemetry", "tunnel", "server"],
  cli: ["store", "policy", "templates", "words", "crypto", "ratelimit", "identity", "workflows", "contract", "egress", "app"],
  index: ["cli"],
};
/** Third-party packages that shape a layer: the web framework stays in server/, sockets out of the core. */
const PACKAGES_ONLY_IN: Record<string, string[]> = { hono: ["server"], "node:net": ["tunnel", "cli"] };

test("each module imports only the modules below it in the map", () => {
  const bad = edges.filter(({ file, spec }) => {
    const from = moduleOf(file);
    if (spec.startsWith(".")) {
      const target = resolve(dirname(file), spec);
      if (!target.startsWith(`${SRC}/`)) return false;
      const to = moduleOf(target);
      if (to === from || LEAVES.includes(to)) return false;
      if (LEAVES.includes(from)) return !LEAVES_MAY_IMPORT.includes(to);
      return !(MAY_IMPORT[from] ?? []).includes(to);
    }
    const only = PACKAGES_ONLY_IN[spec];
    return only !== undefined && !only.includes(from);
  });
  expect(bad.map(({ file, spec }) => `${relative(SRC, file)} → ${spec}`)).toEqual([]);
});

test("every folder under src/ has its place in the map", () => {
  const folders = readdirSync(SRC).filter((name) => statSync(join(SRC, name)).isDirectory());
  expect(folders.filter((f) => !(f in MAY_IMPORT))).toEqual([]);
  const files = readdirSync(SRC)
    .filter((name) => /\.tsx?$/.test(name))
    .map((name) => name.replace(/\.tsx?$/, ""));
  expect(files.filter((f) => f !== "index" && !LEAVES.includes(f))).toEqual([]);
});

// The rate-limit profiles are configuration: the config loader reads them through ratelimit/.
const LEAVES_MAY_IMPORT = ["ratelimit"];

test("leaves import no module but ratelimit (the config loader reads its profiles)", () => {
  const bad = edges.filter(({ file, spec }) => {
    if (!LEAVES.includes(moduleOf(file)) || !spec.startsWith(".")) return false;
    const target = resolve(dirname(file), spec);
    return target.startsWith(`${SRC}/`) && !LEAVES.includes(moduleOf(target)) && !LEAVES_MAY_IMPORT.includes(moduleOf(target));
  });
  expect(bad.map(({ file, spec }) => `${relative(SRC, file)} → ${spec}`)).toEqual([]);
});

test("no import cycles among src/ files", () => {
  const graph = new Map<string, string[]>();
  for (const { file, spec } of edges) {
    if (!spec.startsWith(".")) continue;
    const target = resolve(dirname(file), spec);
    if (target.startsWith(`${SRC}/`)) graph.set(file, [...(graph.get(file) ?? []), target]);
  }
  const cycles: string[] = [];
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (node: string): void => {
    state.set(node, "open");
    path.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") cycles.push([...path.slice(path.indexOf(next)), next].map((f) => relative(SRC, f)).join(" → "));
      else if (!state.has(next)) visit(next);
    }
    path.pop();
    state.set(node, "done");
  };
  for (const file of sourceFiles(SRC)) if (!state.has(file)) visit(file);
  expect(cycles).toEqual([]);
});

test("every design citation in the code resolves in docs/architecture.md", () => {
  const root = resolve(SRC, "..");
  const doc = readFileSync(join(root, "docs", "architecture.md"), "utf8");
  const sections = new Set([...doc.matchAll(/^## (§\d+) /gm)].map((m) => m[1]));
  const decisions = new Set([...doc.matchAll(/^### (D\d+)\. /gm)].map((m) => m[1]));
  const files = [SRC, join(root, "tests"), join(root, "bench")].flatMap(sourceFiles);
  const unresolved: string[] = [];
  let cited = 0;
  const outside = new RegExp(["DESIGN", "md"].join("\\.")); // spelled so this file does not match itself
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    if (outside.test(text)) unresolved.push(`${relative(root, file)}: cites the design sketch outside the repository`);
    for (const m of text.matchAll(/architecture\.md,? ((?:§|D)\d+)(?:(?:,| and) ((?:§|D)\d+))?/g)) {
      for (const ref of [m[1], m[2]].filter((r): r is string => r !== undefined)) {
        cited++;
        if (!(ref.startsWith("§") ? sections : decisions).has(ref)) unresolved.push(`${relative(root, file)}: architecture.md ${ref}`);
      }
    }
  }
  expect(unresolved).toEqual([]);
  expect(cited).toBeGreaterThan(30);
});

test("the CLI reads every API answer by the contract's type, never one it declares itself", () => {
  const cli = sourceFiles(join(SRC, "cli")).filter((f) => !f.endsWith("kit/client.ts"));
  const own = cli.flatMap((file) =>
    [...readFileSync(file, "utf8").matchAll(/\.request<([^>(]+)>/g)]
      .map((m) => m[1]!.trim())
      .filter((type) => !/^[A-Z]\w*Body$/.test(type))
      .map((type) => `${relative(SRC, file)}: request<${type}>`),
  );
  expect(own).toEqual([]);
  // …and each of those names is one the contract exports.
  const contract = readdirSync(join(SRC, "contract"))
    .map((name) => readFileSync(join(SRC, "contract", name), "utf8"))
    .join("\n");
  const used = new Set(cli.flatMap((file) => [...readFileSync(file, "utf8").matchAll(/\.request<(\w+Body)>/g)].map((m) => m[1]!)));
  expect([...used].filter((type) => !new RegExp(`export type ${type}\\b`).test(contract))).toEqual([]);
  expect(used.size).toBeGreaterThan(20);
});

// A Worker's entry is bundled on its own in the binary: whatever it imported would be a second copy, with
// its own module state, in another thread. The store's read worker keeps to bun:sqlite and, for retention (which
// checks the records it removes and signs the anchor it moves) and the audit writer's batches (which chain the
// records they insert), the store's pure chain modules and db.ts's placeholders: they hold no state but a
// per-thread key cache and import nothing else but node:crypto (types aside). build.ts must list the entry, or
// the compiled binary cannot start its store (tests/e2e/binary-read-worker.test.ts).
const WORKER_ENTRIES = ["store/sqlite-read-worker.ts"];
const WORKER_MAY_REACH = new Set([
  "bun:sqlite",
  "node:crypto",
  "store/audit-prune-batch.ts",
  "store/audit-chain-check.ts",
  "store/audit-anchors.ts",
  "store/audit-chain-encoding.ts",
  "store/audit-chain-genesis.ts",
  "store/audit-batch.ts",
  "store/db.ts",
]);

test("worker entry points reach only bun:sqlite and the store's pure chain modules, and are entry points of the build", () => {
  const spawned = sourceFiles(SRC).flatMap((file) =>
    [...readFileSync(file, "utf8").matchAll(/new URL\("\.\/([\w-]+)\.ts", import\.meta\.url\)/g)].map((m) => relative(SRC, join(dirname(file), `${m[1]}.ts`))),
  );
  expect(spawned).toEqual(WORKER_ENTRIES);
  const build = readFileSync(join(SRC, "..", "build.ts"), "utf8");
  const valueImports = (file: string) =>
    [...readFileSync(join(SRC, file), "utf8").matchAll(/^import (type )?.*?from\s+["']([^"']+)["']/gm)]
      .filter((m) => !m[1])
      .map((m) => (m[2]!.startsWith(".") ? relative(SRC, join(SRC, dirname(file), m[2]!)) : m[2]!));
  for (const entry of WORKER_ENTRIES) {
    expect(build).toContain(`"src/${entry}"`);
    const reached = new Set<string>();
    const queue = valueImports(entry);
    while (queue.length) {
      const m = queue.shift()!;
      if (reached.has(m)) continue;
      reached.add(m);
      if (m.endsWith(".ts")) queue.push(...valueImports(m));
    }
    expect([...reached].filter((m) => !WORKER_MAY_REACH.has(m))).toEqual([]);
    expect(reached.has("bun:sqlite")).toBe(true);
  }
});

// The module map of architecture.md §2, checked mechanically: modules meet only through their index.ts,
// the server and the tunnel never import each other, the core stays free of Hono, and leaves
// (ratelimit, errors, config) import nothing above them, and no file imports itself through others
// (an import cycle, type-only ones included: a shared type belongs to the module that owns it).

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

test("forbidden edges: server ↔ tunnel, Hono or sockets-free core, leaves import nothing above them", () => {
  const forbidden: Record<string, RegExp> = {
    server: /\/tunnel\//,
    tunnel: /\/server\//,
    egress: /^hono|\/server\/|\/tunnel\/|\/cli\//,
    vault: /^hono|\/server\/|\/tunnel\/|\/cli\/|\/egress\//,
    store: /^hono|\/server\/|\/tunnel\/|\/cli\/|\/egress\/|\/vault\//,
    ratelimit: /^hono|\/server\/|\/tunnel\/|\/cli\/|\/egress\/|\/vault\/|\/store\//,
  };
  const bad = edges.filter(({ file, spec }) => forbidden[moduleOf(file)]?.test(spec.startsWith(".") ? `${resolve(dirname(file), spec)}` : spec));
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

// A vault file (issue 39) as YAML: read with its line numbers (eemeli/yaml's document API and LineCounter), checked
// by the contract's own schema so every problem names its field and line ("vaults.payments.services[2].auth.tokn:
// unknown key (line 14)"), a webhook's `${NAME}` read from the environment; and written back as YAML for export.

import { Document, isMap, isScalar, isSeq, LineCounter, parseDocument, visit, type Node } from "yaml";
import { VaultFile, fieldPath, issueError, type VaultFileBody } from "../../contract/index.ts";
import { CliFailure } from "./fail.ts";

const MAX_PROBLEMS = 20;
const ENV_REF = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/;

interface Problem {
  readonly line: number | undefined;
  readonly text: string;
}

/** The file read and checked, ready for POST /v1/apply; a CliFailure (exit 2) listing every problem with its line. */
export function readVaultFile(text: string, env: Record<string, string | undefined> = process.env): VaultFileBody {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: false });
  const at = (offset: number | undefined) => (offset === undefined ? undefined : lines.linePos(offset).line);
  if (doc.errors.length) fail(doc.errors.map((e) => ({ line: e.linePos?.[0].line ?? at(e.pos[0]), text: firstLine(e.message) })));
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    // Too many aliases (a "billion laughs" file) or another structure the library will not build: the file's problem.
    fail([{ line: undefined, text: firstLine(err instanceof Error ? err.message : String(err)) }]);
  }
  const problems: Problem[] = [];
  fillFromEnvironment(data, env, (path, text) => problems.push({ line: at(nodeAt(doc, path)?.range?.[0]), text: `${fieldPath(path)}: ${text}` }));
  if (problems.length) fail(problems);
  const read = VaultFile.safeParse(data);
  if (read.success) return data as VaultFileBody;
  for (const issue of read.error.issues) {
    const keys = issue.code === "unrecognized_keys" ? issue.keys : [];
    for (const key of keys) {
      const path = [...issue.path, key];
      const field = fieldPath(path);
      const said = issue.message.includes("{field}") ? issue.message.replaceAll("{field}", field) : `${field}: unknown key`;
      problems.push({ line: at(keyAt(doc, issue.path, key)?.range?.[0]), text: said });
    }
    if (keys.length === 0) problems.push({ line: at(nodeAt(doc, issue.path)?.range?.[0]), text: issueError([issue]).message });
  }
  fail(problems);
}

function fail(problems: readonly Problem[]): never {
  const sorted = [...problems].sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
  const said = sorted.slice(0, MAX_PROBLEMS).map((p) => (p.line === undefined ? p.text : `${p.text} (line ${p.line})`));
  if (sorted.length > MAX_PROBLEMS) said.push(`… and ${sorted.length - MAX_PROBLEMS} more`);
  const head = sorted.length === 1 ? "the vault file has a problem" : `the vault file has ${sorted.length} problems`;
  throw new CliFailure(`${head}:\n  ${said.join("\n  ")}`, "nothing was applied; fix the file and run broker apply again", 2);
}

function firstLine(message: string): string {
  return message.split("\n")[0]!.trim();
}

/** A webhook's url written as `${NAME}` becomes the variable's value (a receiver URL that is itself a secret stays out of the file). */
function fillFromEnvironment(data: unknown, env: Record<string, string | undefined>, problem: (path: PropertyKey[], text: string) => void): void {
  const vaults = (data as { vaults?: unknown } | null)?.vaults;
  if (!vaults || typeof vaults !== "object") return;
  for (const [name, vault] of Object.entries(vaults as Record<string, unknown>)) {
    const hooks = (vault as { webhooks?: unknown } | null)?.webhooks;
    if (!Array.isArray(hooks)) continue;
    hooks.forEach((hook: unknown, i) => {
      const url = (hook as { url?: unknown } | null)?.url;
      const m = typeof url === "string" ? ENV_REF.exec(url) : null;
      if (!m) return;
      const value = env[m[1]!];
      if (value === undefined || value === "")
        problem(["vaults", name, "webhooks", i, "url"], `the environment has no ${m[1]} (the receiver's URL is read from it)`);
      else (hook as { url: string }).url = value;
    });
  }
}

/** The YAML node at `path`, or the deepest one on the way (a missing field is reported where its parent is). */
function nodeAt(doc: Document, path: readonly PropertyKey[]): Node | undefined {
  let node: unknown = doc.contents;
  let last: Node | undefined = doc.contents ?? undefined;
  for (const seg of path) {
    if (isMap(node)) {
      const pair = node.items.find((p) => keyText(p.key) === String(seg));
      if (!pair) break;
      last = (pair.value as Node | null) ?? (pair.key as Node);
      node = pair.value;
    } else if (isSeq(node) && typeof seg === "number") {
      node = node.items[seg];
      if (!node) break;
      last = node as Node;
    } else break;
  }
  return last;
}

/** The key node `key` of the map at `path` (an unknown key is reported on its own line). */
function keyAt(doc: Document, path: readonly PropertyKey[], key: string): Node | undefined {
  const map = nodeAt(doc, path);
  if (!isMap(map)) return map;
  return (map.items.find((p) => keyText(p.key) === key)?.key as Node | undefined) ?? map;
}

function keyText(key: unknown): string {
  return isScalar(key) ? String(key.value) : String(key);
}

/** The export as YAML, with a header saying what it holds and what it never holds. */
export function writeVaultFile(file: VaultFileBody, now = new Date()): string {
  const doc = new Document(file);
  doc.commentBefore = [
    ` Vault file written by broker export at ${now.toISOString()}. Apply it with: broker apply -f FILE [--dry-run]`,
    " It holds credential keys and references, never a value; people and agents by name; receiver URLs with their secret",
    " part hidden as … (such a webhook is kept as it is; write its URL in full, or as ${NAME} read from the environment).",
  ].join("\n");
  // Lists of plain values on one line (operations: [read, write]; methods: [GET, HEAD]), everything else as blocks.
  visit(doc, {
    Seq(_, node) {
      if (node.items.every((item) => isScalar(item))) node.flow = true;
    },
  });
  return doc.toString({ lineWidth: 0, flowCollectionPadding: false });
}

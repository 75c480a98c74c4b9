// A template-made service in words: "GitHub (api.github.com), read only", and what each chosen
// operation lets an agent do, for the console, the approval page, the CLI and /discover alike.

/** "read only", "read and write", "read, write and destructive". */
export function describeOperations(operations: readonly string[]): string {
  if (operations.length === 0) return "no operations";
  if (operations.length === 1) return `${operations[0]} only`;
  return `${operations.slice(0, -1).join(", ")} and ${operations.at(-1)}`;
}

/** "GitHub (api.github.com), read only". */
export function describeTemplateChoice(name: string, host: string, operations: readonly string[]): string {
  return `${name} (${host}), ${describeOperations(operations)}`;
}

/** One line per chosen operation with what it lets an agent do ("read: read repositories, issues …"). */
export function operationLines(
  template: { readonly operations: Readonly<Record<string, { readonly summary: string } | undefined>> },
  chosen: readonly string[],
): string[] {
  return chosen.flatMap((name) => {
    const op = template.operations[name];
    return op ? [`${name}: ${op.summary}`] : [];
  });
}

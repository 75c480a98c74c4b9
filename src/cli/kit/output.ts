// Printing for people and for scripts: aligned tables, JSON, short times. Commands print
// only through here (or `printSecret`), so what reaches the terminal is easy to audit.

import type { Secret } from "../../secret.ts";

export interface Column<T> {
  readonly title: string;
  readonly value: (row: T) => string;
  /** Longest cell shown; longer ones end in "…", so one long value does not pad every row. */
  readonly max?: number;
}

export function printLine(text = ""): void {
  process.stdout.write(`${text}\n`);
}

/** Notes for the person (hints, warnings) go to stderr, so stdout stays clean for pipes. */
export function printNote(text: string): void {
  process.stderr.write(`${text}\n`);
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** The CLI's deliberate way to show a secret value: `credential get` and `--reveal` only. */
export function printSecret(value: Secret): void {
  process.stdout.write(`${value.reveal()}\n`);
}

export function formatTable<T>(rows: readonly T[], columns: readonly Column<T>[]): string {
  const cells = rows.map((r) => columns.map((c) => cutCell(oneLine(c.value(r)), c.max)));
  const widths = columns.map((c, i) => Math.max(c.title.length, ...cells.map((row) => (row[i] ?? "").length)));
  const render = (row: readonly string[]) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [render(columns.map((c) => c.title)), ...cells.map(render)].join("\n");
}

/** Prints rows as a table, or `empty` when there are none. */
export function printTable<T>(rows: readonly T[], columns: readonly Column<T>[], empty: string): void {
  if (rows.length === 0) printLine(empty);
  else printLine(formatTable(rows, columns));
}

/** `2026-11-21T08:14:06.123Z` → `2026-11-21 08:14 UTC`; null → `never`. */
export function formatTime(iso: string | null | undefined): string {
  if (iso === null) return "never";
  if (!iso) return "-";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

export function cutCell(s: string, max: number | undefined): string {
  return max !== undefined && s.length > max ? `${s.slice(0, Math.max(0, max - 1))}…` : s;
}

/** True when some cell would be cut (so the caller can say where the full value is). */
export function hasCutCells<T>(rows: readonly T[], columns: readonly Column<T>[]): boolean {
  return rows.some((r) => columns.some((c) => c.max !== undefined && oneLine(c.value(r)).length > c.max));
}

/**
 * Control characters (ESC and C1 CSI start terminal escapes: colours, cleared screens, a window title, hyperlinks;
 * CR and NUL hide what comes before) and the bidirectional controls that reorder a line as it is shown.
 */
const UNPRINTABLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

// A value with a newline (a multi-line secret shown with --reveal) must not break the table's rows, and a value from
// elsewhere (a workload's subject, an upstream's words) must not drive the terminal: each is shown as its escape.
function oneLine(s: string): string {
  return s
    .replace(/\r?\n/g, "\\n")
    .replace(/\t/g, "\\t")
    .replace(UNPRINTABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

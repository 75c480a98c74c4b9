// The report: a Markdown table of every scenario (ratio to direct, added latency, CPU per request,
// RSS), the machine it ran on, issue-8 targets met or not, and a dependency-free SVG bar chart.

import { cpus, release } from "node:os";
import type { DbReads, ReadCount } from "./db-reads.ts";
import type { PeerStats, Row } from "./scenarios.ts";

const f = (x: number | undefined, d = 2) => (x === undefined || !Number.isFinite(x) ? "–" : x.toFixed(d));
const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(0)}%` : "–");

export function machine(): string {
  const c = cpus();
  return `${c.length} cores (${c[0]?.model?.trim() ?? "unknown CPU"}), Bun ${Bun.version}, Linux ${release()}`;
}

export function table(rows: Row[]): string {
  // --peers: Squid's req/s and broker/Squid next to the direct columns (only when a row has them).
  const peers = rows.some((r) => r.squid);
  const head = `| scenario | requests | errors / non-2xx | direct req/s | ${peers ? "squid req/s | " : ""}broker req/s | throughput ratio | ${peers ? "broker/squid | " : ""}added p50 (ms) | added p99 (ms) | broker p50 / p99 (ms) | broker CPU ms/req | peak RSS (MB) | notes |`;
  const sep = `|---|---:|---:|---:|${peers ? "---:|" : ""}---:|---:|${peers ? "---:|" : ""}---:|---:|---:|---:|---:|---|`;
  const lines = rows.map((r) =>
    [
      r.name,
      r.requests,
      `${r.errors} / ${r.non2xx}`,
      f(r.directRps, 0),
      ...(peers ? [r.squid ? f(r.squid.rps, 0) : "–"] : []),
      f(r.brokerRps, 0),
      pct(r.ratio),
      ...(peers ? [r.squid ? `${f(r.squid.brokerVsPeer, 2)}×` : "–"] : []),
      f(r.addedP50, 3),
      f(r.addedP99, 3),
      Number.isFinite(r.brokerP50) ? `${f(r.brokerP50, 3)} / ${f(r.brokerP99, 3)}` : "–",
      f(r.cpuMsPerReq, 3),
      `${f(r.peakRssMb, 0)}${r.rssGrowthMb !== undefined ? ` (+${f(r.rssGrowthMb, 0)})` : ""}`,
      [r.note, r.firstError ? `first error: ${r.firstError.slice(0, 120)}` : undefined].filter(Boolean).join("; ").replace(/\|/g, "\\|"),
    ].join(" | "),
  );
  return [head, sep, ...lines.map((l) => `| ${l} |`)].join("\n");
}

/** --peers: direct, the peer proxy and the broker side by side for every row a peer ran (Squid; mitmproxy in the h2 row). */
export function peersTable(rows: Row[]): string {
  const head =
    "| scenario | peer | direct req/s | peer req/s | broker req/s | peer/direct | broker/direct | broker/peer [range] | peer p50 / p99 (ms) | broker p50 / p99 (ms) | peer CPU ms/req | broker CPU ms/req | broker CPU / peer CPU [range] |";
  const sep = "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
  const span = (x: number, r: readonly [number, number]) => `${f(x, 2)}× [${f(r[0], 2)}–${f(r[1], 2)}]`;
  const line = (r: Row, peer: string, p: PeerStats) =>
    `| ${[r.name, peer, f(r.directRps, 0), f(p.rps, 0), f(r.brokerRps, 0), pct(p.ratio), pct(r.ratio), span(p.brokerVsPeer, p.brokerVsPeerRange), `${f(p.p50, 3)} / ${f(p.p99, 3)}`, `${f(r.brokerP50, 3)} / ${f(r.brokerP99, 3)}`, f(p.cpuMsPerReq, 3), f(r.cpuMsPerReq, 3), span(p.cpuVsPeer, p.cpuVsPeerRange)].join(" | ")} |`;
  const lines = rows.flatMap((r) => [...(r.squid ? [line(r, "Squid", r.squid)] : []), ...(r.mitmproxy ? [line(r, "mitmproxy", r.mitmproxy)] : [])]);
  return [head, sep, ...lines].join("\n");
}

export interface Target {
  readonly what: string;
  readonly value: string;
  readonly met: boolean | undefined;
}

export function checkTargets(rows: Row[], micro: Record<string, number>, db: DbReads | undefined): Target[] {
  const by = (prefix: string) => rows.find((r) => r.name.startsWith(prefix));
  const t16 = by("tunnel, 16 keep-alive, /small");
  const t1 = by("tunnel, 1 keep-alive");
  const cold = by("cold connection");
  const blind = by("blind tunnel, 16");
  const proxy = by("/proxy, 16 keep-alive, /small");
  const idle = rows.find((r) => r.name.includes("idle tunnels"));
  const bulk = rows.filter((r) => r.mbps);
  const out: Target[] = [];
  const add = (what: string, value: number | undefined, fmt: (v: number) => string, ok: (v: number) => boolean) =>
    out.push({
      what,
      value: value === undefined || !Number.isFinite(value) ? "not measured" : fmt(value),
      met: value === undefined || !Number.isFinite(value) ? undefined : ok(value),
    });
  // Issue 17's targets: ratios within one run (direct and Squid measured in the same repetitions).
  add(
    "tunnel 16 keep-alive ≥ 1.2× Squid",
    t16?.squid?.brokerVsPeer,
    (v) => `${f(v, 2)}×`,
    (v) => v >= 1.2,
  );
  add("tunnel 16 keep-alive throughput ≥ 45% of direct", t16?.ratio, pct, (v) => v >= 0.45);
  add(
    "tunnel 16 keep-alive broker CPU ≤ 0.05 ms/request",
    t16?.cpuMsPerReq,
    (v) => `${f(v, 3)} ms`,
    (v) => v <= 0.05,
  );
  add(
    "tunnel 1 keep-alive ≥ 1.2× Squid",
    t1?.squid?.brokerVsPeer,
    (v) => `${f(v, 2)}×`,
    (v) => v >= 1.2,
  );
  add(
    "tunnel 1 keep-alive added p50 ≤ 0.08 ms",
    t1?.addedP50,
    (v) => `${f(v, 3)} ms`,
    (v) => v <= 0.08,
  );
  add(
    "new connection per request ≥ 5× Squid",
    cold?.squid?.brokerVsPeer,
    (v) => `${f(v, 2)}×`,
    (v) => v >= 5,
  );
  add(
    "cold connection added p50 ≤ 1.5 ms",
    cold?.addedP50,
    (v) => `${f(v, 3)} ms`,
    (v) => v <= 1.5,
  );
  add(
    "first leaf for a new host ≤ 5 ms (micro)",
    micro["leaf mint (first)"] === undefined ? undefined : micro["leaf mint (first)"]! / 1e6,
    (v) => `${f(v, 2)} ms`,
    (v) => v <= 5,
  );
  // Issue 40's: CPU per request against Squid's in the same repetitions, and new connections at ≥ 4×.
  for (const [label, row] of [
    ["tunnel 16 keep-alive", t16],
    ["tunnel 1 keep-alive", t1],
  ] as const)
    add(
      `${label} broker CPU/request ≤ 0.8× Squid's`,
      row?.squid?.cpuVsPeer,
      (v) => `${f(v, 2)}× [${f(row!.squid!.cpuVsPeerRange[0], 2)}–${f(row!.squid!.cpuVsPeerRange[1], 2)}]`,
      (v) => v <= 0.8,
    );
  add(
    "new connection per request ≥ 4× Squid",
    cold?.squid?.brokerVsPeer,
    (v) => `${f(v, 2)}×`,
    (v) => v >= 4,
  );
  const workers = rows.find((r) => r.workers);
  add(
    "--workers 2 / 1 process, tunnel 16 keep-alive (measured; no target on a machine whose cores the load generator shares)",
    workers?.workers?.ratio,
    (v) => `${pct(v)} [${pct(workers!.workers!.min)}–${pct(workers!.workers!.max)}]`,
    () => true,
  );
  add("/proxy 16 keep-alive ≥ 50% of direct", proxy?.ratio, pct, (v) => v >= 0.5);
  add("blind tunnel 16 keep-alive ≥ 80% of direct", blind?.ratio, pct, (v) => v >= 0.8);
  for (const r of bulk) add(`${r.name}: ≥ 80% of direct throughput`, r.ratio, pct, (v) => v >= 0.8);
  add(
    "bulk bodies peak RSS growth ≤ 64 MB",
    bulk.length ? Math.max(...bulk.map((r) => r.rssGrowthMb ?? NaN)) : undefined,
    (v) => `${f(v, 0)} MB (worst)`,
    (v) => v <= 64,
  );
  add(
    `${idle?.requests ?? 10_000} idle tunnels ≤ 250 MB broker RSS`,
    idle?.peakRssMb,
    (v) => `${f(v, 0)} MB`,
    (v) => v <= 250,
  );
  const errs = rows.reduce((a, r) => a + r.errors + r.non2xx, 0);
  add(
    "zero errors and non-2xx in every scenario",
    errs,
    (v) => `${v}`,
    (v) => v === 0,
  );
  add(
    "zero DB reads per proxied request, SQLite store",
    db?.sqlite.readsPerRequest,
    (v) => `${f(v, 3)} reads/request`,
    (v) => v === 0,
  );
  add(
    "zero DB reads per proxied request, PostgreSQL store",
    db?.postgres?.readsPerRequest,
    (v) => `${f(v, 3)} reads/request`,
    (v) => v === 0,
  );
  const pg = rows.find((r) => r.vsSqlite);
  add(
    `PostgreSQL store: ${pg?.name.replace(/, PostgreSQL store$/, "") ?? "tunnel 16 keep-alive"} throughput ≥ 90% of SQLite (same repetitions)`,
    pg?.vsSqlite?.ratio,
    pct,
    (v) => v >= 0.9,
  );
  return out;
}

export function targetTable(ts: Target[]): string {
  return [
    "| target | measured | met |",
    "|---|---|---|",
    ...ts.map((t) => `| ${t.what} | ${t.value} | ${t.met === undefined ? "–" : t.met ? "yes" : "**no**"} |`),
  ].join("\n");
}

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** Two horizontal bar panels: throughput ratio to direct (%) and added p50 (ms). */
export function chart(rows: Row[], title: string): string {
  const ratioRows = rows.filter((r) => Number.isFinite(r.ratio));
  const latRows = rows.filter((r) => Number.isFinite(r.addedP50));
  const rowH = 22;
  const labelW = 330;
  const barW = 360;
  const panel = (y0: number, heading: string, items: Row[], value: (r: Row) => number, fmt: (v: number) => string, color: string, mark?: number) => {
    const max = Math.max(mark ?? 0, ...items.map((r) => Math.max(0, value(r)))) || 1;
    let s = `<text x="10" y="${y0}" font-weight="bold">${esc(heading)}</text>`;
    items.forEach((r, i) => {
      const y = y0 + 12 + i * rowH;
      const w = Math.max(1, (Math.max(0, value(r)) / max) * barW);
      s += `<text x="${labelW - 6}" y="${y + 14}" text-anchor="end">${esc(r.name)}</text>`;
      s += `<rect x="${labelW}" y="${y + 3}" width="${w.toFixed(1)}" height="${rowH - 6}" fill="${color}"/>`;
      s += `<text x="${labelW + w + 4}" y="${y + 14}">${esc(fmt(value(r)))}</text>`;
    });
    if (mark !== undefined) {
      const x = labelW + (mark / max) * barW;
      s += `<line x1="${x}" y1="${y0 + 8}" x2="${x}" y2="${y0 + 12 + items.length * rowH}" stroke="#444" stroke-dasharray="4 3"/>`;
    }
    return { svg: s, height: 24 + items.length * rowH };
  };
  const a = panel(
    50,
    "Throughput, % of direct (dashed: 100%)",
    ratioRows,
    (r) => r.ratio * 100,
    (v) => `${v.toFixed(0)}%`,
    "#3b7dd8",
    100,
  );
  const b = panel(
    50 + a.height + 30,
    "Added p50 latency vs direct (ms)",
    latRows,
    (r) => r.addedP50,
    (v) => `${v.toFixed(3)} ms`,
    "#d8783b",
  );
  const height = 50 + a.height + 30 + b.height + 20;
  const width = labelW + barW + 110;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="22" font-size="15" font-weight="bold">${esc(title)}</text>
${a.svg}
${b.svg}
</svg>
`;
}

const statementList = (s: Record<string, number>) =>
  Object.entries(s)
    .map(([k, v]) => `\`${k}\` × ${v}`)
    .join("; ");

function backendSection(title: string, c: ReadCount): string {
  const lines = [
    `**${title}**: ${c.requests} proxied requests (tunnel and /proxy) after warm-up, counted over ${(c.windowMs / 1000).toFixed(2)} s: ${c.reads} reads (${f(c.readsPerRequest, 3)} per request), ${c.writes} writes in ${c.transactions} transaction(s) (audit batches). Reads per request by path: ${Object.entries(
      c.readsPerRequestByPath,
    )
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}.`,
    "",
    `Statements counted: ${statementList(c.statements) || "none"}.${c.readStacks.length ? ` Where the first read came from: \`${c.readStacks[0]}\`` : ""}`,
  ];
  if (c.notify) {
    lines.push(
      "",
      `Change channel (a LISTEN connection of the bench's own): ${c.notify.beats} heartbeat NOTIFY(s) in the window (the change feed's \`{"t":"beat"}\`, every 400 ms whatever the traffic; it reads no table and is not counted above), ${c.notify.changes} change announcement(s).`,
    );
  }
  const s = c.sustained;
  if (s) {
    const reads = Object.entries(s.statements).filter(([k]) => /^\s*(SELECT|WITH)\b/i.test(k));
    lines.push(
      "",
      `Sustained ${(s.ms / 1000).toFixed(1)} s at 4 connections (${s.requests} requests): ${s.reads} reads (${f(s.reads / (s.ms / 1000), 2)}/s, ${f(s.reads / s.requests, 5)} per request)${reads.length ? `: ${statementList(Object.fromEntries(reads))}` : ""}; ${s.writes} writes${s.writes < s.requests ? ` (audit inserts; ${s.requests - s.writes} records were still queued when the window closed)` : ""}.${s.notify ? ` ${s.notify.beats} heartbeats, ${s.notify.changes} announcements.` : ""} Reads here follow the clock, not the requests: a cached session and vault grant are re-checked once they are 5 s old, by every request in flight at that moment.`,
    );
  }
  return lines.join("\n");
}

/** The "Database access per proxied request" section: SQLite, then PostgreSQL or why it was skipped. */
export function dbSection(db: DbReads | undefined): string {
  if (!db) return "not measured";
  const parts = [backendSection("SQLite store", db.sqlite)];
  parts.push(db.postgres ? backendSection("PostgreSQL store", db.postgres) : (db.postgresNote ?? "PostgreSQL store: not measured"));
  return parts.join("\n\n");
}

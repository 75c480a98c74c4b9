// Header fields between the egress core's header lines and node:http2's objects, both ways. Shared
// by the broker's HTTP/2 client (upstream-h2.ts) and the tunnel's HTTP/2 server (tunnel/h2.ts).

import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http2";
import type { HeaderList } from "./http1.ts";

/** Fields as header lines: pseudo-headers left out, a list value one line each. */
export function fieldLines(fields: IncomingHttpHeaders): HeaderList {
  const out: HeaderList = [];
  for (const [name, value] of Object.entries(fields)) {
    if (name.startsWith(":") || value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) out.push([name, v]);
    else out.push([name, String(value)]);
  }
  return out;
}

/** Header lines as fields (names lower-cased, repeats as a list), leaving out the names in `drop`. */
export function linesToFields(lines: HeaderList, drop: ReadonlySet<string>, into: OutgoingHttpHeaders = {}): OutgoingHttpHeaders {
  for (const [name, value] of lines) {
    const lower = name.toLowerCase();
    if (drop.has(lower)) continue;
    const prior = into[lower];
    into[lower] = prior === undefined ? value : Array.isArray(prior) ? [...prior, value] : [String(prior), value];
  }
  return into;
}

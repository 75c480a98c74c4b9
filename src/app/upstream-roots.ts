// The roots the broker trusts for upstream TLS: the system's, plus any in BROKER_UPSTREAM_CA_FILE
// (a private CA, or the test suite's local upstreams). Added to, never substituted for, the defaults.

import { readFileSync } from "node:fs";
import { rootCertificates } from "node:tls";
import type { Config } from "../config.ts";

export function upstreamRoots(config: Config): string[] | undefined {
  if (!config.upstreamCaFile) return undefined;
  let pem: string;
  try {
    pem = readFileSync(config.upstreamCaFile, "utf8");
  } catch {
    throw new Error(`BROKER_UPSTREAM_CA_FILE: cannot read ${config.upstreamCaFile}`);
  }
  // One entry per certificate, as the TLS options document them (a bundle file may hold several).
  const certs = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (!certs.length) throw new Error(`BROKER_UPSTREAM_CA_FILE: ${config.upstreamCaFile} holds no PEM certificate`);
  // Extra roots are added to, never substituted for, the default ones.
  return [...rootCertificates, ...certs];
}

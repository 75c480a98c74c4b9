// `broker ca export|rotate`: the root CA that clients of the transparent proxy must trust.

import { defineCommand } from "citty";
import { writeFileSync } from "node:fs";
import { apiPath } from "../kit/index.ts";
import { openContext } from "../kit/index.ts";
import { CliFailure } from "../kit/index.ts";
import { printLine, printNote } from "../kit/index.ts";
import type { CaRotatedBody } from "../../contract/index.ts";

const exportCommand = defineCommand({
  meta: { name: "export", description: "Print the broker's root CA certificate (PEM), or write it with --out" },
  args: { out: { type: "string", description: "Write the certificate to this file instead of standard output" } },
  async run({ args }) {
    const ctx = openContext();
    const res = await fetch(`${ctx.addr}/v1/ca.pem`).catch(() => {
      throw new CliFailure(`cannot reach the broker at ${ctx.addr}`, "is the server running? start it with `broker server`");
    });
    if (!res.ok) throw new CliFailure(`the broker answered ${res.status} for /v1/ca.pem`, "check the server version");
    const pem = await res.text();
    if (args.out) {
      writeFileSync(args.out, pem, { mode: 0o644 });
      return printNote(`Wrote the broker CA to ${args.out}.`);
    }
    process.stdout.write(pem);
  },
});

const rotateCommand = defineCommand({
  meta: { name: "rotate", description: "Replace the root CA (owner only); clients must trust the new certificate" },
  async run() {
    const ctx = openContext();
    const res = await ctx.client.request<CaRotatedBody>("POST", apiPath("v1", "ca", "rotate"));
    printLine(`Rotated the root CA (valid until ${res.not_after}). Re-export it with \`broker ca export\` for your clients.`);
  },
});

export default defineCommand({
  meta: { name: "ca", description: "Export or rotate the broker's root CA (TLS interception)" },
  subCommands: { export: exportCommand, rotate: rotateCommand },
});

// `broker audit export|verify`: a vault's audit hash chain (docs/audit-chain.md) written out as JSON lines or OCSF
// events, and verified here, with the same verifier the broker runs: online (the export, the checkpoints and the
// public key read from the broker) or offline from an export file and the public key. Names the first record where
// the chain breaks and exits 1. Records hold names and numbers only; there is nothing secret to print.

import { defineCommand } from "citty";
import { createChainVerifier, type ChainBreak, type ChainPoint, type ChainVerification, type ChainVerifierOptions } from "../../crypto/index.ts";
import type { AuditExportAnswerBody } from "../../contract/index.ts";
import { CliExit, CliFailure, jsonArg, openContext, pickVaultOrOnly, printJson, printLine, printNote, vaultArg } from "../kit/index.ts";
import { readCheckpointsFile, readExportFile, readPublicKeyFile } from "./audit-files.ts";
import { ocsfApiActivity } from "./audit-ocsf.ts";
import { anchorLine, chainLine, checkpointLine, exportPages, fetchCheckpoints, fetchPublicKey, recordLine } from "./audit-sources.ts";

const exportCommand = defineCommand({
  meta: {
    name: "export",
    description: "Write the vault's audit hash chain: JSON lines (chain, records, checkpoints) or OCSF API Activity events",
  },
  args: {
    ...vaultArg,
    format: {
      type: "string",
      description: "jsonl (default: the chain, every record and checkpoint, as docs/audit-chain.md says) or ocsf (OCSF 1.6.0 API Activity, one event a line)",
    },
    output: { type: "string", alias: "o", description: "Write to this file instead of standard output" },
  },
  async run({ args }) {
    const format = args.format ?? "jsonl";
    if (format !== "jsonl" && format !== "ocsf") throw new CliFailure("--format must be jsonl or ocsf", undefined, 2);
    const ctx = openContext();
    const vault = await pickVaultOrOnly(ctx, args.vault);
    // Checkpoints first: every head they signed is then among the records read after them.
    const checkpoints = await fetchCheckpoints(ctx, vault);
    const sink = args.output ? Bun.file(args.output).writer() : Bun.stdout.writer();
    let records = 0;
    let first: AuditExportAnswerBody | undefined;
    let anchorSeq = 0;
    for await (const page of exportPages(ctx, vault)) {
      if (!first) {
        first = page;
        anchorSeq = page.anchor.seq;
        if (format === "jsonl") sink.write(`${JSON.stringify(chainLine(page))}\n`);
      } else if (page.anchor.seq > anchorSeq) {
        // Retention removed records while the export ran: the chain goes on from its signed anchor.
        anchorSeq = page.anchor.seq;
        if (format === "jsonl") sink.write(`${anchorLine(page.anchor)}\n`);
      }
      for (const r of page.records) {
        sink.write(`${format === "jsonl" ? recordLine(r) : JSON.stringify(ocsfApiActivity(r, page.vault_id, page.principal_names))}\n`);
      }
      records += page.records.length;
      await sink.flush();
    }
    if (format === "jsonl") for (const c of checkpoints) sink.write(`${checkpointLine(c)}\n`);
    await sink.end();
    if (args.output)
      printNote(
        `Wrote ${records} records of vault ${vault}${format === "jsonl" ? ` and ${checkpoints.length} checkpoints` : " as OCSF API Activity events"} to ${args.output}.`,
      );
  },
});

function describeResult(vault: string, r: ChainVerification, anchor: ChainPoint): string {
  const cps = `${r.checkpoints} checkpoint${r.checkpoints === 1 ? "" : "s"} checked`;
  const n = `${r.records} record${r.records === 1 ? "" : "s"}`;
  if (!r.verified) return `verified ${n} of vault ${vault} (no record after seq ${anchor.seq}); ${cps}`;
  return `verified ${n} of vault ${vault} up to seq ${r.verified.seq} (time ${new Date(r.verified.at).toISOString()}); ${cps}`;
}

function failWith(breaks: readonly ChainBreak[]): never {
  const more = breaks.length - 1;
  throw new CliFailure(
    breaks[0]!.message,
    more > 0
      ? `${more} more break${more === 1 ? "" : "s"} follow${more === 1 ? "s" : ""}; --json lists them all`
      : "the log was changed after it was written: compare with an earlier export, or a checkpoint kept outside the broker",
  );
}

const verifyCommand = defineCommand({
  meta: {
    name: "verify",
    description: "Verify the vault's audit hash chain and signed checkpoints (online, or offline from an export); names the first break and exits 1",
  },
  args: {
    ...vaultArg,
    "from-export": { type: "string", description: "Verify this file (from `broker audit export --format jsonl`) instead of asking the broker" },
    "public-key": {
      type: "string",
      description: "The broker's checkpoint public key (PEM, or GET /v1/audit/public-key's answer); online it replaces the one the broker gives",
    },
    checkpoints: {
      type: "string",
      description:
        "Checkpoints kept outside the broker (the audit.checkpoint webhook bodies, one a line): checked too, and any the broker no longer holds is named",
    },
    ...jsonArg,
  },
  async run({ args }) {
    const fromFile = args["from-export"];
    let pem = args["public-key"] ? readPublicKeyFile(args["public-key"]) : undefined;
    const outside = args.checkpoints ? [{ source: args.checkpoints, checkpoints: readCheckpointsFile(args.checkpoints) }] : [];
    const mustBeSigned = (through: number | null | undefined, seconds: number | null | undefined): ChainVerifierOptions["mustBeSigned"] =>
      typeof through === "number" && typeof seconds === "number" ? { through, everyMs: seconds * 1000 } : undefined;
    let vaultName: string;
    let anchor: ChainPoint;
    let unchainedBefore = 0;
    let result: ChainVerification;
    if (fromFile) {
      const file = readExportFile(fromFile);
      if (args.vault && args.vault !== file.chain.vault) throw new CliFailure(`${fromFile} is the export of vault ${file.chain.vault}, not ${args.vault}`);
      vaultName = file.chain.vault;
      anchor = file.chain.anchor;
      unchainedBefore = file.chain.unchained?.before_chain ?? 0;
      const verifier = await keyed(() =>
        createChainVerifier({
          vaultId: file.chain.vault_id,
          anchor,
          head: file.chain.head,
          checkpoints: file.checkpoints,
          outsideCheckpoints: outside,
          mustBeSigned: mustBeSigned(file.chain.signed_through, file.chain.checkpoint_seconds),
          publicKey: pem ? { pem } : undefined,
          unchainedAfterChain: file.chain.unchained?.after_chain,
        }),
      );
      for (const e of file.entries) {
        if ("record" in e) verifier.push(e.record);
        else await verifier.moveAnchor(e.anchor);
      }
      result = verifier.finish();
    } else {
      const ctx = openContext();
      vaultName = await pickVaultOrOnly(ctx, args.vault);
      pem ??= await fetchPublicKey(ctx);
      const checkpoints = await fetchCheckpoints(ctx, vaultName);
      let verifier: Awaited<ReturnType<typeof createChainVerifier>> | undefined;
      anchor = { seq: 0, hash: "" };
      for await (const page of exportPages(ctx, vaultName)) {
        if (!verifier) {
          anchor = page.anchor;
          unchainedBefore = page.unchained?.before_chain ?? 0;
          verifier = await keyed(() =>
            createChainVerifier({
              vaultId: page.vault_id,
              anchor: page.anchor,
              head: page.head,
              checkpoints,
              outsideCheckpoints: outside,
              mustBeSigned: mustBeSigned(page.signed_through, page.checkpoint_seconds),
              publicKey: pem ? { pem } : undefined,
              unchainedAfterChain: page.unchained?.after_chain,
            }),
          );
        } else if (page.anchor.seq > anchor.seq) {
          anchor = page.anchor;
          await verifier.moveAnchor(page.anchor); // retention removed records meanwhile
        }
        for (const r of page.records) verifier.push(r);
      }
      result = verifier!.finish();
    }
    if (args.json) {
      printJson({ vault: vaultName, ...result, unchained_before_chain: unchainedBefore });
      if (!result.ok) throw new CliExit(1);
      return;
    }
    if (!result.ok) failWith(result.breaks);
    printLine(describeResult(vaultName, result, anchor));
    if (result.uncheckedCheckpoints)
      printNote(
        `${result.uncheckedCheckpoints} checkpoint${result.uncheckedCheckpoints === 1 ? " was" : "s were"} not checked: pass --public-key FILE (the broker's GET /v1/audit/public-key)`,
      );
    if (unchainedBefore)
      printNote(`${unchainedBefore} earlier record${unchainedBefore === 1 ? " was" : "s were"} written before the chain began: not verified`);
  },
});

/** Runs `make`, turning a public key that does not import into the CLI's failure. */
async function keyed<T>(make: () => Promise<T>): Promise<T> {
  try {
    return await make();
  } catch (err) {
    if (err instanceof Error && err.message.startsWith("the public key")) throw new CliFailure(err.message, "give the PEM of GET /v1/audit/public-key");
    throw err;
  }
}

export default defineCommand({
  meta: { name: "audit", description: "Export the vault's audit log with its hash chain, or verify that nothing in it was changed" },
  subCommands: { export: exportCommand, verify: verifyCommand },
});

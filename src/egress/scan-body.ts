// A response body on its way to the agent, in one stream layer: decoded when compressed
// (content-coding.ts), redacted, encoded again, counted and capped. Shared by ordinary responses
// (egress.ts) and refused WebSocket upgrades (websocket-head.ts), so both scan the same way.

import { BrokerError, PayloadTooLarge } from "../errors.ts";
import { createBodyRecoder, type Coding } from "./content-coding.ts";
import { bodyCharset } from "./headers.ts";
import { compileNeedles, createRedactor, type NeedleSet, type RedactOptions } from "./redact.ts";

/** Runs once: the upstream body bytes read, and an audit error code (null when the body ended cleanly). */
export type BodyDone = (bytesOut: number, error: string | null) => void;

export interface ScanOptions {
  /** Values to replace; none means the body passes unchanged (only counted and capped). */
  readonly needles: NeedleSet;
  /** UTF-16 text (textUnitOf): replacements written in it, on whole code units. */
  readonly utf16?: RedactOptions["utf16"];
  /** The body's content codings, outermost last (from parseCodings). */
  readonly codings: readonly Coding[];
  /** Upstream bytes allowed (0 = no cap); beyond it the stream breaks, never truncates in silence. */
  readonly maxBytes: number;
  readonly done: BodyDone;
}

/** The UTF-16 byte order a Content-Type's charset declares ("bom": plain utf-16, read from the body), if any. */
export function utf16Of(contentType: string | undefined): RedactOptions["utf16"] {
  const charset = bodyCharset(contentType);
  if (charset === "utf-16le" || charset === "unicodefffe") return "le";
  if (charset === "utf-16be") return "be";
  return charset === "utf-16" || charset === "ucs-2" || charset === "unicode" ? "bom" : undefined;
}

export function scanBodyStream(source: ReadableStream<Uint8Array>, opts: ScanOptions): ReadableStream<Uint8Array> {
  const needles = compileNeedles(opts.needles);
  const redactor = needles.empty ? undefined : createRedactor(needles, { utf16: opts.utf16 });
  const recoder = redactor && opts.codings.length ? createBodyRecoder(opts.codings, redactor) : undefined;
  return transformBody(
    source,
    {
      push: async (chunk) => (recoder ? await recoder.push(chunk) : redactor ? redactor.push(chunk) : chunk),
      end: async () => (recoder ? await recoder.end() : redactor?.flush()),
      destroy: () => recoder?.destroy(),
    },
    opts.maxBytes,
    opts.done,
  );
}

/** One step of a body's way to the agent: bytes in, bytes out (maybe none yet), the rest at the end. */
export interface BodyStep {
  push(chunk: Uint8Array): Promise<Uint8Array> | Uint8Array;
  end(): Promise<Uint8Array | undefined> | Uint8Array | undefined;
  destroy?(): void;
}

/**
 * A body through `step`, counted and capped (`maxBytes` upstream bytes, 0 = no cap; beyond it the
 * stream breaks, never truncates in silence); `done` hears the count and how it ended, once.
 */
export function transformBody(source: ReadableStream<Uint8Array>, step: BodyStep, maxBytes: number, done: BodyDone): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  let bytesOut = 0;
  let reported = false;
  const report = (error: string | null) => {
    if (!reported) (reported = true), done(bytesOut, error);
  };
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        // Loop until something is enqueued: a pull that enqueues nothing is not called again.
        for (;;) {
          const { done: end, value } = await reader.read();
          if (end) {
            const rest = await step.end();
            if (rest?.length) ctrl.enqueue(rest);
            ctrl.close();
            return report(null);
          }
          bytesOut += value.byteLength;
          if (maxBytes && bytesOut > maxBytes) throw new PayloadTooLarge(`response body exceeded the broker's limit of ${maxBytes} bytes`);
          const chunk = await step.push(value);
          if (chunk.length) return ctrl.enqueue(chunk);
        }
      } catch (err) {
        report(err instanceof BrokerError ? err.code : "upstream_stream_error");
        step.destroy?.();
        await reader.cancel().catch(() => {});
        ctrl.error(err);
      }
    },
    cancel(reason) {
      report("client_cancelled");
      step.destroy?.();
      return reader.cancel(reason);
    },
  });
}

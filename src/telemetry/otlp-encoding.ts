// One signal's OTLP encoding, protobuf or JSON as configured: an export's spans or records are written
// one after the other into the signal's writer (reused from one export to the next), then framed with the
// resource and scope, written once at start. Written per batch rather than as each item is queued:
// measured in the broker, a batch's items written together cost less CPU than the same items written one
// at a time between requests (bench/otel-export.ts, docs/architecture.md D25).

import type { OtlpProtocol } from "../config.ts";
import type { LogRecordData, Source, SpanData } from "./otlp-data.ts";
import { frameJsonRequest, writeJsonFrame, writeLogRecordJson, writeSpanJson } from "./otlp-json.ts";
import { frameRequest, writeLogRecord, writeSource, writeSpan } from "./otlp-protobuf.ts";
import { ProtoWriter } from "./protobuf-writer.ts";

export interface SignalEncoding<D> {
  /**
   * The export request holding these spans or records. One that cannot be written (never expected: the
   * broker makes them all) is left out, rather than failing the batch and holding the queue behind it.
   */
  request(items: readonly D[]): Uint8Array;
}

export function traceEncoding(protocol: OtlpProtocol, source: Source): SignalEncoding<SpanData> {
  if (protocol === "http/json") {
    const frame = writeJsonFrame("traces", source);
    return encoding(writeSpanJson, (items) => frameJsonRequest(frame, items));
  }
  const head = writeSource(source);
  return encoding(writeSpan, (items) => frameRequest(head, items));
}

export function logsEncoding(protocol: OtlpProtocol, source: Source): SignalEncoding<LogRecordData> {
  if (protocol === "http/json") {
    const frame = writeJsonFrame("logs", source);
    return encoding(writeLogRecordJson, (items) => frameJsonRequest(frame, items));
  }
  const head = writeSource(source);
  return encoding(writeLogRecord, (items) => frameRequest(head, items));
}

function encoding<D>(write: (w: ProtoWriter, data: D) => void, frame: (items: Uint8Array) => Uint8Array): SignalEncoding<D> {
  const w = new ProtoWriter();
  return {
    request(items) {
      w.reset();
      for (const data of items) {
        const at = w.pos;
        try {
          write(w, data);
        } catch {
          w.pos = at;
        }
      }
      return frame(w.written());
    },
  };
}

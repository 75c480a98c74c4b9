// The agent's request body on its way out: watched for failures on the agent's side, counted and
// capped, and kept whole when it may have to be sent again (one rule, keptForResend).

import { PayloadTooLarge } from "../errors.ts";
import { wholeBody } from "./answer.ts";
import { SMALL_BODY_BYTES } from "./upstream.ts";

/** Passes a stream through unchanged, reporting the error if its source fails. */
export function watchErrors(src: ReadableStream<Uint8Array>, onError: (err: unknown) => void): ReadableStream<Uint8Array> {
  const reader = src.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        const { done, value } = await reader.read();
        if (done) ctrl.close();
        else ctrl.enqueue(value);
      } catch (err) {
        onError(err);
        ctrl.error(err);
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
}

/** Counts bytes through a stream and fails it loudly (never truncates) beyond `max` (0 = no cap). */
export function countAndCap(max: number, onCount: (n: number) => void, what: string): TransformStream<Uint8Array, Uint8Array> {
  let n = 0;
  return new TransformStream({
    transform(chunk, ctrl) {
      n += chunk.byteLength;
      onCount(n);
      if (max && n > max) ctrl.error(new PayloadTooLarge(`${what} body exceeded the broker's limit of ${max} bytes`));
      else ctrl.enqueue(chunk);
    },
  });
}

/**
 * The one rule for keeping a body to send again: a body already read whole (a request a person
 * approved, or one read for its `_method` field) is that body; a small one (at most SMALL_BODY_BYTES,
 * declared) is read whole when the exchange may need a second send (a minted token the upstream
 * refuses with 401 is refreshed and the request sent once more); a streamed one never is.
 */
export async function keptForResend(
  read: Uint8Array | undefined,
  stream: ReadableStream<Uint8Array> | null,
  declaredLength: number | null,
  mayResend: boolean,
): Promise<Uint8Array | undefined> {
  if (read?.byteLength) return read;
  if (mayResend && stream && declaredLength !== null && declaredLength <= SMALL_BODY_BYTES) return wholeBody(stream);
  return undefined;
}

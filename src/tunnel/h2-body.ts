// An HTTP/2 request body as the egress core reads it: a stream over the agent's DATA frames with
// backpressure (the stream's flow-control window only reopens as the body is read), checked against
// the Content-Length the agent announced, so an upstream never gets a body that contradicts it.

import type { ServerHttp2Stream } from "node:http2";
import { createPullQueue, type HeaderList } from "../http/index.ts";
import { InvalidRequest } from "../errors.ts";

export interface H2Body {
  readonly stream: ReadableStream<Uint8Array>;
  /** The announced Content-Length, or null (the body is sent on chunked or unsized). */
  readonly length: number | null;
}

export function createH2Body(h2: ServerHttp2Stream, headers: HeaderList): H2Body {
  const declared = headers.find(([name]) => name === "content-length")?.[1];
  if (declared !== undefined && !/^\d{1,15}$/.test(declared)) throw new InvalidRequest("content-length must be a number of bytes", "content-length");
  const length = declared === undefined ? null : Number(declared);
  const queue = createPullQueue({ pause: () => h2.pause(), resume: () => h2.resume() });
  let received = 0;
  const reset = () => h2.aborted || (h2.rstCode !== undefined && h2.rstCode !== 0);
  let ended = false;
  h2.on("data", (chunk: Buffer) => {
    received += chunk.byteLength;
    if (length !== null && received > length) return queue.fail(new InvalidRequest("the request body is longer than its content-length"));
    queue.push(chunk);
  });
  h2.once("end", () => {
    ended = true;
    if (length !== null && received !== length) return queue.fail(new InvalidRequest("the request body is shorter than its content-length"));
    // Bun also ends the body of a stream the agent reset: an RST_STREAM in the same read arrives
    // just after. Wait one turn so a reset body fails instead of reaching the upstream as complete.
    setImmediate(() => (reset() ? queue.fail(new InvalidRequest("the agent reset the stream mid-body")) : queue.end()));
  });
  // A stream the agent reset mid-body must not reach the upstream as a complete request.
  h2.once("close", () => ended || queue.fail(new InvalidRequest("the agent reset the stream mid-body")));
  const stream = new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      const chunk = await queue.read();
      if (chunk === null) ctrl.close();
      else ctrl.enqueue(chunk);
    },
  });
  return { stream, length };
}

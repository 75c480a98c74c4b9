// HTTP wire format shared by the tunnel (which speaks HTTP/1.1 and HTTP/2 to agents) and the egress
// core (which speaks them to upstreams): head parsing and serialising, chunked framing, HTTP/2 field
// lists and frame guard, a socket whose queued writes leave together, the pull side of a byte stream.

export { cappedBody } from "./capped-body.ts";
export { coalescingSocket, drained } from "./coalescing-socket.ts";
export { fieldLines, linesToFields } from "./h2-fields.ts";
export { createFrameInspector, FRAME_LIMITS, guardFrames, type FrameLimits } from "./h2-frame-guard.ts";
export { createPullQueue, type PullQueue } from "./pull-queue.ts";
export {
  createChunkedDecoder,
  encodeChunk,
  findHeadEnd,
  headerValues,
  LAST_CHUNK,
  parseRequestHead,
  requestFraming,
  serializeHead,
  WireError,
  type BodyFraming,
  type HeaderList,
  type RequestHead,
} from "./http1.ts";
export { parseResponseHead } from "./http1.ts";
export { type ResponseHead } from "./http1.ts";
export { responseFraming } from "./http1.ts";
export { hostHeader } from "./http1.ts";

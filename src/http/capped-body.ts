// A whole answer body read with a byte cap counted as it arrives: a declared length cannot be trusted and a
// chunked body declares none, so a hostile endpoint's endless answer is let go as soon as it passes the cap.

/**
 * The whole body, or undefined once more than `max` bytes arrived: the stream is cancelled there (its
 * connection let go), so nothing beyond `max` plus one read is ever held.
 */
export async function cappedBody(body: Uint8Array | ReadableStream<Uint8Array> | null, max: number): Promise<Uint8Array | undefined> {
  if (body === null) return new Uint8Array(0);
  if (body instanceof Uint8Array) return body.byteLength > max ? undefined : body;
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => {});
      return undefined;
    }
    parts.push(value);
  }
  return Buffer.concat(parts);
}

// Request bodies of API and form routes are read with a cap, streaming: an oversized body, declared
// or chunked, is refused with 413 without being held in memory (the server itself accepts large
// bodies, for /proxy uploads).

import { expect, test } from "bun:test";
import { createApi } from "../../../src/server/app.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { createTestApi } from "../../helpers/api.ts";

function endlessBody(onPull: (n: number) => void): ReadableStream<Uint8Array> {
  let sent = 0;
  const chunk = new Uint8Array(64 * 1024).fill(0x61);
  return new ReadableStream({
    pull(ctrl) {
      sent += chunk.byteLength;
      onPull(sent);
      if (sent > 64 * 1024 * 1024) ctrl.close();
      else ctrl.enqueue(chunk);
    },
  });
}

test("a chunked JSON body beyond 256 KiB gets 413 after reading little more than the cap", async () => {
  const h = await createTestApi();
  const api = createApi({ domain: h.domain, log: createMemoryLogger() });
  let pulled = 0;
  const res = await api.request("/v1/auth/login", { method: "POST", body: endlessBody((n) => (pulled = n)), headers: { "content-type": "application/json" } });
  expect(res.status).toBe(413);
  expect(await res.json()).toMatchObject({ error: "payload_too_large" });
  expect(pulled).toBeLessThan(1024 * 1024);
});

test("a declared Content-Length beyond the cap is refused before reading", async () => {
  const h = await createTestApi();
  const api = createApi({ domain: h.domain, log: createMemoryLogger() });
  let pulled = 0;
  const res = await api.request("/v1/auth/register", {
    method: "POST",
    body: endlessBody((n) => (pulled = n)),
    headers: { "content-type": "application/json", "content-length": String(10 * 1024 * 1024) },
  });
  expect(res.status).toBe(413);
  expect(pulled).toBeLessThanOrEqual(64 * 1024);
});

test("the approval page's form posts are capped too", async () => {
  const h = await createTestApi();
  const api = createApi({ domain: h.domain, log: createMemoryLogger() });
  let pulled = 0;
  const res = await api.request("/approve/1/login", {
    method: "POST",
    body: endlessBody((n) => (pulled = n)),
    headers: { "content-type": "application/x-www-form-urlencoded" },
  });
  expect(res.status).toBe(413);
  expect(pulled).toBeLessThan(1024 * 1024);
});

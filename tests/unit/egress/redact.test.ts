// No reveal by echo: the streaming redactor and header redaction.

import { describe, expect, test } from "bun:test";
import { createRedactingStream, Needles, redactWhole } from "../../../src/egress/redact.ts";
import { redactHeaders, redactText } from "../../../src/egress/redact-headers.ts";

const enc = (s: string) => new Uint8Array(Buffer.from(s, "utf8"));

async function run(needles: string[], chunks: Uint8Array[]): Promise<Buffer> {
  const src = new ReadableStream<Uint8Array>({
    start(ctrl) {
      for (const c of chunks) ctrl.enqueue(c);
      ctrl.close();
    },
  });
  const out: Uint8Array[] = [];
  const reader = src.pipeThrough(createRedactingStream(needles)).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    out.push(value);
  }
  return Buffer.concat(out);
}

/** Small deterministic PRNG (mulberry32) so failures reproduce. */
function prng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function splitAt(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const out: Uint8Array[] = [];
  let start = 0;
  for (const c of [...cuts].sort((a, b) => a - b)) {
    out.push(bytes.slice(start, c));
    start = c;
  }
  out.push(bytes.slice(start));
  return out;
}

const SECRET = "sk-SENTINEL-0123456789abcdef";

describe("createRedactingStream", () => {
  test("replaces the needle inside one chunk, every occurrence", async () => {
    const out = await run([SECRET], [enc(`a ${SECRET} b ${SECRET}${SECRET} c`)]);
    expect(out.toString()).toBe("a [redacted] b [redacted][redacted] c");
  });

  test("replaces across every split point of two chunks", async () => {
    const input = enc(`before ${SECRET} after`);
    for (let i = 0; i <= input.length; i++) {
      const out = (await run([SECRET], [input.slice(0, i), input.slice(i)])).toString();
      expect(out, `split at ${i}`).toBe("before [redacted] after");
    }
  });

  test("replaces when the needle spans three or more chunks", async () => {
    const input = enc(`x${SECRET}y`);
    for (let i = 1; i < input.length - 2; i++) {
      for (let j = i + 1; j < input.length - 1; j += 3) {
        const out = (await run([SECRET], splitAt(input, [i, j, j + 1]))).toString();
        expect(out, `cuts ${i},${j},${j + 1}`).toBe("x[redacted]y");
      }
    }
    const bytewise = [...input].map((b) => new Uint8Array([b]));
    expect((await run([SECRET], bytewise)).toString()).toBe("x[redacted]y");
  });

  test("several needles of different lengths", async () => {
    const basic = Buffer.from(`user:${SECRET}`).toString("base64");
    const input = `{"auth":"Basic ${basic}","raw":"${SECRET}","short":"ab"}`;
    const out = (await run([SECRET, `Basic ${basic}`], [enc(input)])).toString();
    expect(out).toBe(`{"auth":"[redacted]","raw":"[redacted]","short":"ab"}`);
    expect(out).not.toContain(SECRET);
    expect(out).not.toContain(basic);
  });

  test("random chunkings never let a needle through (seeded property loop)", async () => {
    const rnd = prng(0xb40c3e);
    const needles = [SECRET, "Bearer " + SECRET, "tok_9f8e7d6c5b4a"];
    const filler = 'abcdefghijklmnopqrstuvwxyz0123456789 {}":,-sk_';
    for (let round = 0; round < 300; round++) {
      let s = "";
      const parts = 2 + Math.floor(rnd() * 6);
      for (let p = 0; p < parts; p++) {
        const len = Math.floor(rnd() * 40);
        for (let k = 0; k < len; k++) s += filler[Math.floor(rnd() * filler.length)];
        s += needles[Math.floor(rnd() * needles.length)]!;
        // near-misses: prefixes of needles that must pass through unchanged
        if (rnd() < 0.5) s += SECRET.slice(0, Math.floor(rnd() * (SECRET.length - 1)));
      }
      const bytes = enc(s);
      const cutCount = Math.floor(rnd() * 12);
      const cuts = Array.from({ length: cutCount }, () => Math.floor(rnd() * (bytes.length + 1)));
      const out = (await run(needles, splitAt(bytes, cuts))).toString();
      for (const n of needles) expect(out.includes(n), `round ${round}: ${JSON.stringify(s)} cuts ${cuts}`).toBe(false);
      // Same output as redacting the whole thing in one go.
      expect(out).toBe((await run(needles, [bytes])).toString());
    }
  });

  test("bytes without needles pass byte-identical, whatever the chunking", async () => {
    const rnd = prng(42);
    const bytes = new Uint8Array(64 * 1024);
    for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(rnd() * 256);
    // A near miss of the needle (its first 11 bytes: 12 in a row would be redacted) included on purpose.
    bytes.set(enc(SECRET.slice(0, 11)), 1000);
    for (let round = 0; round < 20; round++) {
      const cuts = Array.from({ length: 1 + Math.floor(rnd() * 30) }, () => Math.floor(rnd() * (bytes.length + 1)));
      const out = await run([SECRET], splitAt(bytes, cuts));
      expect(out.equals(Buffer.from(bytes))).toBe(true);
    }
  });

  test("empty needle list and empty needles pass data through", async () => {
    expect((await run([], [enc("abc"), enc("def")])).toString()).toBe("abcdef");
    expect((await run([""], [enc("abc")])).toString()).toBe("abc");
  });

  test("a chunk whose tail cannot start a needle is emitted at once (SSE must not wait for the next event)", async () => {
    const t = createRedactingStream([SECRET]);
    const writer = t.writable.getWriter();
    const reader = t.readable.getReader();
    void writer.write(enc("data: event-0\n\n"));
    const got = await Promise.race([reader.read().then((r) => Buffer.from(r.value ?? []).toString()), Bun.sleep(100).then(() => "<held back>")]);
    expect(got).toBe("data: event-0\n\n");
    void writer.close();
  });

  test("a needle at the very end of the stream is replaced on flush", async () => {
    expect((await run([SECRET], [enc("tail:"), enc(SECRET.slice(0, 5)), enc(SECRET.slice(5))])).toString()).toBe("tail:[redacted]");
  });
});

describe("redactHeaders", () => {
  test("replaces needles in any header value, keeps the rest", () => {
    const h = new Headers();
    h.append("x-echo-auth", `Bearer ${SECRET}`);
    h.append("content-type", "application/json");
    h.append("x-multi", `${SECRET}|${SECRET}`);
    const out = new Headers(redactHeaders([...h], [SECRET]));
    expect(out.get("x-echo-auth")).toBe("Bearer [redacted]");
    expect(out.get("x-multi")).toBe("[redacted]|[redacted]");
    expect(out.get("content-type")).toBe("application/json");
    out.forEach((v) => expect(v).not.toContain(SECRET));
  });

  test("no needles: returns the headers unchanged", () => {
    const h: [string, string][] = [["a", "1"]];
    expect(redactHeaders(h, [])).toBe(h);
  });

  test("keeps repeated header values separate", () => {
    const h = new Headers();
    h.append("set-cookie", `a=${SECRET}`);
    h.append("set-cookie", "b=2");
    const out = new Headers(redactHeaders([...h], [SECRET]));
    expect(out.getSetCookie()).toEqual(["a=[redacted]", "b=2"]);
  });
});

describe("the forms an echo takes", () => {
  const secret = 'p@ss/wörd+"x"=ÿ';
  const body = (text: string | Buffer) => redactWhole(typeof text === "string" ? Buffer.from(text, "utf8") : text, [secret]);

  test("JSON-escaped (with and without \\/) and URL-encoded copies are replaced", () => {
    const json = JSON.stringify(secret).slice(1, -1);
    for (const form of [secret, json, json.replaceAll("/", "\\/"), encodeURIComponent(secret)]) {
      expect(Buffer.from(body(`a ${form} b`)).toString("utf8")).toBe("a [redacted] b");
    }
  });

  test("the latin1 bytes a header carried are replaced in a body", () => {
    const latin1 = Buffer.concat([Buffer.from("echo: "), Buffer.from(secret, "latin1")]);
    expect(Buffer.from(body(latin1)).toString("latin1")).toBe("echo: [redacted]");
  });

  test("a header named after the value is dropped, whatever its case; values in either encoding are replaced", () => {
    const token = "sk-AbC123xyz";
    const h = new Headers([
      ["x-sk-abc123xyz", "1"],
      ["x-echo", `t=${token}`],
      ["x-keep", "ok"],
    ]);
    const out = redactHeaders([...h], [token]);
    expect(out).toEqual([
      ["x-echo", "t=[redacted]"],
      ["x-keep", "ok"],
    ]);
    const utf8AsLatin1 = Buffer.from(secret, "utf8").toString("latin1");
    expect(redactHeaders([["x-echo", utf8AsLatin1]], [secret])).toEqual([["x-echo", "[redacted]"]]);
  });
});

test("compiled needles never print their values", () => {
  const n = new Needles(["sk-compiled-secret"]);
  for (const text of [String(n), JSON.stringify({ n }), Bun.inspect(n), Bun.inspect({ n })]) expect(text).not.toContain("sk-compiled-secret");
  expect(redactText("x sk-compiled-secret y", n)).toBe("x [redacted] y");
});

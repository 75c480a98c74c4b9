// The usage the broker asks a streamed OpenAI chat completion for is taken out again, so the agent receives what it
// would have without the broker: the `"usage":null` fields and the extra usage chunk go, everything else stays byte
// for byte, however the stream is cut into chunks.

import { describe, expect, test } from "bun:test";
import { askForUsage } from "../../../src/egress/llm-request.ts";
import { stripAskedUsage, stripAskedUsageWhole, usageStripper, withoutAskedUsage } from "../../../src/egress/llm-stream-usage.ts";

const chunk = (content: string, extra = "") =>
  `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}},"finish_reason":null}]${extra}}\n\n`;
const asked = [
  chunk("Hel", ',"usage":null'),
  chunk('lo, "usage":null', ',"usage":null'),
  `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}\n\n`,
  "data: [DONE]\n\n",
].join("");
const plain = [chunk("Hel"), chunk('lo, "usage":null'), "data: [DONE]\n\n"].join("");

async function through(text: string, cut: number[]): Promise<string> {
  const bytes = new TextEncoder().encode(text);
  const parts: Uint8Array[] = [];
  let from = 0;
  for (const at of [...cut, bytes.length]) {
    parts.push(bytes.subarray(from, at));
    from = at;
  }
  const source = new ReadableStream<Uint8Array>({
    start(c) {
      for (const p of parts) c.enqueue(p);
      c.close();
    },
  });
  return await new Response(source.pipeThrough(stripAskedUsage())).text();
}

describe("taking the asked-for usage out", () => {
  test("the stream with usage asked for becomes the stream without, byte for byte", async () => {
    expect(await through(asked, [])).toBe(plain);
    expect(new TextDecoder().decode(stripAskedUsageWhole(new TextEncoder().encode(asked)))).toBe(plain);
  });

  test("however the stream is cut (every single cut point, and one byte at a time)", async () => {
    const bytes = new TextEncoder().encode(asked).length;
    for (let at = 1; at < bytes; at += 7) expect(await through(asked, [at])).toBe(plain);
    expect(
      await through(
        asked,
        Array.from({ length: bytes - 1 }, (_, i) => i + 1),
      ),
    ).toBe(plain);
  });

  test("CRLF line ends are kept", async () => {
    expect(await through(asked.replaceAll("\n", "\r\n"), [50])).toBe(plain.replaceAll("\n", "\r\n"));
  });

  test("text that only looks like the field, inside a string, is left alone", () => {
    const line = `data: {"choices":[{"delta":{"content":"\\"usage\\":null"}}]}`;
    expect(withoutAskedUsage(line)).toBe(line);
  });

  test("a usage chunk that still has choices is not dropped; lines that are not JSON pass", () => {
    const line = `data: {"choices":[{"delta":{}}],"usage":{"total_tokens":3}}`;
    expect(withoutAskedUsage(line)).toBe(line);
    expect(withoutAskedUsage("data: not json usage")).toBe("data: not json usage");
    expect(withoutAskedUsage(": comment")).toBe(": comment");
  });

  test("a line without an end, sent a byte at a time, is searched once (not its whole pending text per chunk)", () => {
    const lines = usageStripper();
    const indexOf = String.prototype.indexOf;
    let searched = 0;
    String.prototype.indexOf = function (this: string, what: string, from?: number) {
      searched += this.length - (from ?? 0);
      return indexOf.call(this, what, from);
    };
    try {
      for (let i = 0; i < 50_000; i++) lines.push("a");
    } finally {
      String.prototype.indexOf = indexOf;
    }
    expect(searched).toBeLessThanOrEqual(50_000);
  });

  test("a line longer than a usage chunk is passed on as it comes, not held", async () => {
    const long = `data: {"x":"${"a".repeat(2 * 1024 * 1024)}"}\n\n`;
    expect(await through(long, [100, 1024 * 1024 + 500])).toBe(long);
  });
});

describe("asking for the usage", () => {
  const ask = (body: string) => {
    const out = askForUsage(new TextEncoder().encode(body));
    return out.kind === "asked" ? new TextDecoder().decode(out.body) : out.kind;
  };
  test("added at the start, the agent's bytes otherwise unchanged", () => {
    expect(ask('{ "model": "gpt-4o", "stream": true, "messages": [] }')).toBe(
      '{"stream_options":{"include_usage":true}, "model": "gpt-4o", "stream": true, "messages": [] }',
    );
  });
  test("an existing stream_options is merged; include_usage false is turned on", () => {
    expect(JSON.parse(ask('{"stream":true,"stream_options":{"include_usage":false,"x":1}}')!)).toEqual({
      stream: true,
      stream_options: { include_usage: true, x: 1 },
    });
  });
  test("nothing changes when not streamed or already asked; a body that is no JSON object is unreadable", () => {
    expect(ask('{"stream":false}')).toBe("as-is");
    expect(ask('{"messages":[]}')).toBe("as-is");
    expect(ask('{"stream":true,"stream_options":{"include_usage":true}}')).toBe("as-is");
    expect(ask("[1]")).toBe("unreadable");
    expect(ask("not json")).toBe("unreadable");
    expect(ask('{"stream":true,')).toBe("unreadable");
  });

  test("only the members JSON parsers read count: a key's last occurrence, nested ones ignored", () => {
    // The last `stream` wins, as JSON.parse and Python's json read it.
    expect(ask('{"stream":false,"stream":true}')).toBe('{"stream_options":{"include_usage":true},"stream":false,"stream":true}');
    expect(ask('{"stream":true,"stream":false}')).toBe("as-is");
    // A `stream` inside a message is not the request's.
    expect(ask('{"messages":[{"stream":true,"content":"\\"stream\\":true"}]}')).toBe("as-is");
    // The last stream_options is the one rewritten, the rest of the bytes as they were.
    expect(ask('{"stream_options":{"include_usage":true}, "stream": true, "stream_options": {"x": 1}}')).toBe(
      '{"stream_options":{"include_usage":true}, "stream": true, "stream_options": {"x":1,"include_usage":true}}',
    );
    expect(ask('{"stream":true,"stream_options":null}')).toBe('{"stream":true,"stream_options":{"include_usage":true}}');
    // A key spelled with an escape is the key it decodes to.
    expect(ask('{"stre\\u0061m":true}')).toBe('{"stream_options":{"include_usage":true},"stre\\u0061m":true}');
  });

  test("a body of megabytes and hundreds of thousands of members is looked at without building it", () => {
    const members = Array.from({ length: 200_000 }, (_, i) => `"k${i}":[${i},{"a":"b"}]`).join(",");
    const body = `{${members},"stream":true,"stream_options":{"x":1}}`;
    // JSON.parse is asked only for the one small member it rewrites, never for the body or its other members.
    const parse = JSON.parse;
    const parsed: number[] = [];
    JSON.parse = ((text: string, reviver?: never) => (parsed.push(text.length), parse(text, reviver))) as typeof JSON.parse;
    let out: string;
    try {
      out = ask(body);
    } finally {
      JSON.parse = parse;
    }
    expect(parsed).toEqual(['{"x":1}'.length]);
    expect(out.endsWith('"stream":true,"stream_options":{"x":1,"include_usage":true}}')).toBe(true);
  });
});

// Taking out of a streamed OpenAI chat completion the usage the broker asked for (llm-request.ts), so the agent gets
// the stream it would have got: with `stream_options.include_usage` every chunk carries `"usage":null` and one more
// chunk, with no choices, carries the usage before `data: [DONE]`. The stream is handled a line at a time as it
// passes (never held whole): a line is sent on as soon as it is complete, so the first token is not delayed.

const USAGE_NULL = /,\s*"usage"\s*:\s*null(?=\s*[,}])|"usage"\s*:\s*null\s*,/g;

const MAX_HELD_LINE = 1024 * 1024;

/** The extra chunk's marks: a usage object, and an empty choices list. */
const USAGE_OBJECT = /"usage"\s*:\s*\{/;
const NO_CHOICES = /"choices"\s*:\s*\[\s*\]/;

/**
 * Rewrites one complete line (without its end): the line to send, or null to drop it. Most lines are passed or cut
 * with string operations alone (a `"usage":null` with unescaped quotes is a key, never text inside a JSON string);
 * only a line that looks like the extra usage chunk is parsed, to be sure before it is dropped.
 */
export function withoutAskedUsage(line: string): string | null {
  if (!line.startsWith("data:") || !line.includes('"usage"')) return line;
  const nulls = line.match(USAGE_NULL);
  // Only where the text holds the field exactly once can it be cut without touching anything else.
  if (nulls) return nulls.length === 1 ? line.replace(USAGE_NULL, "") : line;
  if (!USAGE_OBJECT.test(line) || !NO_CHOICES.test(line)) return line;
  let doc: unknown;
  try {
    doc = JSON.parse(line.slice(5));
  } catch {
    return line;
  }
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) return line;
  const o = doc as Record<string, unknown>;
  // The extra chunk: the usage and no choices. It goes, with the blank line that ends its event (the caller's).
  const usage = o.usage;
  return usage && typeof usage === "object" && Array.isArray(o.choices) && o.choices.length === 0 ? null : line;
}

/** The line filter over an event stream's text: each call returns what can be sent on now. */
export function usageStripper(): { push(text: string): string; end(): string } {
  let pending = "";
  /** The last line was dropped: the blank line that ends its event goes too. */
  let dropBlank = false;
  const push = (text: string): string => {
    // Only the new text can hold the next line end: the pending line was searched when it came.
    let nl = text.indexOf("\n");
    if (nl < 0) {
      pending += text;
      if (pending.length <= MAX_HELD_LINE) return "";
      const long = pending; // longer than any usage chunk: passed on as it comes, never held
      pending = "";
      return long;
    }
    nl += pending.length;
    pending += text;
    let out = "";
    let from = 0;
    for (;;) {
      if (from > 0) nl = pending.indexOf("\n", from);
      if (nl < 0) break;
      const raw = pending.slice(from, nl + 1);
      from = nl + 1;
      const ending = raw.endsWith("\r\n") ? "\r\n" : "\n";
      const line = raw.slice(0, raw.length - ending.length);
      if (dropBlank && line === "") {
        dropBlank = false;
        continue;
      }
      dropBlank = false;
      const kept = withoutAskedUsage(line);
      if (kept === null) dropBlank = true;
      else out += kept + ending;
    }
    pending = pending.slice(from);
    // A line longer than any usage chunk is passed on as it comes (its rest then starts no `data:` line): never held.
    if (pending.length > MAX_HELD_LINE) {
      out += pending;
      pending = "";
    }
    return out;
  };
  return {
    push,
    end() {
      const last = pending;
      pending = "";
      return last === "" ? "" : (withoutAskedUsage(last) ?? "");
    },
  };
}

/** A transform over an event stream's bytes that drops the asked-for usage, line by line. */
export function stripAskedUsage(): TransformStream<Uint8Array, Uint8Array> {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  const lines = usageStripper();
  const send = (text: string, ctrl: TransformStreamDefaultController<Uint8Array>) => {
    if (text) ctrl.enqueue(encoder.encode(text));
  };
  return new TransformStream({
    transform(chunk, ctrl) {
      send(lines.push(decoder.decode(chunk, { stream: true })), ctrl);
    },
    flush(ctrl) {
      send(lines.push(decoder.decode()) + lines.end(), ctrl);
    },
  });
}

/** The same filter over a whole body at once. */
export function stripAskedUsageWhole(bytes: Uint8Array): Uint8Array {
  const lines = usageStripper();
  return new TextEncoder().encode(lines.push(new TextDecoder().decode(bytes)) + lines.end());
}

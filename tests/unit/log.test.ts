// The logger cannot print a secret: Secret values, secret-named fields and token-shaped strings are
// redacted; errors log as name + message; lines below the level are dropped.

import { describe, expect, test } from "bun:test";
import { createLogger, createMemoryLogger } from "../../src/log.ts";
import { Secret } from "../../src/secret.ts";

const TOKEN = "av_sess_Xq3v9ZrLk2mPp0aB7cD8eF1gH4iJ5kL6mN_oP-qRsTu";
const parse = (line: string | undefined) => JSON.parse(line ?? "null") as Record<string, unknown>;

describe("records", () => {
  test("one JSON line per event, with time, level, event and fields", () => {
    const lines: string[] = [];
    const log = createLogger({ level: "info", write: (l) => lines.push(l), now: () => Date.UTC(2026, 0, 2, 3, 4, 5) });
    log.info("server_started", { port: 14321 });
    expect(lines).toHaveLength(1);
    expect(parse(lines[0])).toEqual({ time: "2026-01-02T03:04:05.000Z", level: "info", event: "server_started", port: 14321 });
  });

  test("child loggers add their fields", () => {
    const log = createMemoryLogger();
    log.child({ component: "tunnel" }).warn("slow", { ms: 5 });
    expect(parse(log.lines[0])).toMatchObject({ level: "warn", component: "tunnel", ms: 5 });
  });
});

describe("levels", () => {
  test("lines below the configured level are dropped", () => {
    const log = createMemoryLogger("warn");
    log.debug("d");
    log.info("i");
    log.warn("w");
    log.error("e");
    expect(log.lines.map((l) => parse(l).event)).toEqual(["w", "e"]);
  });

  test("debug lets everything through; error only errors", () => {
    const all = createMemoryLogger("debug");
    const errs = createMemoryLogger("error");
    for (const log of [all, errs]) {
      log.debug("d");
      log.info("i");
      log.warn("w");
      log.error("e");
    }
    expect(all.lines).toHaveLength(4);
    expect(errs.lines.map((l) => parse(l).event)).toEqual(["e"]);
  });
});

describe("redaction", () => {
  test("a Secret field logs as [redacted], even nested", () => {
    const log = createMemoryLogger();
    log.info("credential_loaded", { key: "API_KEY", v: new Secret("sk-live-abc123"), nested: { list: [new Secret("sk-live-abc123")] } });
    expect(log.lines[0]).not.toContain("sk-live-abc123");
    expect(parse(log.lines[0])).toMatchObject({ key: "API_KEY", v: "[redacted]", nested: { list: ["[redacted]"] } });
  });

  test.each(["password", "token", "authorization", "Authorization", "sessionToken", "master_password", "cookie", "secret"])(
    "a field named %p is redacted whatever its value",
    (name) => {
      const log = createMemoryLogger();
      log.info("e", { [name]: "plain-text-value", inner: { [name]: { a: "plain-text-value" } } });
      expect(log.lines[0]).not.toContain("plain-text-value");
      expect(parse(log.lines[0])).toMatchObject({ [name]: "[redacted]", inner: { [name]: "[redacted]" } });
    },
  );

  test("a token inside any string is masked, keeping only its prefix", () => {
    const log = createMemoryLogger();
    log.info(`lookup ${TOKEN}`, { note: `Bearer ${TOKEN} was used`, list: [TOKEN], agent: "av_agt_abc-DEF_123" });
    const line = log.lines[0]!;
    expect(line).not.toContain(TOKEN.slice("av_sess_".length));
    expect(line).not.toContain("abc-DEF_123");
    expect(parse(line)).toMatchObject({
      event: "lookup av_sess_[redacted]",
      note: "Bearer av_sess_[redacted] was used",
      list: ["av_sess_[redacted]"],
      agent: "av_agt_[redacted]",
    });
  });

  test("every token kind is masked", () => {
    const log = createMemoryLogger();
    for (const prefix of ["av_sess_", "av_agt_", "av_inv_", "av_appr_", "av_uinv_"]) log.info("e", { s: `${prefix}SeCrEtPaRt123` });
    expect(log.lines.join("\n")).not.toContain("SeCrEtPaRt123");
  });

  test("errors log name and message only, with tokens masked", () => {
    const log = createMemoryLogger();
    const err = new TypeError(`bad token ${TOKEN}`);
    Object.assign(err, { config: { password: "x" }, extra: "should-not-appear" });
    log.error("failed", { err });
    const record = parse(log.lines[0]);
    expect(record.err).toEqual({ name: "TypeError", message: "bad token av_sess_[redacted]" });
    expect(log.lines[0]).not.toContain("should-not-appear");
    expect(log.lines[0]).not.toContain(" at ");
  });

  test("bytes log as their length", () => {
    const log = createMemoryLogger();
    log.info("e", { blob: new Uint8Array([1, 2, 3, 4]) });
    expect(parse(log.lines[0]).blob).toBe("[4 bytes]");
  });

  test("a Secret in a child logger's base fields is redacted", () => {
    const log = createMemoryLogger();
    log.child({ apiKey: new Secret("sk-base-999") }).info("e");
    expect(log.lines[0]).not.toContain("sk-base-999");
  });
});

// cli.json: a 0600 file in a 0700 directory, whatever the umask and whatever was there before.

import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readCliState, statePath, updateCliState } from "../../../src/cli/kit/state.ts";
import { Secret } from "../../../src/secret.ts";
import { tempDir } from "../../helpers/binary.ts";

const mode = (p: string) => statSync(p).mode & 0o777;
const saved = process.umask();
afterEach(() => void process.umask(saved));

describe("cli.json", () => {
  test("is created 0600 inside a 0700 directory even under umask 000", () => {
    process.umask(0o000);
    const dir = join(tempDir(), "nested", "broker");
    updateCliState(dir, { address: "http://127.0.0.1:1", token: new Secret("av_sess_abc") });
    expect(mode(dir)).toBe(0o700);
    expect(mode(statePath(dir))).toBe(0o600);
  });

  test("tightens a directory and file that already existed with loose modes", () => {
    process.umask(0o000);
    const dir = join(tempDir(), "broker");
    mkdirSync(dir, { mode: 0o777 });
    chmodSync(dir, 0o777);
    writeFileSync(statePath(dir), "{}", { mode: 0o666 });
    chmodSync(statePath(dir), 0o666);
    updateCliState(dir, { vault: "v1" });
    expect(mode(dir)).toBe(0o700);
    expect(mode(statePath(dir))).toBe(0o600);
  });

  test("round-trips, keeps the token in Secret, and removes fields set to null", () => {
    const dir = join(tempDir(), "broker");
    updateCliState(dir, { address: "http://a", token: new Secret("av_sess_t"), email: "a@b.c", vault: "v" });
    const state = readCliState(dir);
    expect(state.token).toBeInstanceOf(Secret);
    expect(state.token?.reveal()).toBe("av_sess_t");
    expect(JSON.stringify(state)).not.toContain("av_sess_t");
    updateCliState(dir, { token: null, email: null });
    expect(JSON.parse(readFileSync(statePath(dir), "utf8"))).toEqual({ address: "http://a", vault: "v" });
  });

  test("a missing file is an empty state; a corrupt one is a clear failure", () => {
    const dir = tempDir();
    expect(readCliState(dir)).toEqual({});
    writeFileSync(statePath(dir), "{not json");
    expect(() => readCliState(dir)).toThrow("not valid JSON");
  });
});

// Which address, token and vault a command uses, from flags, environment and cli.json.

import { describe, expect, test } from "bun:test";
import { openContext, pickVault, saveLogin } from "../../../src/cli/kit/context.ts";
import { CliFailure } from "../../../src/cli/kit/fail.ts";
import { readCliState, updateCliState } from "../../../src/cli/kit/state.ts";
import { Secret } from "../../../src/secret.ts";
import { tempDir } from "../../helpers/binary.ts";

function withSaved(state: Parameters<typeof updateCliState>[1]): string {
  const dir = tempDir();
  updateCliState(dir, state);
  return dir;
}

describe("openContext", () => {
  test("address: --address, then BROKER_ADDR, then saved, then the default", () => {
    const dir = withSaved({ address: "http://saved:1" });
    expect(openContext({ env: { BROKER_CONFIG_DIR: dir } }).addr).toBe("http://saved:1");
    expect(openContext({ env: { BROKER_CONFIG_DIR: dir, BROKER_ADDR: "http://env:2" } }).addr).toBe("http://env:2");
    expect(openContext({ env: { BROKER_CONFIG_DIR: dir, BROKER_ADDR: "http://env:2" }, address: "http://flag:3/" }).addr).toBe("http://flag:3");
    expect(openContext({ env: { BROKER_CONFIG_DIR: tempDir() } }).addr).toBe("http://127.0.0.1:14321");
    expect(() => openContext({ env: { BROKER_CONFIG_DIR: dir }, address: "not a url" })).toThrow(CliFailure);
  });

  test("a saved token is only sent to the address it was issued by", () => {
    const dir = withSaved({ address: "http://saved:1", token: new Secret("av_sess_saved") });
    expect(openContext({ env: { BROKER_CONFIG_DIR: dir } }).client.hasToken).toBe(true);
    expect(openContext({ env: { BROKER_CONFIG_DIR: dir, BROKER_ADDR: "http://elsewhere:1" } }).client.hasToken).toBe(false);
    expect(openContext({ env: { BROKER_CONFIG_DIR: dir, BROKER_ADDR: "http://elsewhere:1", BROKER_SESSION_TOKEN: "av_agt_x" } }).client.hasToken).toBe(true);
  });

  test("vault: --vault, then `vault use`, then BROKER_VAULT, else a failure with a hint", () => {
    const dir = withSaved({ vault: "used" });
    const ctx = openContext({ env: { BROKER_CONFIG_DIR: dir, BROKER_VAULT: "env" } });
    expect(pickVault(ctx, "flag")).toBe("flag");
    expect(pickVault(ctx, undefined)).toBe("used");
    expect(pickVault(openContext({ env: { BROKER_CONFIG_DIR: tempDir(), BROKER_VAULT: "env" } }), undefined)).toBe("env");
    const none = openContext({ env: { BROKER_CONFIG_DIR: tempDir() } });
    expect(() => pickVault(none, undefined)).toThrow("no vault selected");
  });

  test("logging in to another server forgets the vault chosen on the old one", () => {
    const dir = withSaved({ address: "http://old:1", vault: "v" });
    saveLogin(openContext({ env: { BROKER_CONFIG_DIR: dir }, address: "http://old:1" }), { token: new Secret("t1") });
    expect(readCliState(dir).vault).toBe("v");
    saveLogin(openContext({ env: { BROKER_CONFIG_DIR: dir }, address: "http://new:1" }), { token: new Secret("t2"), email: "a@b.c" });
    expect(readCliState(dir)).toMatchObject({ address: "http://new:1", email: "a@b.c", vault: undefined });
  });
});

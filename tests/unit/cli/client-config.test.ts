// loadClientConfig: where cli.json lives, and the BROKER_* overrides the CLI honours.

import { describe, expect, test } from "bun:test";
import { ConfigError } from "../../../src/config.ts";
import { loadClientConfig } from "../../../src/config-client.ts";
import { Secret } from "../../../src/secret.ts";

describe("loadClientConfig", () => {
  test("config dir: BROKER_CONFIG_DIR, then absolute XDG_CONFIG_HOME/broker, then ~/.config/broker", () => {
    expect(loadClientConfig({ HOME: "/h", XDG_CONFIG_HOME: "/x", BROKER_CONFIG_DIR: "/c/" }).configDir).toBe("/c");
    expect(loadClientConfig({ HOME: "/h", XDG_CONFIG_HOME: "/x/" }).configDir).toBe("/x/broker");
    expect(loadClientConfig({ HOME: "/h", XDG_CONFIG_HOME: "relative" }).configDir).toBe("/h/.config/broker");
    expect(loadClientConfig({ HOME: "/h/" }).configDir).toBe("/h/.config/broker");
  });

  test("overrides: address normalised, token wrapped in Secret, vault trimmed", () => {
    const c = loadClientConfig({ HOME: "/h", BROKER_ADDR: "https://broker.example/", BROKER_SESSION_TOKEN: "av_sess_x", BROKER_VAULT: " v1 " });
    expect(c.addr).toBe("https://broker.example");
    expect(c.sessionToken).toBeInstanceOf(Secret);
    expect(c.sessionToken?.reveal()).toBe("av_sess_x");
    expect(c.vault).toBe("v1");
    expect(Object.isFrozen(c)).toBe(true);
    expect(JSON.stringify(c)).not.toContain("av_sess_x");
  });

  test("empty overrides count as unset", () => {
    const c = loadClientConfig({ HOME: "/h", BROKER_ADDR: "", BROKER_SESSION_TOKEN: " ", BROKER_VAULT: "" });
    expect(c).toMatchObject({ addr: undefined, sessionToken: undefined, vault: undefined });
  });

  test("reports every problem at once, naming the variables", () => {
    let err: unknown;
    try {
      loadClientConfig({ BROKER_CONFIG_DIR: "rel", BROKER_ADDR: "ftp://x" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems.join("\n")).toContain("BROKER_CONFIG_DIR");
    expect((err as ConfigError).problems.join("\n")).toContain("BROKER_ADDR");
    expect(() => loadClientConfig({ BROKER_ADDR: "http://u:p@h", HOME: "/h" })).toThrow(ConfigError);
    expect(() => loadClientConfig({})).toThrow("HOME is unknown");
  });
});

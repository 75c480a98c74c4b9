// `vault run` warns when the child's Node ignores NODE_USE_ENV_PROXY (before 22.21 and 24.5).

import { describe, expect, test } from "bun:test";
import { honoursEnvProxy, nodeProxyWarning } from "../../../src/cli/kit/node-proxy.ts";

describe("honoursEnvProxy", () => {
  test("22.21+ and 24.5+ (and 25 on) honour it; older lines and 23 do not", () => {
    const table = ["v18.20.0", "v20.20.2", "v22.20.0", "v22.21.0", "v23.11.0", "v24.4.1", "v24.5.0", "v25.0.0", "junk"].map((v) => [v, honoursEnvProxy(v)]);
    expect(table).toEqual([
      ["v18.20.0", false],
      ["v20.20.2", false],
      ["v22.20.0", false],
      ["v22.21.0", true],
      ["v23.11.0", false],
      ["v24.4.1", false],
      ["v24.5.0", true],
      ["v25.0.0", true],
      ["junk", undefined],
    ]);
  });
});

describe("nodeProxyWarning", () => {
  const path = process.env.PATH;
  test("node, npx and npm running an old Node get the warning with the fix; other commands and new Nodes none", () => {
    const old = () => "v20.11.1";
    for (const cmd of [
      ["node", "app.js"],
      ["npx", "tsx", "a.ts"],
      ["npm", "start"],
    ]) {
      const w = nodeProxyWarning(cmd, path, old);
      expect(w).toContain("is Node v20.11.1, which ignores NODE_USE_ENV_PROXY");
      expect(w).toContain("Use Node 22.21+ or 24.5+");
      expect(w).toContain("setGlobalDispatcher(new EnvHttpProxyAgent())");
    }
    expect(nodeProxyWarning(["curl", "https://x"], path, old)).toBeUndefined();
    expect(nodeProxyWarning(["node", "app.js"], path, () => "v24.5.0")).toBeUndefined();
    expect(nodeProxyWarning(["node", "app.js"], "/nonexistent", old)).toBeUndefined(); // no node on PATH: nothing to say
  });

  const haveNode = Bun.which("node") !== null;
  if (!haveNode) console.warn('skipped "the real node on this machine is asked its version": no node on PATH');
  test.skipIf(!haveNode)("the real node on this machine is asked its version", () => {
    const real = Bun.spawnSync(["node", "--version"]).stdout.toString().trim();
    const w = nodeProxyWarning(["node", "-e", ""], path);
    if (honoursEnvProxy(real) === false) expect(w).toContain(`is Node ${real}, which ignores NODE_USE_ENV_PROXY`);
    else expect(w).toBeUndefined();
  });
});

// `vault run` and older Node: before 22.21 (22.x) and 24.5 (24.x), Node ignores NODE_USE_ENV_PROXY, so fetch()
// in the child goes straight to the host, without the credential, and the person sees an unexplained 401.
// Only reads `node --version`; never changes the child's command or environment.

import { basename } from "node:path";

/** Commands that run the `node` found on PATH (or are node). */
const NODE_LAUNCHERS = new Set(["node", "nodejs", "npx", "npm", "pnpm", "yarn", "tsx"]);

/** Whether a Node version (`v20.20.2`) honours NODE_USE_ENV_PROXY; undefined when it cannot be read. */
export function honoursEnvProxy(version: string): boolean | undefined {
  const m = /^v?(\d+)\.(\d+)\./.exec(version.trim());
  if (!m) return undefined;
  const major = Number(m[1]);
  const minor = Number(m[2]);
  if (major === 24) return minor >= 5;
  if (major === 22) return minor >= 21;
  return major >= 25;
}

function readNodeVersion(node: string): string | undefined {
  try {
    const r = Bun.spawnSync([node, "--version"], { stdout: "pipe", stderr: "ignore", timeout: 3000 });
    return r.exitCode === 0 ? r.stdout.toString().trim() : undefined;
  } catch {
    return undefined;
  }
}

/** A warning when the child is Node (directly or through npx/npm) and that Node ignores NODE_USE_ENV_PROXY. */
export function nodeProxyWarning(command: readonly string[], path: string | undefined, readVersion = readNodeVersion): string | undefined {
  const first = command[0] ?? "";
  const name = basename(first);
  if (!NODE_LAUNCHERS.has(name)) return undefined;
  const direct = name === "node" || name === "nodejs";
  const node = direct && first.includes("/") ? first : Bun.which(direct ? name : "node", { PATH: path ?? "" });
  const version = node ? readVersion(node) : undefined;
  if (!version || honoursEnvProxy(version) !== false) return undefined;
  return (
    `warning: ${node} is Node ${version}, which ignores NODE_USE_ENV_PROXY: fetch() in it goes straight to the host, ` +
    "without the credential (expect 401s). Use Node 22.21+ or 24.5+, or in the program install undici and call " +
    "setGlobalDispatcher(new EnvHttpProxyAgent()) before the first fetch."
  );
}

// The CLI's manners, run in process through main(): "did you mean" for unknown commands and flags, a
// missing argument answered with the usage line (not the whole help), bare groups that run their
// `list` or show their help, and USAGE lines that start with `broker`, for every command in the tree.

import { describe, expect, test } from "bun:test";
import { rootCommand } from "../../../src/cli/index.ts";
import { type CommandNode, loadCommandTree } from "../../../src/cli/kit/index.ts";
import { listCommands } from "../../../src/cli/kit/command-tree.ts";
import { runOffline } from "../../helpers/cli-offline.ts";

const tree = await loadCommandTree(rootCommand);
const groups = listCommands(tree).filter((n) => n.path.length > 0 && n.subcommands.length > 0);
const names = (n: CommandNode) => n.subcommands.map((s) => s.path.at(-1));

describe("did you mean", () => {
  test("an unknown command names the closest real one, exit 2", async () => {
    expect(await runOffline(["vualt"])).toEqual({ code: 2, out: "", err: 'error: unknown command "vualt"\ndid you mean: broker vault?\n' });
    expect(await runOffline(["vault", "lsit", "--json"])).toEqual({
      code: 2,
      out: "",
      err: 'error: unknown command "lsit"\ndid you mean: broker vault list?\n',
    });
    expect((await runOffline(["auth", "sesions", "list"])).err).toContain("did you mean: broker auth sessions?");
    expect((await runOffline(["se"])).err).toContain("did you mean: broker server, broker service or broker secret-store?");
    // Asking for help on a typo gets the same answer, not the parent's help.
    expect(await runOffline(["vualt", "--help"])).toEqual({ code: 2, out: "", err: 'error: unknown command "vualt"\ndid you mean: broker vault?\n' });
  });

  test("with nothing close, it points at the group's help", async () => {
    expect(await runOffline(["xyzzy"])).toEqual({ code: 2, out: "", err: 'error: unknown command "xyzzy"\nsee `broker --help` for the commands\n' });
    expect((await runOffline(["vault", "qqqqqq"])).err).toContain("see `broker vault --help` for the commands");
    // A word from Object.prototype is not a command either.
    expect((await runOffline(["constructor"])).code).toBe(2);
  });

  test("an unknown flag names the closest real flag of that command, exit 2", async () => {
    expect(await runOffline(["credential", "list", "--vualt", "v"])).toEqual({
      code: 2,
      out: "",
      err: "error: unknown option --vualt\ndid you mean: --vault?\n",
    });
    expect((await runOffline(["credential", "list", "--vualt=v"])).err).toContain("did you mean: --vault?");
    expect((await runOffline(["vault", "list", "--jsno"])).err).toContain("did you mean: --json?");
    expect((await runOffline(["agent", "invite", "--tokn-ttl", "1h"])).err).toContain("did you mean: --token-ttl?");
    const far = await runOffline(["vault", "list", "--frobnicate"]);
    expect(far).toEqual({ code: 2, out: "", err: "error: unknown option --frobnicate\nsee `broker vault list --help` for the accepted options\n" });
  });

  test("a flag that would carry a secret is refused as before, never 'did you mean --vault'", async () => {
    const r = await runOffline(["credential", "set", "KEY", "--value", "s3cret"]);
    expect(r.code).toBe(2);
    expect(r.err).toContain("--value does not exist: secrets are never taken on the command line");
    expect(r.err).not.toContain("did you mean");
    expect(r.err).not.toContain("s3cret");
  });
});

describe("a missing argument", () => {
  test("prints one line of error, the usage line and where the help is; not the whole help", async () => {
    expect(await runOffline(["backup"])).toEqual({
      code: 2,
      out: "",
      err: "error: missing argument <FILE>\nUSAGE broker backup [OPTIONS] <FILE>\nsee `broker backup --help`\n",
    });
    expect(await runOffline(["auth", "register"])).toEqual({
      code: 2,
      out: "",
      err: "error: missing required option --email\nUSAGE broker auth register [OPTIONS] --email=<email>\nsee `broker auth register --help`\n",
    });
    const sub = await runOffline(["auth", "sessions", "revoke"]);
    expect(sub.err.split("\n")).toEqual([
      "error: missing argument <ID>",
      "USAGE broker auth sessions revoke [OPTIONS] <ID>",
      "see `broker auth sessions revoke --help`",
      "",
    ]);
  });

  test("an enum flag's wrong value gets the same three lines", async () => {
    const r = await runOffline(["vault", "invite", "--role", "boss"]);
    expect(r.code).toBe(2);
    expect(r.err.split("\n")).toEqual([
      "error: invalid value for argument: --role (boss). Expected one of: admin, member, proxy.",
      "USAGE broker vault invite [OPTIONS]",
      "see `broker vault invite --help`",
      "",
    ]);
  });
});

describe("bare groups", () => {
  test("a group with `list` runs it: the same outcome as naming `list`, its flags included", async () => {
    const withList = groups.filter((g) => names(g).includes("list"));
    expect(withList.map((g) => g.path.join(" "))).toContain("auth sessions");
    expect(withList.map((g) => g.path.join(" "))).toContain("service");
    for (const g of withList) {
      const bare = await runOffline([...g.path]);
      expect({ path: g.path, ...bare }).toEqual({ path: g.path, ...(await runOffline([...g.path, "list"])) });
      expect(bare.err).not.toContain("No command specified");
      expect(bare.code).not.toBe(2);
    }
    expect((await runOffline(["auth", "sessions", "--jsno"])).err).toContain("did you mean: --json?");
    expect((await runOffline(["vault", "--json"])).err).toContain("cannot reach the broker"); // it ran `vault list --json`
  });

  test("a group without `list` prints its help with its commands, exit 0", async () => {
    const withoutList = groups.filter((g) => !names(g).includes("list"));
    expect(withoutList.map((g) => g.path.join(" "))).toEqual(expect.arrayContaining(["auth", "owner", "owner settings", "ca", "account"]));
    for (const g of withoutList) {
      const r = await runOffline([...g.path]);
      expect({ path: g.path, code: r.code, err: r.err }).toEqual({ path: g.path, code: 0, err: "" });
      expect(r.out).toContain(`USAGE broker ${g.path.join(" ")}`);
      expect(r.out).toContain("COMMANDS");
      for (const name of names(g)) expect(r.out).toMatch(new RegExp(`^\\s+${name}\\s`, "m"));
    }
  });

  test("a bare group's help says that it runs `list`", async () => {
    expect((await runOffline(["service", "--help"])).out).toContain("Run alone, `broker service` runs `broker service list`.");
    expect((await runOffline(["auth", "--help"])).out).not.toContain("Run alone");
  });
});

describe("USAGE lines", () => {
  test("every command's USAGE line starts with `broker` and its whole path", async () => {
    const commands = listCommands(tree);
    expect(commands.length).toBeGreaterThan(60);
    for (const c of commands) {
      const r = await runOffline([...c.path, "--help"]);
      const usage = r.out.split("\n").find((l) => l.startsWith("USAGE "));
      expect({ path: c.path, code: r.code, usage: usage?.startsWith(`USAGE ${["broker", ...c.path].join(" ")}`) }).toEqual({
        path: c.path,
        code: 0,
        usage: true,
      });
      expect(usage).not.toMatch(/\s$/);
    }
  });

  test("`vault run` shows where its command goes", async () => {
    const r = await runOffline(["vault", "run", "--help"]);
    expect(r.out).toContain("\nUSAGE broker vault run [OPTIONS] -- <command> [args…]\n");
  });
});

describe("broker completion", () => {
  test("no shell, or one it does not know: a one-line error naming the three, exit 2", async () => {
    expect(await runOffline(["completion"])).toEqual({ code: 2, out: "", err: "error: name a shell: broker completion bash, zsh or fish\n" });
    expect(await runOffline(["completion", "tcsh"])).toEqual({ code: 2, out: "", err: 'error: unknown shell "tcsh": use bash, zsh or fish\n' });
  });

  test("its help says how to install it for each shell", async () => {
    const r = await runOffline(["completion", "--help"]);
    expect(r.out).toContain("source <(broker completion bash)");
    expect(r.out).toContain("source <(broker completion zsh)");
    expect(r.out).toContain("broker completion fish > ~/.config/fish/completions/broker.fish");
    expect((await runOffline(["--help"])).out).toMatch(/completion\s+Print a completion script for bash, zsh or fish/);
  });
});

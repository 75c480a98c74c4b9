// CLI failures: what went wrong and what to do next. Thrown by commands, printed once by main.

export class CliFailure extends Error {
  constructor(
    message: string,
    readonly hint?: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/**
 * A command line the CLI cannot run (unknown command or flag, missing argument): exit 2, the message,
 * then `notes` printed as they are ("did you mean: …", the usage line), never prefixed with "hint:".
 */
export class UsageFailure extends CliFailure {
  constructor(
    message: string,
    readonly notes: readonly string[],
  ) {
    super(message, undefined, 2);
  }
}

/** Ends the CLI with an exit code and no message (e.g. `vault run` passing back its child's code). */
export class CliExit extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}

// No role lets an agent token or a scoped session (what `vault run` hands its child) touch secrets
// (architecture.md D18), so "ask an admin for a bigger role" would send an agent the wrong way. The
// broker's message says why; these say what to do next.
const PEOPLE = "a person needs the member or admin role in the vault and their own login (`broker auth login`)";

/** Next step after a 403 on `credential set|delete` and `service add|enable|disable|remove`. */
export const SECRET_WRITE_HINT =
  "an agent files a proposal (POST $BROKER_ADDR/v1/proposals; `curl $BROKER_ADDR/v1/skills/agent` shows the format) " + `and a human approves it; ${PEOPLE}`;

/** Next step after a 403 on `credential get` and `credential list --reveal`. */
export const SECRET_READ_HINT =
  "an agent calls the API through the broker (`broker vault run -- <command>`, or $BROKER_ADDR/proxy/<host>/…), " +
  `which adds the credential itself; ${PEOPLE}`;

/** Awaits an API call; a 403 from the broker keeps its message but gets `hint` as the next step. */
export async function hintOnForbidden<T>(call: Promise<T>, hint: string): Promise<T> {
  try {
    return await call;
  } catch (err) {
    // ApiFailure (client.ts) carries the HTTP status; importing it here would make an import cycle.
    if (err instanceof CliFailure && (err as { status?: unknown }).status === 403) throw new CliFailure(err.message, hint, err.exitCode);
    throw err;
  }
}

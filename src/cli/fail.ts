// CLI failures: what went wrong and what to do next. Thrown by commands, printed once by main.

export class CliFailure extends Error {
  constructor(message: string, readonly hint?: string, readonly exitCode = 1) {
    super(message);
  }
}

/** Ends the CLI with an exit code and no message (e.g. `vault run` passing back its child's code). */
export class CliExit extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}

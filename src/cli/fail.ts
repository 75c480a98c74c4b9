// CLI failures: what went wrong and what to do next. Thrown by commands, printed once by main.

export class CliFailure extends Error {
  constructor(message: string, readonly hint?: string, readonly exitCode = 1) {
    super(message);
  }
}

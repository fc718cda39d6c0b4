// The one error type of the commands: a failure the user can fix, printed by
// cli/main.ts as `gantry: <message>` with exit code 1 and no stack trace. Its
// own file, so the commands that throw it do not import the entry point that
// imports them.

/** A failure the user can fix; printed without a stack trace. */
export class CliError extends Error {}

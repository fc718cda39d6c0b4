// Workflow commands a step prints on its output, `::name key=value,…::message`
// (GitHub's "Workflow commands for GitHub Actions"; forgejo-runner handles them
// in internal/pkg/report/reporter.go, act in act/runner/command.go). Parsing
// only: what each command does is the step runner's business.

export interface WorkflowCommand {
  name: string;
  properties: Record<string, string>;
  message: string;
}

const COMMAND = /^::([^ :]+)( [^:]*)?::(.*)$/;

/** Undoes the escaping of a command's message (GitHub's escapeData). */
export function unescapeData(text: string): string {
  return text.replace(/%0D/gi, '\r').replace(/%0A/gi, '\n').replace(/%25/g, '%');
}

/** Undoes the escaping of a property value (GitHub's escapeProperty). */
function unescapeProperty(text: string): string {
  return unescapeData(text).replace(/%3A/gi, ':').replace(/%2C/gi, ',');
}

/** The command a line carries, or null for an ordinary line. */
export function parseWorkflowCommand(line: string): WorkflowCommand | null {
  const match = COMMAND.exec(line.trimEnd());
  if (match === null) return null;
  const properties: Record<string, string> = {};
  for (const pair of (match[2] ?? '').trim().split(',')) {
    const eq = pair.indexOf('=');
    if (eq > 0) properties[pair.slice(0, eq).trim()] = unescapeProperty(pair.slice(eq + 1));
  }
  return { name: match[1] ?? '', properties, message: unescapeData(match[3] ?? '') };
}

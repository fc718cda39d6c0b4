// Which program runs a `run:` script (GitHub's "jobs.<job_id>.steps[*].shell";
// act act/runner/step_run.go): a template whose `{0}` is the script file. The
// runner's own Node runs `node` scripts, so a job needs no other Node.
import fs from 'node:fs';
import path from 'node:path';

export interface ShellCommand {
  command: string;
  args: string[];
  /** The script file's extension; some interpreters need it. */
  extension: string;
}

/** Templates of the named shells. Unspecified is `bash -e {0}` (`sh -e {0}` without bash). */
const NAMED: Record<string, { template: string; extension: string }> = {
  bash: { template: 'bash --noprofile --norc -eo pipefail {0}', extension: '.sh' },
  sh: { template: 'sh -e {0}', extension: '.sh' },
  python: { template: 'python {0}', extension: '.py' },
  node: { template: 'node {0}', extension: '.js' },
  pwsh: { template: "pwsh -command . '{0}'", extension: '.ps1' },
};

/** `name` found on `searchPath`, else null. */
export function findOnPath(name: string, searchPath: string): string | null {
  for (const dir of searchPath.split(path.delimiter)) {
    if (dir === '') continue;
    const candidate = path.join(dir, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

/** Splits a template on whitespace, keeping '…' and "…" quoted words together. */
function words(template: string): string[] {
  const out: string[] = [];
  const pattern = /'([^']*)'|"([^"]*)"|(\S+)/g;
  for (const match of template.matchAll(pattern)) out.push(match[1] ?? match[2] ?? match[3] ?? '');
  return out;
}

export function shellCommand(shell: string | undefined, scriptFile: (extension: string) => string, searchPath: string) {
  let template: string;
  let extension = '.sh';
  if (shell === undefined || shell.trim() === '') {
    template = findOnPath('bash', searchPath) !== null ? 'bash -e {0}' : 'sh -e {0}';
  } else if (Object.hasOwn(NAMED, shell.trim())) {
    const named = NAMED[shell.trim()] as { template: string; extension: string };
    template = named.template;
    extension = named.extension;
  } else {
    template = shell.includes('{0}') ? shell : `${shell} {0}`;
  }
  const file = scriptFile(extension);
  const [program = 'sh', ...rest] = words(template).map((word) => word.split('{0}').join(file));
  let command = program;
  // The runner's Node runs node scripts; python may only exist as python3.
  if (program === 'node') command = process.execPath;
  else if (program === 'python' && findOnPath('python', searchPath) === null) command = 'python3';
  return { command, args: rest, extension, file } satisfies ShellCommand & { file: string };
}

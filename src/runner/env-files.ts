// The files a step writes to talk back to the runner: GITHUB_OUTPUT,
// GITHUB_ENV and GITHUB_STATE hold `NAME=value` lines or the multi-line form
//
//   NAME<<DELIMITER
//   line 1
//   line 2
//   DELIMITER
//
// (GitHub's "Setting an environment variable"/"Multiline strings"; act reads
// them in act/runner/step.go). GITHUB_PATH holds one directory per line.
import fs from 'node:fs/promises';

export class EnvFileError extends Error {}

async function readIfPresent(file: string): Promise<string> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return '';
    throw error;
  }
}

/** Parses the key/value form; a later value of a name replaces an earlier one. */
export function parseEnvFile(text: string): Map<string, string> {
  const values = new Map<string, string>();
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (line.trim() === '') continue;
    const heredoc = line.indexOf('<<');
    const eq = line.indexOf('=');
    if (heredoc > 0 && (eq < 0 || heredoc < eq)) {
      const name = line.slice(0, heredoc);
      const delimiter = line.slice(heredoc + 2);
      if (delimiter === '') throw new EnvFileError(`"${name}<<" has no delimiter`);
      const body: string[] = [];
      let closed = false;
      for (i++; i < lines.length; i++) {
        if (lines[i] === delimiter) {
          closed = true;
          break;
        }
        body.push(lines[i] ?? '');
      }
      if (!closed) throw new EnvFileError(`the value of "${name}" never ends with its delimiter "${delimiter}"`);
      values.set(name, body.join('\n'));
    } else if (eq > 0) {
      values.set(line.slice(0, eq), line.slice(eq + 1));
    } else {
      throw new EnvFileError(`"${line}" is neither NAME=value nor NAME<<DELIMITER`);
    }
  }
  return values;
}

export async function readEnvFile(file: string): Promise<Map<string, string>> {
  return parseEnvFile(await readIfPresent(file));
}

/** GITHUB_PATH: one directory per line, blank lines ignored. */
export async function readPathFile(file: string): Promise<string[]> {
  return (await readIfPresent(file))
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '');
}

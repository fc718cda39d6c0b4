// Runner labels in forgejo-runner's syntax (internal/pkg/labels/labels.go):
// `name[:schema[:arg]]`, where the schema says how a job that asks for `name`
// runs: `host` (the default) on this machine, `docker` in a container of the
// image `arg` (`//node:20`). Only the name travels to the server in Register
// and Declare; the schema stays in the runner file and picks the platform.

export type LabelSchema = 'host' | 'docker' | 'lxc';

export interface RunnerLabel {
  name: string;
  schema: LabelSchema;
  /** What follows the schema, e.g. `//node:20` for docker; '' for host. */
  arg: string;
}

export class LabelError extends Error {}

/** Parses one label; throws LabelError with a message fit for the user. */
export function parseLabel(text: string): RunnerLabel {
  const trimmed = text.trim();
  const first = trimmed.indexOf(':');
  const name = first < 0 ? trimmed : trimmed.slice(0, first);
  if (name === '') throw new LabelError(`label "${text}" has no name`);
  if (first < 0) return { name, schema: 'host', arg: '' };
  const rest = trimmed.slice(first + 1);
  const second = rest.indexOf(':');
  const schema = second < 0 ? rest : rest.slice(0, second);
  const arg = second < 0 ? '' : rest.slice(second + 1);
  if (schema !== 'host' && schema !== 'docker' && schema !== 'lxc')
    throw new LabelError(`label "${text}": unknown schema "${schema}" (host, docker or lxc)`);
  return { name, schema, arg };
}

/** A comma-separated list, as `--labels` takes it; empty items are ignored. */
export function parseLabelList(list: string): RunnerLabel[] {
  return list
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '')
    .map(parseLabel);
}

export function formatLabel(label: RunnerLabel): string {
  return label.arg === '' ? `${label.name}:${label.schema}` : `${label.name}:${label.schema}:${label.arg}`;
}

/**
 * The label that decides how a job with `runsOn` runs: the first of the job's labels this
 * runner has (the server only hands out jobs whose labels are all the runner's).
 */
export function platformFor(runsOn: readonly string[], labels: readonly RunnerLabel[]): RunnerLabel | undefined {
  for (const wanted of runsOn) {
    const found = labels.find((label) => label.name === wanted);
    if (found !== undefined) return found;
  }
  return undefined;
}

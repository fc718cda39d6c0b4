// Where the code of a `uses:` step comes from (GitHub's "jobs.<job_id>.steps[*].uses";
// forgejo-runner act/runner/step_action_remote.go): `./path` in the workspace;
// `owner/repo[/path]@ref` from the instance the task came from (the runner's
// default actions URL is the instance, as Forgejo's DEFAULT_ACTIONS_URL=self);
// `https://host/owner/repo[/path]@ref` from that host. Remote actions are
// fetched with git into a cache keyed by commit, so one commit is fetched once
// per runner and never changes under a job. `docker://` images are refused.
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { runGit } from '../modules/git/run-git.ts';

export type ActionReference =
  | { kind: 'local'; path: string }
  | { kind: 'docker'; image: string }
  | { kind: 'remote'; baseUrl: string; owner: string; repo: string; subpath: string; ref: string };

export class ActionError extends Error {}

/** Parses a `uses:` value; `instanceUrl` is where short references resolve. */
export function parseUses(uses: string, instanceUrl: string): ActionReference {
  const value = uses.trim();
  if (value.startsWith('docker://')) return { kind: 'docker', image: value.slice('docker://'.length) };
  if (value.startsWith('./') || value === '.') return { kind: 'local', path: value };
  let baseUrl = instanceUrl.replace(/\/+$/, '');
  let rest = value;
  const full = /^(https?:\/\/[^/]+)\/(.*)$/.exec(value);
  if (full !== null) {
    baseUrl = full[1] ?? '';
    rest = full[2] ?? '';
  }
  const at = rest.lastIndexOf('@');
  if (at < 0) throw new ActionError(`"${uses}" names no version: write owner/repo@ref`);
  const [owner, repo, ...sub] = rest.slice(0, at).split('/');
  const ref = rest.slice(at + 1);
  if (!owner || !repo || ref === '') throw new ActionError(`"${uses}" is not owner/repo[/path]@ref`);
  return { kind: 'remote', baseUrl, owner, repo, subpath: sub.join('/'), ref };
}

export interface ActionMetadata {
  name: string;
  inputs: Record<string, { default?: unknown; required?: unknown }>;
  outputs: Record<string, { value?: unknown }>;
  runs: Record<string, unknown>;
}

/** Reads action.yml (or action.yaml) of the action in `dir`. */
export async function readActionMetadata(dir: string): Promise<ActionMetadata> {
  for (const name of ['action.yml', 'action.yaml']) {
    let text: string;
    try {
      text = await fs.readFile(path.join(dir, name), 'utf8');
    } catch {
      continue;
    }
    const doc = parseYaml(text) as Record<string, unknown> | null;
    if (typeof doc !== 'object' || doc === null) throw new ActionError(`${name} is not a mapping`);
    const runs = doc.runs;
    if (typeof runs !== 'object' || runs === null) throw new ActionError(`${name} has no runs section`);
    return {
      name: typeof doc.name === 'string' ? doc.name : '',
      inputs: (doc.inputs ?? {}) as ActionMetadata['inputs'],
      outputs: (doc.outputs ?? {}) as ActionMetadata['outputs'],
      runs: runs as Record<string, unknown>,
    };
  }
  throw new ActionError(`no action.yml or action.yaml in ${dir}`);
}

/** `Authorization` for git over HTTP with the task token (any user name, the token as password). */
export function basicAuthHeader(token: string): string {
  return `Authorization: Basic ${Buffer.from(`gantry-runner:${token}`).toString('base64')}`;
}

export interface FetchOptions {
  cacheDir: string;
  /** Sent only to the instance, never to another host. */
  token: string;
  instanceUrl: string;
}

function gitAuth(url: string, options: FetchOptions): string[] {
  const sameHost = new URL(url).host === new URL(options.instanceUrl).host;
  return sameHost && options.token !== '' ? ['-c', `http.extraHeader=${basicAuthHeader(options.token)}`] : [];
}

/**
 * The commit `ref` names in the repository at `url` (a full commit id is taken as is),
 * or null when the repository does not exist or has no such ref.
 */
export async function resolveRemoteCommit(url: string, ref: string, options: FetchOptions): Promise<string | null> {
  if (/^[0-9a-f]{40}$/.test(ref)) return ref;
  let out: string;
  try {
    out = (
      await runGit([...gitAuth(url, options), 'ls-remote', url, ref, `refs/heads/${ref}`, `refs/tags/${ref}`], {
        timeoutMs: 60_000,
      })
    ).toString();
  } catch {
    return null;
  }
  const lines = out.split('\n').filter((line) => line.includes('\t'));
  // A peeled annotated tag (^{}) names the commit itself; prefer it.
  const peeled = lines.find((line) => line.endsWith('^{}'));
  const first = (peeled ?? lines[0])?.split('\t')[0];
  return first !== undefined && first !== '' ? first : null;
}

/** The action's files at `commit`, fetched once into the cache and reused after. */
export async function fetchRemoteAction(
  ref: Extract<ActionReference, { kind: 'remote' }>,
  commit: string,
  options: FetchOptions,
): Promise<string> {
  const url = `${ref.baseUrl}/${ref.owner}/${ref.repo}.git`;
  const key = crypto.createHash('sha256').update(url).digest('hex').slice(0, 16);
  const target = path.join(options.cacheDir, key, commit);
  try {
    await fs.access(path.join(target, '.complete'));
    return target;
  } catch {
    // not cached yet
  }
  await fs.mkdir(path.dirname(target), { recursive: true });
  const temporary = await fs.mkdtemp(`${target}.tmp-`);
  try {
    await runGit(['init', '-q', temporary]);
    await runGit(
      [...gitAuth(url, options), 'fetch', '-q', '--depth', '1', url, ref.ref === commit ? commit : ref.ref],
      {
        cwd: temporary,
        timeoutMs: 300_000,
      },
    );
    await runGit(['checkout', '-q', '--detach', 'FETCH_HEAD'], { cwd: temporary });
    await fs.writeFile(path.join(temporary, '.complete'), commit);
    try {
      await fs.rename(temporary, target);
    } catch {
      // Another job fetched the same commit meanwhile: theirs is as good.
      await fs.rm(temporary, { recursive: true, force: true });
    }
    return target;
  } catch (error) {
    await fs.rm(temporary, { recursive: true, force: true });
    throw new ActionError(`cannot fetch ${url}@${ref.ref}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

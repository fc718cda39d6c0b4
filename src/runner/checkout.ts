// `actions/checkout`, built in for instances that do not host that action
// (forgejo-runner would fetch it from the default actions URL): clones the
// repository over git HTTP with the task token. Inputs as actions/checkout
// v4 names them: repository (default: the workflow's), ref (default: the
// commit that triggered the run for the workflow's repository, else the
// remote's HEAD), path (under the workspace), fetch-depth (1; 0 = all
// history), token (default: the task token), clean (default true),
// persist-credentials (default true: later steps can fetch and push).
import fs from 'node:fs/promises';
import path from 'node:path';
import { runGit } from '../modules/git/run-git.ts';
import { basicAuthHeader } from './action-resolver.ts';

export interface CheckoutRequest {
  inputs: Record<string, string>;
  github: Record<string, unknown>;
  workspace: string;
  log: (line: string) => void;
  signal: AbortSignal;
}

function text(value: unknown): string {
  return value === undefined || value === null ? '' : String(value);
}

export async function nativeCheckout(request: CheckoutRequest): Promise<void> {
  const { inputs, github } = request;
  const serverUrl = text(github.server_url).replace(/\/+$/, '');
  const ownRepository = text(github.repository);
  const repository = inputs.repository || ownRepository;
  const token = inputs.token || text(github.token);
  const depth = Number(inputs['fetch-depth'] || '1');
  if (!Number.isInteger(depth) || depth < 0)
    throw new Error(`fetch-depth must be a whole number, got "${inputs['fetch-depth']}"`);
  const dest = path.resolve(request.workspace, inputs.path || '.');
  if (dest !== request.workspace && !dest.startsWith(`${request.workspace}${path.sep}`))
    throw new Error(`path "${inputs.path}" is outside the workspace`);
  let ref = inputs.ref;
  let commit = '';
  if (!ref && repository.toLowerCase() === ownRepository.toLowerCase()) {
    ref = text(github.ref);
    commit = text(github.sha);
  }
  const url = `${serverUrl}/${repository}.git`;
  const auth = ['-c', `http.extraHeader=${basicAuthHeader(token)}`];
  const git = (args: string[], extra: string[] = []) => runGit([...extra, ...args], { cwd: dest, timeoutMs: 600_000 });
  request.log(`Syncing repository: ${repository}`);
  await fs.mkdir(dest, { recursive: true });
  const existing = await fs
    .access(path.join(dest, '.git'))
    .then(() => true)
    .catch(() => false);
  if (!existing) {
    await git(['init', '-q']);
    await git(['remote', 'add', 'origin', url]);
  } else if (inputs.clean !== 'false') {
    await git(['clean', '-ffdx']);
    await git(['reset', '--hard', '-q']).catch(() => undefined);
  }
  const depthArgs = depth > 0 ? ['--depth', String(depth)] : [];
  const target = ref || 'HEAD';
  request.log(`Fetching ${target}${commit !== '' ? ` (${commit})` : ''}`);
  await git(['fetch', '-q', '--no-tags', ...depthArgs, 'origin', target], auth);
  let checkoutTarget = 'FETCH_HEAD';
  if (commit !== '') {
    const fetched = (await git(['rev-parse', 'FETCH_HEAD'])).toString().trim();
    if (fetched !== commit) {
      // The branch moved on since the push: fetch the run's own commit.
      await git(['fetch', '-q', '--no-tags', ...depthArgs, 'origin', commit], auth);
    }
    checkoutTarget = commit;
  }
  const branch =
    /^refs\/heads\/(.+)$/.exec(ref ?? '')?.[1] ??
    (ref && !ref.startsWith('refs/') && !/^[0-9a-f]{40}$/.test(ref) ? ref : undefined);
  if (branch !== undefined) await git(['checkout', '-q', '--force', '-B', branch, checkoutTarget]);
  else await git(['checkout', '-q', '--force', '--detach', checkoutTarget]);
  if (inputs['persist-credentials'] !== 'false')
    await git([
      'config',
      '--local',
      `http.${serverUrl}/.extraheader`,
      basicAuthHeader(token).replace(/^Authorization/, 'AUTHORIZATION'),
    ]);
  const head = (await git(['rev-parse', 'HEAD'])).toString().trim();
  request.log(`Checked out ${head}`);
}

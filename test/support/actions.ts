// The secrets and variables API of one scope (user, organization or
// repository) through the @llamaduck/forgejo-ts client, so tests can run the
// same checks at all three scopes.
import {
  createOrgVariable,
  createRepoVariable,
  createUserVariable,
  deleteOrgSecret,
  deleteOrgVariable,
  deleteRepoSecret,
  deleteRepoVariable,
  deleteUserSecret,
  deleteUserVariable,
  getOrgVariable,
  getOrgVariablesList,
  getRepoVariable,
  getRepoVariablesList,
  getUserVariable,
  getUserVariablesList,
  orgListActionsSecrets,
  repoListActionsSecrets,
  updateOrgSecret,
  updateOrgVariable,
  updateRepoSecret,
  updateRepoVariable,
  updateUserSecret,
  updateUserVariable,
} from '@llamaduck/forgejo-ts';
import type { ForgejoClient } from './server.ts';

/** What a client call answered, whatever the status. */
export interface Answer {
  status: number;
  data: unknown;
  /** The error body on 4xx/5xx. */
  error: unknown;
  headers: Record<string, string>;
}

interface AxiosLike {
  status?: number;
  data?: unknown;
  error?: unknown;
  headers?: unknown;
  response?: { status: number; headers?: unknown; data?: unknown };
}

function headersOf(raw: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (raw && typeof raw === 'object') {
    const plain =
      typeof (raw as { toJSON?: () => unknown }).toJSON === 'function'
        ? (raw as { toJSON: () => unknown }).toJSON()
        : raw;
    for (const [k, v] of Object.entries(plain as Record<string, unknown>)) out[k.toLowerCase()] = String(v);
  }
  return out;
}

export async function answer(call: Promise<unknown>): Promise<Answer> {
  const r = (await call) as AxiosLike;
  const status = r.response?.status ?? r.status ?? 0;
  return {
    status,
    data: r.response ? undefined : r.data,
    error: r.error,
    headers: headersOf(r.response?.headers ?? r.headers),
  };
}

export type ScopeLabel = 'user' | 'org' | 'repo';
export interface PageQuery {
  page?: number;
  limit?: number;
}

export interface ScopeApi {
  label: ScopeLabel;
  /** The path prefix under /api/v1, e.g. `/orgs/acme/actions`. */
  base: string;
  /** Null for the user scope (Forgejo has no GET /user/actions/secrets). */
  listSecrets: ((client: ForgejoClient, query?: PageQuery) => Promise<Answer>) | null;
  putSecret(client: ForgejoClient, name: string, data: string): Promise<Answer>;
  deleteSecret(client: ForgejoClient, name: string): Promise<Answer>;
  listVariables(client: ForgejoClient, query?: PageQuery): Promise<Answer>;
  getVariable(client: ForgejoClient, name: string): Promise<Answer>;
  createVariable(client: ForgejoClient, name: string, value: string): Promise<Answer>;
  updateVariable(client: ForgejoClient, name: string, body: { name?: string; value: string }): Promise<Answer>;
  deleteVariable(client: ForgejoClient, name: string): Promise<Answer>;
}

export function userApi(): ScopeApi {
  return {
    label: 'user',
    base: '/user/actions',
    listSecrets: null,
    putSecret: (client, secretname, data) => answer(updateUserSecret({ client, path: { secretname }, body: { data } })),
    deleteSecret: (client, secretname) => answer(deleteUserSecret({ client, path: { secretname } })),
    listVariables: (client, query) => answer(getUserVariablesList({ client, query })),
    getVariable: (client, variablename) => answer(getUserVariable({ client, path: { variablename } })),
    createVariable: (client, variablename, value) =>
      answer(createUserVariable({ client, path: { variablename }, body: { value } })),
    updateVariable: (client, variablename, body) =>
      answer(updateUserVariable({ client, path: { variablename }, body })),
    deleteVariable: (client, variablename) => answer(deleteUserVariable({ client, path: { variablename } })),
  };
}

export function orgApi(org: string): ScopeApi {
  return {
    label: 'org',
    base: `/orgs/${org}/actions`,
    listSecrets: (client, query) => answer(orgListActionsSecrets({ client, path: { org }, query })),
    putSecret: (client, secretname, data) =>
      answer(updateOrgSecret({ client, path: { org, secretname }, body: { data } })),
    deleteSecret: (client, secretname) => answer(deleteOrgSecret({ client, path: { org, secretname } })),
    listVariables: (client, query) => answer(getOrgVariablesList({ client, path: { org }, query })),
    getVariable: (client, variablename) => answer(getOrgVariable({ client, path: { org, variablename } })),
    createVariable: (client, variablename, value) =>
      answer(createOrgVariable({ client, path: { org, variablename }, body: { value } })),
    updateVariable: (client, variablename, body) =>
      answer(updateOrgVariable({ client, path: { org, variablename }, body })),
    deleteVariable: (client, variablename) => answer(deleteOrgVariable({ client, path: { org, variablename } })),
  };
}

export function repoApi(owner: string, repo: string): ScopeApi {
  return {
    label: 'repo',
    base: `/repos/${owner}/${repo}/actions`,
    listSecrets: (client, query) => answer(repoListActionsSecrets({ client, path: { owner, repo }, query })),
    putSecret: (client, secretname, data) =>
      answer(updateRepoSecret({ client, path: { owner, repo, secretname }, body: { data } })),
    deleteSecret: (client, secretname) => answer(deleteRepoSecret({ client, path: { owner, repo, secretname } })),
    listVariables: (client, query) => answer(getRepoVariablesList({ client, path: { owner, repo }, query })),
    getVariable: (client, variablename) => answer(getRepoVariable({ client, path: { owner, repo, variablename } })),
    createVariable: (client, variablename, value) =>
      answer(createRepoVariable({ client, path: { owner, repo, variablename }, body: { value } })),
    updateVariable: (client, variablename, body) =>
      answer(updateRepoVariable({ client, path: { owner, repo, variablename }, body })),
    deleteVariable: (client, variablename) =>
      answer(deleteRepoVariable({ client, path: { owner, repo, variablename } })),
  };
}

/** Forgejo's error body for a handler-level error: message and url, nothing else. */
export function errorBody(rootUrl: string, message: string): { message: string; url: string } {
  return { message, url: `${rootUrl}api/swagger` };
}

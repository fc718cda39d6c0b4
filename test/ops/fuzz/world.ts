// What the request arbitraries know about the fixture, and what they produce.

/** The fixture as the arbitraries see it: credentials, and real names and ids to put in paths and bodies. */
export interface FuzzWorld {
  identities: Record<'admin' | 'user', { name: string; password: string; token: string }>;
  runner: { uuid: string; token: string };
  /** Existing names and ids per path parameter (`owner`, `repo`, `run_id`…). */
  pools: Record<string, string[]>;
  /** Names and ids that DELETE and PATCH may destroy, per parameter. */
  disposable: Record<string, string[]>;
  /** Existing [owner, repo] pairs, and those DELETE and PATCH may destroy: drawn together, so both exist. */
  repos: { existing: [string, string][]; disposable: [string, string][] };
  /** Values that make sense inside bodies and queries (a commit id, a task id…). */
  values: { sha: string; taskId: string; runnerUuid: string; registrationToken: string; labels: string[] };
}

export interface FuzzRequest {
  method: string;
  /** The raw request target: path and query exactly as sent (no normalization). */
  path: string;
  headers: Record<string, string | string[]>;
  body: Buffer | null;
  /** For reports: what the request was built to exercise. */
  route: string;
  auth: string;
}

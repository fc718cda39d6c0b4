// Runners and their registration tokens (Forgejo: routers/api/v1/shared/runners.go,
// models/actions/runner.go, runner_token.go, run_job.go). One set of rules for
// the instance, user, organization and repository scopes; the runner protocol's
// Register RPC uses findActiveRegistrationToken and registerRunner.
import { randomBytes, randomUUID } from 'node:crypto';
import { ActionStatus } from '../../modules/actions-status.ts';
import type { Clock } from '../../modules/clock.ts';
import type { KeyRing } from '../../modules/crypto/key-ring.ts';
import { digestsEqual, generateTokenString, hashToken } from '../../modules/crypto/tokens.ts';
import { AppError } from '../../modules/errors.ts';
import type { ActionRunJob } from '../../models/action-runs.ts';
import type { Db } from '../../models/database.ts';
import { countRunners, findRunnerInSelection, listJobsWithStatus, listRunners } from '../../models/runner-lists.ts';
import type { JobSelection, RunnerSelection } from '../../models/runner-lists.ts';
import {
  countRegistrationTokensNotUnderPrefix,
  deactivateRegistrationTokens,
  findActiveRegistrationToken,
  findRegistrationTokenByHash,
  insertRegistrationTokenIfNoneActive,
  listRegistrationTokensNotUnderPrefix,
  registrationTokenPrefixesInUse,
  swapRegistrationTokenCiphertext,
} from '../../models/runner-tokens.ts';
import type { RegistrationTokenRow } from '../../models/runner-tokens.ts';
import { deleteRunner, insertRunner } from '../../models/runners.ts';
import type { Runner } from '../../models/runners.ts';
import { INSTANCE_SCOPE, scopeColumns } from '../../modules/scope.ts';
import type { Scope, ScopeColumns } from '../../modules/scope.ts';
import type { EncryptedColumn } from '../key-rotation.ts';
import type { RunnerIdentityCache } from './runner-identity-cache.ts';

// Where a runners API request stands: its own scope holds the runners it
// registers and may delete (the scope's columns); it also sees the runners of
// the scopes above it (a repository: its owner's and the instance's; a user or
// organization: the instance's; the instance: every runner).

/** Forgejo's FindRunnerOptions WithAvailable: the scope's runners plus those it inherits. */
function visibleSelection(scope: Scope): RunnerSelection {
  switch (scope.kind) {
    case 'instance':
      return 'all';
    case 'user':
    case 'org':
      return [scopeColumns(scope), INSTANCE_SCOPE];
    case 'repo':
      return [scopeColumns(scope), { ownerId: scope.repoOwnerId, repoId: 0 }, INSTANCE_SCOPE];
  }
}

/** Forgejo's ActionRunner.Editable: the instance edits every runner, other scopes their own. */
function editable(scope: Scope, runner: Runner): boolean {
  switch (scope.kind) {
    case 'instance':
      return true;
    case 'user':
    case 'org':
      return runner.ownerId === scope.ownerId;
    case 'repo':
      return runner.repoId === scope.repoId;
  }
}

function jobSelection(scope: Scope): JobSelection {
  switch (scope.kind) {
    case 'instance':
      return 'all';
    case 'user':
    case 'org':
      return { ownerId: scope.ownerId };
    case 'repo':
      return { repoId: scope.repoId };
  }
}

export type RunnerStatusName = 'offline' | 'idle' | 'active';

/** Forgejo's RunnerOfflineTime and RunnerIdleTime. */
export const RUNNER_OFFLINE_AFTER_MS = 60_000;
export const RUNNER_IDLE_AFTER_MS = 10_000;

/** offline: no contact for over a minute; idle: no task report for over ten seconds; else active. */
export function runnerStatus(runner: Pick<Runner, 'lastOnline' | 'lastActive'>, nowMs: number): RunnerStatusName {
  if (nowMs - runner.lastOnline * 1000 > RUNNER_OFFLINE_AFTER_MS) return 'offline';
  if (nowMs - runner.lastActive * 1000 > RUNNER_IDLE_AFTER_MS) return 'idle';
  return 'active';
}

/**
 * The jobs search reads at most this many of the newest waiting jobs, and as
 * many of the newest running ones, of the scope (Forgejo reads them all). Label
 * matching happens on those rows, so an answer never holds more than twice this.
 */
export const MAX_JOBS_SCANNED_PER_STATUS = 1000;

/**
 * Forgejo's ItRunsOn as the jobs search applies it: with no `labels` parameter
 * every job; otherwise a job whose runs-on labels are all among the given ones,
 * or, when the first given label is empty, a job without runs-on.
 */
export function jobMatchesLabels(runsOn: readonly string[], labels: readonly string[] | null): boolean {
  if (labels === null || labels.length === 0) return true;
  if (labels[0] === '' && runsOn.length === 0) return true;
  if (runsOn.length === 0) return false;
  const given = new Set(labels);
  return runsOn.every((label) => given.has(label));
}

/** A registration token: 43 characters of the URL-safe base64 alphabet (256 random bits), like Forgejo's. */
export function generateRegistrationToken(): string {
  return randomBytes(32).toString('base64url');
}

/** At most `maxBytes` of UTF-8, never cutting a character in two. */
export function truncateUtf8(value: string, maxBytes: number): string {
  if (Buffer.byteLength(value, 'utf8') <= maxBytes) return value;
  let bytes = 0;
  let end = 0;
  for (const char of value) {
    const size = Buffer.byteLength(char, 'utf8');
    if (bytes + size > maxBytes) break;
    bytes += size;
    end += char.length;
  }
  return value.slice(0, end);
}

const MAX_NAME_BYTES = 255;

/** Associated data of a registration token's ciphertext: its scope and digest, so it cannot be moved to another row. */
function tokenAssociatedData(ownerId: number, repoId: number, tokenHash: string): string {
  return `action_runner_token:${ownerId}:${repoId}:${tokenHash}`;
}

export interface RegisterRunnerInput {
  name: string;
  /** The runner's version; empty until it declares (API registration). */
  version?: string;
  /** Agent labels; null (or absent) until the runner declares them. */
  labels?: readonly string[] | null;
  ephemeral?: boolean;
  description?: string;
}

export interface RegisteredRunner {
  runner: Runner;
  /** The runner's own secret (40 hex characters), shown once: only its digest is stored. */
  token: string;
}

export interface RunnerListOptions {
  /** Also list the runners the scope inherits (Forgejo's `visible`). */
  visible: boolean;
  page: { limit: number; offset: number };
}

export class RunnerService {
  constructor(
    readonly db: Db,
    readonly clock: Clock,
    readonly keys: KeyRing,
    /** The authenticated runners this process caches: a deletion here is seen here at once. */
    private readonly identities?: RunnerIdentityCache,
  ) {}

  /**
   * The scope's active registration token, created when there is none (GET
   * and POST …/runners/registration-token; repeated calls give the same
   * token). Race-free on both databases without a transaction: a new token is
   * offered with INSERT … ON CONFLICT DO NOTHING against the unique index on
   * the active token (migration 0008), then the active row is read, so
   * concurrent first calls all answer the one token that won.
   */
  async registrationToken(scope: ScopeColumns): Promise<string> {
    const existing = await findActiveRegistrationToken(this.db, scope);
    if (existing) return this.decryptToken(existing);
    const token = generateRegistrationToken();
    const tokenHash = hashToken(token);
    const tokenEncrypted = this.keys.encrypt(token, tokenAssociatedData(scope.ownerId, scope.repoId, tokenHash));
    if (await insertRegistrationTokenIfNoneActive(this.db, { scope, tokenHash, tokenEncrypted }, this.clock.nowSec()))
      return token;
    const winner = await findActiveRegistrationToken(this.db, scope);
    // Only a rotation (DELETE) landing between the insert and this read leaves
    // no active row; a caller that raced with it gets the next token.
    if (!winner) return this.registrationToken(scope);
    return this.decryptToken(winner);
  }

  /**
   * Rotation (DELETE …/runners/registration-token): the active token stops
   * registering runners; the next GET or POST creates a new one. Runners
   * already registered keep their own secrets and are not affected.
   */
  async deactivateRegistrationToken(scope: ScopeColumns): Promise<void> {
    await deactivateRegistrationTokens(this.db, scope, this.clock.nowSec());
  }

  /**
   * For the Register RPC: the scope a registration token registers runners
   * in, 'inactive' for a replaced token, null for an unknown one.
   */
  async findActiveRegistrationToken(token: string): Promise<{ scope: ScopeColumns } | 'inactive' | null> {
    if (token === '') return null;
    const digest = hashToken(token);
    const row = await findRegistrationTokenByHash(this.db, digest);
    if (!row || !digestsEqual(row.tokenHash, digest)) return null;
    if (!row.isActive) return 'inactive';
    return { scope: { ownerId: row.ownerId, repoId: row.repoId } };
  }

  /** A new runner of `scope` with a UUID v4 and a fresh secret (its digest and last eight characters are stored). */
  async registerRunner(scope: ScopeColumns, input: RegisterRunnerInput): Promise<RegisteredRunner> {
    const token = generateTokenString();
    const runner = await insertRunner(
      this.db,
      {
        uuid: randomUUID(),
        name: truncateUtf8(input.name, MAX_NAME_BYTES),
        scope: { ownerId: scope.ownerId, repoId: scope.repoId },
        description: input.description ?? '',
        version: input.version ?? '',
        labels: input.labels ?? null,
        ephemeral: input.ephemeral ?? false,
        tokenHash: hashToken(token),
        tokenLastEight: token.slice(-8),
      },
      this.clock.nowSec(),
    );
    return { runner, token };
  }

  async list(scope: Scope, options: RunnerListOptions): Promise<{ runners: Runner[]; total: number }> {
    const selection: RunnerSelection = options.visible ? visibleSelection(scope) : [scopeColumns(scope)];
    const [runners, total] = await Promise.all([
      listRunners(this.db, selection, options.page),
      countRunners(this.db, selection),
    ]);
    return { runners, total };
  }

  /** A runner the scope can see (its own or inherited); otherwise Forgejo's 404. */
  async get(scope: Scope, id: number): Promise<Runner> {
    const runner = id > 0 ? await findRunnerInSelection(this.db, id, visibleSelection(scope)) : null;
    if (!runner) throw AppError.notFoundMessage(`runner with ID ${id}: resource does not exist`);
    return runner;
  }

  /** Only the scope's own runners can be deleted; an inherited one is a 404 too (no 403: Forgejo's answer). */
  async delete(scope: Scope, id: number): Promise<void> {
    const runner = await this.get(scope, id);
    if (!editable(scope, runner)) throw AppError.notFoundMessage('No permission to delete this runner');
    await deleteRunner(this.db, runner.id);
    this.identities?.forget(runner.uuid);
  }

  /** The runner's status now (injected clock). */
  status(runner: Runner): RunnerStatusName {
    return runnerStatus(runner, this.clock.nowMs());
  }

  /**
   * Waiting and running jobs of the scope, newest first, whose runs-on fits
   * `labels` (null: the parameter was absent). Bounded by MAX_JOBS_SCANNED_PER_STATUS.
   */
  async searchJobs(scope: Scope, labels: readonly string[] | null): Promise<ActionRunJob[]> {
    const selection = jobSelection(scope);
    const [waiting, running] = await Promise.all([
      listJobsWithStatus(this.db, selection, ActionStatus.waiting, MAX_JOBS_SCANNED_PER_STATUS),
      listJobsWithStatus(this.db, selection, ActionStatus.running, MAX_JOBS_SCANNED_PER_STATUS),
    ]);
    return [...waiting, ...running].filter((job) => jobMatchesLabels(job.runsOn, labels)).sort((a, b) => b.id - a.id);
  }

  private decryptToken(row: RegistrationTokenRow): string {
    return this.keys.decrypt(row.tokenEncrypted, tokenAssociatedData(row.ownerId, row.repoId, row.tokenHash));
  }
}

/** `action_runner_token.token_encrypted` for key rotation (listed in services/encrypted-columns.ts). */
export const REGISTRATION_TOKEN_COLUMN: EncryptedColumn = {
  label: 'action_runner_token',
  count: (db, prefix) => countRegistrationTokensNotUnderPrefix(db, prefix),
  batch: async (db, prefix, afterId, limit) =>
    (await listRegistrationTokensNotUnderPrefix(db, prefix, afterId, limit)).map((row) => ({
      id: row.id,
      stored: row.tokenEncrypted,
      associatedData: tokenAssociatedData(row.ownerId, row.repoId, row.tokenHash),
    })),
  swap: (db, id, expected, next) => swapRegistrationTokenCiphertext(db, id, expected, next),
  prefixesInUse: (db) => registrationTokenPrefixesInUse(db),
};

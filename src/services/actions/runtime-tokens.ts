// The Actions runtime token (`ACTIONS_RUNTIME_TOKEN` in a job): what
// actions/upload-artifact and download-artifact present to the artifact
// protocols. Forgejo: services/actions/auth.go CreateAuthorizationToken and
// ParseAuthorizationToken, routers/api/actions/artifacts.go ArtifactContexter.
//
// An HS256 JWT with Forgejo's claims. `scp` is part of the contract:
// @actions/artifact decodes the token (without verifying it) and takes the
// run and job ids it sends with every call from the space-separated entry
// `Actions.Results:<runID>:<jobID>` (actions/toolkit,
// packages/artifact/src/internal/shared/util.ts getBackendIdsFromToken).
//
// Guarantees:
// - Signed with a key derived from the instance's secret key for this
//   purpose alone (KeyRing.derivedKeys); verified against every known key.
// - Valid for 24 hours (Forgejo) AND only while its task is running: a
//   finished, cancelled or rerun task's token opens nothing.
// - A bearer that is not a JWT is tried as the task token (GITEA_TOKEN), as
//   Forgejo does for runners that do not pass a runtime token.
import { hashToken } from '../../modules/crypto/tokens.ts';
import { looksLikeJwt, signJwt, verifyJwt } from '../../modules/crypto/jwt.ts';
import type { KeyRing } from '../../modules/crypto/key-ring.ts';
import type { Clock } from '../../modules/clock.ts';
import type { Db } from '../../models/database.ts';
import { findRunningTaskByTokenHash, findRunningTaskScope } from '../../models/task-tokens.ts';
import type { RunningTaskScope } from '../../models/task-tokens.ts';

/** Forgejo's runtime token lifetime (services/actions/auth.go). */
export const RUNTIME_TOKEN_TTL_SEC = 24 * 3600;
const PURPOSE = 'actions-runtime-token';

export interface RuntimeTokenSubject {
  taskId: number;
  runId: number;
  jobId: number;
}

export class RuntimeTokens {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly keys: KeyRing,
  ) {}

  issue(subject: RuntimeTokenSubject): string {
    const now = this.clock.nowSec();
    return signJwt(
      {
        iss: 'gantry',
        sub: String(subject.taskId),
        nbf: now,
        exp: now + RUNTIME_TOKEN_TTL_SEC,
        scp: `Actions.Results:${subject.runId}:${subject.jobId}`,
        TaskID: subject.taskId,
        RunID: subject.runId,
        JobID: subject.jobId,
        ac: '[]',
      },
      this.keys.derivedKeys(PURPOSE).current,
    );
  }

  /** The running task a bearer credential stands for, or null (bad signature, expired, task not running). */
  async authenticate(bearer: string): Promise<RunningTaskScope | null> {
    if (looksLikeJwt(bearer)) {
      const claims = verifyJwt(bearer, this.keys.derivedKeys(PURPOSE).all, this.clock.nowSec());
      const taskId = claims?.TaskID;
      if (typeof taskId !== 'number' || !Number.isSafeInteger(taskId)) return null;
      return findRunningTaskScope(this.db, taskId);
    }
    const task = await findRunningTaskByTokenHash(this.db, hashToken(bearer));
    return task === null ? null : findRunningTaskScope(this.db, task.taskId);
  }
}

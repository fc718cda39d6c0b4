// What the auth hook and the guards attach to a request, for handlers to use.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Authentication } from '../services/authentication.ts';
import { ANONYMOUS } from '../services/authentication.ts';
import type { Actor, RepoPermission } from '../services/permissions.ts';
import type { Repository, RepositoryAccess } from '../models/repos.ts';
import type { Team } from '../models/orgs.ts';
import type { ScopedValue } from '../models/scoped-values.ts';
import type { AccountAccess, User } from '../models/users.ts';

/** What the repository guard found and decided: what the later guards of the route read. */
export interface RepoAccessContext {
  repo: RepositoryAccess;
  owner: AccountAccess;
  /** The doer's repository-wide access mode (permission.mode). */
  mode: number;
  /** The doer's permission, unit by unit (guards of unit routes read it). */
  permission: RepoPermission;
  /**
   * The repository's variable {variablename}, read with the repository by
   * the guard of the GET of one variable (null: none); undefined elsewhere.
   */
  variable?: ScopedValue | null;
}

/** The repository and its owner whole, for handlers (requireRepo). */
export interface RepoContext extends RepoAccessContext {
  repo: Repository;
  owner: User;
}

declare module 'fastify' {
  interface FastifyRequest {
    auth: Authentication;
    org: User | null;
    /**
     * Set by repoAssignment, for handlers. The GET of one repository
     * variable leaves it null: its guard reads only repoAccess's columns.
     */
    repoContext: RepoContext | null;
    /** Set by every repository guard (the same object as repoContext where that is set): what later guards read. */
    repoAccess: RepoAccessContext | null;
    contextUser: User | null;
    team: Team | null;
  }
}

export function decorateRequests(app: FastifyInstance): void {
  // Every request starts anonymous; the auth hook replaces this.
  app.decorateRequest('auth', null as unknown as Authentication);
  app.addHook('onRequest', (req, _reply, done) => {
    req.auth = ANONYMOUS;
    done();
  });
  app.decorateRequest('org', null);
  app.decorateRequest('repoContext', null);
  app.decorateRequest('repoAccess', null);
  app.decorateRequest('contextUser', null);
  app.decorateRequest('team', null);
}

export function actorOf(req: FastifyRequest): Actor {
  const token = req.auth.token;
  const task = req.auth.task;
  return {
    doer: req.auth.doer,
    allowAdminOverride: !(token && token.scope.publicOnly),
    ...(task ? { taskRepoId: task.repoId } : {}),
  };
}

export function requireDoer(req: FastifyRequest): User {
  const doer = req.auth.doer;
  if (!doer) throw new Error('route without reqToken guard used the doer');
  return doer;
}

export function requireOrg(req: FastifyRequest): User {
  if (!req.org) throw new Error('route without orgAssignment used the org');
  return req.org;
}

export function requireRepo(req: FastifyRequest): RepoContext {
  if (!req.repoContext) throw new Error('route without repoAssignment used the repository');
  return req.repoContext;
}

export function requireContextUser(req: FastifyRequest): User {
  if (!req.contextUser) throw new Error('route without userAssignment used the context user');
  return req.contextUser;
}

export function requireTeam(req: FastifyRequest): Team {
  if (!req.team) throw new Error('route without teamAssignment used the team');
  return req.team;
}

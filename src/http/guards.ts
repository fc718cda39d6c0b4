// The guard chain of Forgejo's API router (routers/api/v1/api.go), one building
// block per guard, composed per route in Forgejo's order. Each guard either
// passes or throws an AppError with Forgejo's status and message.
import type { FastifyInstance, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import { AppError } from '../modules/errors.ts';
import { AccessMode } from '../modules/access-mode.ts';
import { parseIdParam } from '../modules/pagination.ts';
import { scopeAllows } from '../modules/scopes.ts';
import type { ScopeCategory, ScopeLevel } from '../modules/scopes.ts';
import type { RepoUnit, RepositoryAccess } from '../models/repos.ts';
import type { ScopedValue } from '../models/scoped-values.ts';
import type { AccountAccess } from '../models/users.ts';
import type { Services } from '../services/index.ts';
import { hasRepoAccess, unitAccessMode } from '../services/permissions.ts';
import type { RepoPermission } from '../services/permissions.ts';
import { actorOf } from './request-context.ts';

export type Guard = preHandlerAsyncHookHandler;

type Params = Record<string, string | undefined>;

/** The 403 a job token gets on the registration-token and runner-registration routes. */
export const JOB_TOKEN_REFUSED = 'a job token cannot create runner registration tokens or register runners';

function param(req: FastifyRequest, name: string): string {
  return (req.params as Params)[name] ?? '';
}

/**
 * Binds like Go's decoder, run just before body validation: a bodiless
 * PUT/POST is an empty object and a `null` field an absent one, so both
 * answer `[Field]: Required`, not a type error.
 */
export const bindLikeGo: Guard = async (req) => {
  if (req.body === undefined || req.body === null) {
    req.body = {};
    return;
  }
  if (typeof req.body === 'object' && !Array.isArray(req.body)) {
    const body = req.body as Record<string, unknown>;
    for (const key of Object.keys(body)) if (body[key] === null) delete body[key];
  }
};

/**
 * A route's guards as one hook: each in order, stopping at the first that
 * throws, as Fastify runs a list of hooks, for one hook's cost instead of one
 * per guard (the variable GET has five). Only async guards (a callback-style
 * hook would wait for a `done` that never comes): null when any is not.
 */
export function chainGuards(guards: readonly unknown[]): Guard | null {
  if (!guards.every((guard) => typeof guard === 'function' && guard.constructor.name === 'AsyncFunction')) return null;
  const chained = guards as readonly Guard[];
  return async function guarded(this: FastifyInstance, req, reply) {
    for (const guard of chained) await guard.call(this, req, reply);
  };
}

/** Forgejo's tokenRequiresScopes: a token needs every category at `level`; the refusal names what was required. */
function requireScopes(req: FastifyRequest, level: ScopeLevel, categories: readonly ScopeCategory[]): void {
  const token = req.auth.token;
  if (!token) return;
  if (!categories.every((c) => scopeAllows(token.scope, c, level))) {
    const required = categories.map((c) => `${level}:${c}`);
    throw AppError.forbidden(`token does not have at least one of required scope(s): [${required.join(' ')}]`);
  }
}

export function createGuards(services: Services) {
  const { permissions, accounts, repos, orgs } = services;

  /** tokenRequiresScopes as Forgejo routes use it: GET/HEAD need read, everything else write. */
  const scopes =
    (...categories: ScopeCategory[]): Guard =>
    async (req) =>
      requireScopes(req, req.method === 'GET' || req.method === 'HEAD' ? 'read' : 'write', categories);

  /** The same check at a fixed level, whatever the method (registration tokens need write even on GET). */
  const scopesAt =
    (level: ScopeLevel, ...categories: ScopeCategory[]): Guard =>
    async (req) =>
      requireScopes(req, level, categories);

  /**
   * Job (task) tokens authenticate as the Actions user; they never obtain
   * runner registration tokens or register runners, whatever their scope (a
   * job could otherwise enrol a runner that receives every secret).
   */
  const refuseJobToken: Guard = async (req) => {
    if (req.auth.task) throw AppError.forbidden(JOB_TOKEN_REFUSED);
  };

  const reqToken: Guard = async (req) => {
    if (!req.auth.doer) throw AppError.unauthorized('token is required');
  };

  const reqSiteAdmin: Guard = async (req) => {
    if (!permissions.isSiteAdmin(actorOf(req))) throw AppError.forbidden('user should be the site admin');
  };

  /**
   * Access-token routes: the account password, sent with basic auth, and
   * nothing else (Forgejo: routers/api/v1/permissions/req_basic_or_rev_proxy_auth.go
   * requires IsPasswordAuthentication). A token, in any header and also as
   * the basic password, is refused, so no token can mint a wider one.
   */
  const reqBasicAuth: Guard = async (req) => {
    if (req.auth.method !== 'basic' || req.auth.token !== null) throw AppError.unauthorized('auth method not allowed');
  };

  /**
   * Loads the {org} of /orgs/{org}/… routes. An organization the caller may
   * not see answers exactly as a missing one (same status, same body), so
   * neither its existence nor its owner-only routes' 401/403 leak.
   */
  const orgAssignment: Guard = async (req) => {
    const name = param(req, 'org');
    const org = await accounts.findByName(name);
    if (!org || !org.isOrganization || !(await permissions.canSeeAccount(actorOf(req), org))) {
      throw AppError.notFound([`org does not exist [id: 0, name: ${name}]`], 'GetOrgByName');
    }
    req.org = org;
  };

  /** Loads the {username} of /users/{username}/… routes; a user the caller may not see answers as a missing one. */
  const userAssignment: Guard = async (req) => {
    const name = param(req, 'username');
    const user = await accounts.findByName(name);
    if (!user || !(await permissions.canSeeAccount(actorOf(req), user)))
      throw AppError.notFoundMessage(`user does not exist [uid: 0, name: ${name}]`);
    req.contextUser = user;
  };

  const reqSelfOrAdmin: Guard = async (req) => {
    const doer = req.auth.doer;
    if (!doer || (doer.id !== req.contextUser?.id && !permissions.isSiteAdmin(actorOf(req)))) {
      throw AppError.forbidden('doer should be the site admin or be same as the contextUser');
    }
  };

  /**
   * Loads {owner}/{repo}. What the caller may not know exists answers as if
   * it did not: a repository without read access on any unit as a missing
   * repository, and under an owner the caller may not see (a private
   * organization or user, or anyone but their own organizations for a
   * restricted user) as a missing owner.
   */
  const repoAssignment: Guard = async (req) => {
    // Owner and repository in one query.
    const context = await repositoryAccess(req, await repos.findWithOwner(param(req, 'owner'), param(req, 'repo')));
    req.repoContext = context;
    req.repoAccess = context;
  };

  /**
   * repoAssignment for the GET of one repository variable: the same query
   * reads the variable {variablename} too, kept on the access context for
   * the handler, so the request makes one read instead of two, and of the
   * owner and the repository only what the guards decide with (so
   * repoContext, the whole rows, stays null). The same checks decide; the
   * later guards run before the handler sees the variable.
   */
  const repoAssignmentReadingVariable: Guard = async (req) => {
    const found = await repos.findWithOwnerAndVariable(
      param(req, 'owner'),
      param(req, 'repo'),
      param(req, 'variablename'),
    );
    const context = await repositoryAccess(req, found);
    context.variable = found === null ? null : found.variable;
    req.repoAccess = context;
  };

  /** The access context of a found owner and repository, or the 404 the caller may see. */
  async function repositoryAccess<R extends RepositoryAccess, O extends AccountAccess>(
    req: FastifyRequest,
    found: { owner: O; repo: R | null } | null,
  ): Promise<{ repo: R; owner: O; mode: number; permission: RepoPermission; variable?: ScopedValue | null }> {
    const ownerName = param(req, 'owner');
    // Built only when thrown: an error captures a stack, and this guard runs on every repository route.
    const ownerMissing = () => AppError.notFound([`user does not exist [uid: 0, name: ${ownerName}]`], 'GetUserByName');
    if (!found) throw ownerMissing();
    const { owner, repo } = found;
    const actor = actorOf(req);
    const permission = repo ? await permissions.repoPermission(actor, repo, owner) : null;
    if (!repo || !permission || !hasRepoAccess(permission)) {
      if (!(await permissions.canSeeAccount(actor, owner))) throw ownerMissing();
      throw AppError.notFound();
    }
    return { repo, owner, mode: permission.mode, permission };
  }

  /** checkTokenPublicOnly: a public-only token reaches public targets only. */
  const publicOnly: Guard = async (req) => {
    const token = req.auth.token;
    if (!token || !token.scope.publicOnly) return;
    if (req.repoAccess && (req.repoAccess.repo.isPrivate || req.repoAccess.owner.visibility !== 'public')) {
      throw AppError.forbidden('token scope is limited to public repos');
    }
    if (req.org && req.org.visibility !== 'public') throw AppError.forbidden('token scope is limited to public orgs');
    if (req.contextUser && req.contextUser.visibility !== 'public')
      throw AppError.forbidden('token scope is limited to public users');
  };

  const reqOrgOwnership: Guard = async (req) => {
    if (!req.org || !(await permissions.isOrgOwner(actorOf(req), req.org)))
      throw AppError.forbidden('Must be an organization owner');
  };

  /** Team routes: the team must exist and the doer own its organization (404 otherwise, as Forgejo). */
  const teamAssignmentAsOwner: Guard = async (req) => {
    const id = parseIdParam(param(req, 'id'));
    const team = id > 0 ? await orgs.findTeam(id) : null;
    if (!team) throw AppError.notFound();
    const org = await accounts.findById(team.orgId);
    if (!org || !(await permissions.isOrgOwner(actorOf(req), org))) throw AppError.notFound();
    req.team = team;
    req.org = org;
  };

  /**
   * Forgejo's reqOwner/reqAdmin/reqRepoWriter/reqRepoReader: the level on the
   * named unit (a team's `units_map` decides it in an organization), or the
   * repository-wide level when it is admin or more (IsUserRepoAdmin passes
   * every unit check) or when no unit is named.
   */
  const unitGuard =
    (minimum: number, message: string, unit?: RepoUnit): Guard =>
    async (req) => {
      const ctx = req.repoAccess;
      if (!ctx) throw AppError.notFound();
      // A disabled unit is invisible: 404, never 403.
      if (unit && !ctx.repo.units[unit]) throw AppError.notFound();
      const level = unit && ctx.mode < AccessMode.admin ? unitAccessMode(ctx.permission, ctx.repo, unit) : ctx.mode;
      if (level < minimum) throw AppError.forbidden(message);
    };

  const reqOwner = (unit?: RepoUnit) => unitGuard(AccessMode.owner, 'user should be the owner of the repo', unit);
  const reqAdmin = unitGuard(
    AccessMode.admin,
    'user should be an owner or a collaborator with admin write of a repository',
  );
  const reqRepoWriter = (unit?: RepoUnit) =>
    unitGuard(AccessMode.write, 'user should have a permission to write to a repo', unit);
  const reqRepoReader = (unit?: RepoUnit) =>
    unitGuard(AccessMode.read, 'user should have specific read permission or be a repo admin or a site admin', unit);
  const reqAnyRepoReader = unitGuard(
    AccessMode.read,
    'user should have any permission to read repository or permissions of site admin',
  );

  const mustNotBeArchived: Guard = async (req) => {
    const ctx = req.repoAccess;
    if (ctx?.repo.isArchived)
      throw AppError.locked(`<Repository ${ctx.repo.id}:${ctx.owner.name}/${ctx.repo.name}> is archived`);
  };

  return {
    scopes,
    scopesAt,
    refuseJobToken,
    reqToken,
    reqSiteAdmin,
    reqBasicAuth,
    orgAssignment,
    userAssignment,
    reqSelfOrAdmin,
    repoAssignment,
    repoAssignmentReadingVariable,
    publicOnly,
    reqOrgOwnership,
    teamAssignmentAsOwner,
    reqOwner,
    reqAdmin,
    reqRepoWriter,
    reqRepoReader,
    reqAnyRepoReader,
    mustNotBeArchived,
  };
}

export type Guards = ReturnType<typeof createGuards>;

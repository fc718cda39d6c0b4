// Where the Actions settings routes live and who may use them, per scope
// (Forgejo's /user, /orgs/{org} and /repos/{owner}/{repo} groups in
// routers/api/v1/api.go), and the Scope a guarded request stands in.
// Secrets, variables and runners share these.
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { TString } from 'typebox';
import { orgScope, repoScope, userScope } from '../../../modules/scope.ts';
import type { Scope } from '../../../modules/scope.ts';
import type { ScopeCategory } from '../../../modules/scopes.ts';
import type { Guard, Guards } from '../../guards.ts';
import { requireDoer, requireOrg, requireRepo } from '../../request-context.ts';

export interface ActionsScopeRoutes {
  /** e.g. `/orgs/:org/actions` */
  prefix: string;
  /** The scope's own path parameters (all strings), e.g. `{ org }`. */
  params: Record<string, TString>;
  tag: string;
  /** The token scope category of the routes (`write:<category>` to change anything). */
  category: ScopeCategory;
  /** Every guard after the token scope check: lookups, public-only, sign-in, ownership. */
  access: Guard[];
  /** The full chain: the method's scope check (read for GET, else write), then `access`. */
  guards: Guard[];
  /**
   * The chain of the GET of one variable, when not `guards`: the same chain
   * whose repository lookup reads the variable too (the handler then finds
   * it on the request).
   */
  getVariableGuards?: Guard[];
  /** The scope the request stands in, from what the guards loaded. */
  scopeOf(req: FastifyRequest): Scope;
}

function routeScope(g: Guards, scope: Omit<ActionsScopeRoutes, 'guards' | 'getVariableGuards'>): ActionsScopeRoutes {
  const guards = [g.scopes(scope.category), ...scope.access];
  if (!guards.includes(g.repoAssignment)) return { ...scope, guards };
  const readingVariable = (guard: Guard) => (guard === g.repoAssignment ? g.repoAssignmentReadingVariable : guard);
  return { ...scope, guards, getVariableGuards: guards.map(readingVariable) };
}

export function actionsRouteScopes(g: Guards): Record<'user' | 'org' | 'repo', ActionsScopeRoutes> {
  return {
    user: routeScope(g, {
      prefix: '/user/actions',
      params: {},
      tag: 'user',
      category: 'user',
      access: [g.reqToken],
      scopeOf: (req) => userScope(requireDoer(req)),
    }),
    org: routeScope(g, {
      prefix: '/orgs/:org/actions',
      params: { org: Type.String({ description: 'name of the organization' }) },
      tag: 'organization',
      category: 'organization',
      access: [g.orgAssignment, g.publicOnly, g.reqToken, g.reqOrgOwnership],
      scopeOf: (req) => orgScope(requireOrg(req)),
    }),
    repo: routeScope(g, {
      prefix: '/repos/:owner/:repo/actions',
      params: {
        owner: Type.String({ description: 'owner of the repository' }),
        repo: Type.String({ description: 'name of the repository' }),
      },
      tag: 'repository',
      category: 'repository',
      // reqOwner: repository owner level (a collaborator with admin rights is not
      // enough), and 404 when the Actions unit is disabled.
      access: [g.repoAssignment, g.publicOnly, g.reqToken, g.reqOwner('actions')],
      scopeOf: (req) => repoScope(requireRepo(req).repo),
    }),
  };
}

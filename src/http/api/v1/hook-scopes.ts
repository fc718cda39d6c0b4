// Where the webhook routes live and who may use them, per scope (Forgejo's
// /orgs/{org}/hooks and /repos/{owner}/{repo}/hooks groups in
// routers/api/v1/api.go). The hook CRUD, delivery history, redelivery and
// ping routes are written once and registered for both.
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { TString } from 'typebox';
import type { HookPlace } from '../../../services/webhooks/deliveries.ts';
import type { Guard, Guards } from '../../guards.ts';
import { requireOrg, requireRepo } from '../../request-context.ts';

export interface HookRouteScope {
  kind: 'org' | 'repo';
  /** e.g. `/orgs/:org/hooks` */
  prefix: string;
  params: Record<string, TString>;
  tag: string;
  guards: Guard[];
  /** The organization, or the repository with its owner, the request names (after the guards). */
  place(req: FastifyRequest): HookPlace;
}

export function hookRouteScopes(g: Guards): HookRouteScope[] {
  // Forgejo's reqWebhooksEnabled has nothing to check: Gantry has no DISABLE_WEBHOOKS.
  return [
    {
      kind: 'org',
      prefix: '/orgs/:org/hooks',
      params: { org: Type.String({ description: 'name of the organization' }) },
      tag: 'organization',
      guards: [g.scopes('organization'), g.orgAssignment, g.publicOnly, g.reqToken, g.reqOrgOwnership],
      place: (req) => ({ kind: 'org', org: requireOrg(req) }),
    },
    {
      kind: 'repo',
      prefix: '/repos/:owner/:repo/hooks',
      params: {
        owner: Type.String({ description: 'owner of the repository' }),
        repo: Type.String({ description: 'name of the repository' }),
      },
      tag: 'repository',
      // reqAdmin: the repository's owner, an admin collaborator or team, a site admin.
      guards: [g.scopes('repository'), g.repoAssignment, g.publicOnly, g.reqToken, g.reqAdmin],
      place: (req) => {
        const { repo, owner } = requireRepo(req);
        return { kind: 'repo', repo, owner };
      },
    },
  ];
}

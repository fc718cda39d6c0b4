// Where the Actions settings routes live and who may use them, per scope
// (Forgejo's /user, /orgs/{org} and /repos/{owner}/{repo} groups in
// routers/api/v1/api.go). Secrets, variables and runners share these.
import { Type } from 'typebox';
import type { TSchema } from 'typebox';
import type { Guard, Guards } from '../../guards.ts';

export interface ActionsRouteScope {
  /** e.g. `/orgs/:org/actions` */
  prefix: string;
  params: Record<string, TSchema>;
  tag: string;
  guards: Guard[];
}

export function actionsRouteScopes(g: Guards): Record<'user' | 'org' | 'repo', ActionsRouteScope> {
  return {
    user: { prefix: '/user/actions', params: {}, tag: 'user', guards: [g.scopes('user'), g.reqToken] },
    org: {
      prefix: '/orgs/:org/actions',
      params: { org: Type.String({ description: 'name of the organization' }) },
      tag: 'organization',
      guards: [g.scopes('organization'), g.orgAssignment, g.publicOnly, g.reqToken, g.reqOrgOwnership],
    },
    repo: {
      prefix: '/repos/:owner/:repo/actions',
      params: { owner: Type.String({ description: 'owner of the repository' }), repo: Type.String({ description: 'name of the repository' }) },
      tag: 'repository',
      // reqOwner: repository owner level (a collaborator with admin rights is not
      // enough), and 404 when the Actions unit is disabled.
      guards: [g.scopes('repository'), g.repoAssignment, g.publicOnly, g.reqToken, g.reqOwner('actions')],
    },
  };
}

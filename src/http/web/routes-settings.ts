// Actions settings at every scope (Forgejo: routers/web/shared/actions/runners.go,
// routers/web/repo/setting/{secrets,variables}.go): runners with the
// registration token, secrets (names and dates only: a value is written,
// never shown), variables. The same routes serve the user, organization,
// repository and instance scopes, each with the access guards of the API's
// routes for that scope (api/v1/actions-scopes.ts and actions-runners.ts):
// the user themself, an organization owner, the repository owner (404 when
// Actions are off), a site admin.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../modules/errors.ts';
import type { Scope } from '../../modules/scope.ts';
import { INSTANCE_SCOPE, orgScope, repoScope, scopeColumns, userScope } from '../../modules/scope.ts';
import { actionsRouteScopes } from '../api/v1/actions-scopes.ts';
import type { Guard } from '../guards.ts';
import { requireDoer, requireOrg, requireRepo } from '../request-context.ts';
import type { WebContext } from './context.ts';
import { field, pageOf, pagerOf, param, reqSignIn } from './context.ts';
import { sendPage, seeOther } from './render.ts';
import { chromeOf, setFlash } from './session.ts';

/** Rows per page of each list (Forgejo lists 100 runners a page); `?page=n` shows the others. */
const PAGE_SIZE = 100;

interface SettingsScope {
  /** Route prefix, e.g. `/org/:org/settings/actions`. */
  prefix: string;
  access: Guard[];
  /** Where secrets and variables live; null for the instance (runners only, as Forgejo's admin pages). */
  actionsScope: ((req: FastifyRequest) => Scope) | null;
  runnerScope: (req: FastifyRequest) => Scope;
  /** The page's URL prefix for this request (the prefix with its parameters filled in). */
  base: (req: FastifyRequest) => string;
  title: (req: FastifyRequest) => string;
}

export function settingsRoutes(app: FastifyInstance, ctx: WebContext): void {
  const { services, guards: g, cookies } = ctx;
  const where = actionsRouteScopes(g);
  const enc = encodeURIComponent;

  const scopes: SettingsScope[] = [
    {
      prefix: '/user/settings/actions',
      access: [reqSignIn, ...where.user.access],
      actionsScope: (req) => userScope(requireDoer(req)),
      runnerScope: (req) => userScope(requireDoer(req)),
      base: () => '/user/settings/actions',
      title: (req) => `Your settings (${requireDoer(req).name})`,
    },
    {
      prefix: '/org/:org/settings/actions',
      access: [reqSignIn, ...where.org.access],
      actionsScope: (req) => orgScope(requireOrg(req)),
      runnerScope: (req) => orgScope(requireOrg(req)),
      base: (req) => `/org/${enc(requireOrg(req).name)}/settings/actions`,
      title: (req) => `Organization ${requireOrg(req).name}`,
    },
    {
      prefix: '/:owner/:repo/settings/actions',
      access: [reqSignIn, ...where.repo.access],
      actionsScope: (req) => repoScope(requireRepo(req).repo),
      runnerScope: (req) => repoScope(requireRepo(req).repo),
      base: (req) => {
        const { owner, repo } = requireRepo(req);
        return `/${enc(owner.name)}/${enc(repo.name)}/settings/actions`;
      },
      title: (req) => {
        const { owner, repo } = requireRepo(req);
        return `${owner.name}/${repo.name}`;
      },
    },
    {
      prefix: '/admin/actions',
      access: [reqSignIn, g.reqSiteAdmin],
      actionsScope: null,
      runnerScope: () => INSTANCE_SCOPE,
      base: () => '/admin/actions',
      title: () => 'Site administration',
    },
  ];

  /** Runs a change, then goes back to `tab` with a flash: the service's refusal (bad name, empty value) or `done`. */
  const change = async (
    req: FastifyRequest,
    reply: FastifyReply,
    scope: SettingsScope,
    tab: string,
    work: () => Promise<string>,
  ) => {
    try {
      setFlash(reply, cookies, 'info', await work());
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      setFlash(reply, cookies, 'error', error.message);
    }
    return seeOther(reply, `${scope.base(req)}/${tab}`);
  };

  for (const scope of scopes) {
    const common = (req: FastifyRequest, tab: string) => ({
      base: scope.base(req),
      heading: scope.title(req),
      tab,
      hasValues: scope.actionsScope !== null,
      // Repositories and organizations have webhooks too (routes-hooks.ts).
      hooksUrl: /^\/(org\/[^/]+|[^/]+\/[^/]+)\/settings\/actions$/.test(scope.base(req))
        ? scope.base(req).replace(/\/actions$/, '/hooks')
        : null,
    });

    app.get(`${scope.prefix}/runners`, { preHandler: scope.access }, async (req, reply) => {
      const runnerScope = scope.runnerScope(req);
      const { page, ...slice } = pageOf(req, PAGE_SIZE);
      const { runners, total } = await services.runners.list(runnerScope, { visible: true, page: slice });
      const own = scopeColumns(runnerScope);
      const token = await services.runners.registrationToken(own);
      return sendPage(reply, 'settings-runners', chromeOf(cookies, req, reply, 'Runners'), {
        ...common(req, 'runners'),
        runners: runners.map((runner) => ({
          runner,
          status: services.runners.status(runner),
          editable: runner.ownerId === own.ownerId && runner.repoId === own.repoId,
          level: runner.repoId !== 0 ? 'repository' : runner.ownerId !== 0 ? 'owner' : 'global',
        })),
        total,
        token,
        pager: pagerOf(page, PAGE_SIZE, total, `${scope.base(req)}/runners`),
      });
    });
    app.post(`${scope.prefix}/runners/reset_registration_token`, { preHandler: scope.access }, async (req, reply) =>
      change(req, reply, scope, 'runners', async () => {
        await services.runners.deactivateRegistrationToken(scopeColumns(scope.runnerScope(req)));
        return 'The registration token has been reset; runners already registered keep working.';
      }),
    );
    app.post(`${scope.prefix}/runners/:id/delete`, { preHandler: scope.access }, async (req, reply) =>
      change(req, reply, scope, 'runners', async () => {
        const id = /^\d{1,15}$/.test(param(req, 'id')) ? Number(param(req, 'id')) : 0;
        await services.runners.delete(scope.runnerScope(req), id);
        return 'The runner was deleted.';
      }),
    );

    const valuesScope = scope.actionsScope;
    if (valuesScope === null) continue;

    app.get(`${scope.prefix}/secrets`, { preHandler: scope.access }, async (req, reply) => {
      const { page, ...slice } = pageOf(req, PAGE_SIZE);
      const { secrets, total } = await services.secrets.list(valuesScope(req), slice);
      return sendPage(reply, 'settings-secrets', chromeOf(cookies, req, reply, 'Secrets'), {
        ...common(req, 'secrets'),
        secrets,
        total,
        pager: pagerOf(page, PAGE_SIZE, total, `${scope.base(req)}/secrets`),
      });
    });
    // Add or update: the value is written and never read back (the form is empty again afterwards).
    app.post(`${scope.prefix}/secrets`, { preHandler: scope.access }, async (req, reply) =>
      change(req, reply, scope, 'secrets', async () => {
        const name = field(req.body, 'name').trim();
        const result = await services.secrets.createOrUpdate(valuesScope(req), name, field(req.body, 'data'));
        return `Secret ${name.toUpperCase()} ${result}.`;
      }),
    );
    app.post(`${scope.prefix}/secrets/:name/delete`, { preHandler: scope.access }, async (req, reply) =>
      change(req, reply, scope, 'secrets', async () => {
        await services.secrets.delete(valuesScope(req), param(req, 'name'));
        return `Secret ${param(req, 'name')} deleted.`;
      }),
    );

    app.get(`${scope.prefix}/variables`, { preHandler: scope.access }, async (req, reply) => {
      const { page, ...slice } = pageOf(req, PAGE_SIZE);
      const { variables, total } = await services.variables.list(valuesScope(req), slice);
      return sendPage(reply, 'settings-variables', chromeOf(cookies, req, reply, 'Variables'), {
        ...common(req, 'variables'),
        variables,
        total,
        pager: pagerOf(page, PAGE_SIZE, total, `${scope.base(req)}/variables`),
      });
    });
    app.post(`${scope.prefix}/variables/new`, { preHandler: scope.access }, async (req, reply) =>
      change(req, reply, scope, 'variables', async () => {
        const name = field(req.body, 'name').trim();
        await services.variables.create(valuesScope(req), name, field(req.body, 'value'));
        return `Variable ${name.toUpperCase()} added.`;
      }),
    );
    app.post(`${scope.prefix}/variables/:name/edit`, { preHandler: scope.access }, async (req, reply) =>
      change(req, reply, scope, 'variables', async () => {
        await services.variables.update(valuesScope(req), param(req, 'name'), {
          name: field(req.body, 'name').trim(),
          value: field(req.body, 'value'),
        });
        return `Variable ${param(req, 'name')} updated.`;
      }),
    );
    app.post(`${scope.prefix}/variables/:name/delete`, { preHandler: scope.access }, async (req, reply) =>
      change(req, reply, scope, 'variables', async () => {
        await services.variables.delete(valuesScope(req), param(req, 'name'));
        return `Variable ${param(req, 'name')} deleted.`;
      }),
    );
  }
}

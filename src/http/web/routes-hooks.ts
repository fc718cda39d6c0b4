// Webhooks of a repository and of an organization (Forgejo: routers/web/repo/setting/webhook.go,
// templates/repo/settings/webhook/*): list, create, edit, delete, and each
// hook's delivery history with the request and response of its last
// attempt, Redeliver and Test delivery. Access is the API's for hooks of that
// scope (api/v1/hook-scopes.ts: repository admin, organization owner). The
// hook's secret and Authorization header are write-only: the form never
// shows them, and recorded request headers are redacted by the delivery
// worker before they are stored.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../modules/errors.ts';
import { apiEventsOf } from '../../services/webhooks/hook-events.ts';
import type { HookPlace } from '../../services/webhooks/deliveries.ts';
import { scopeOfPlace } from '../../services/webhooks/deliveries.ts';
import { hookRouteScopes } from '../api/v1/hook-scopes.ts';
import type { WebContext } from './context.ts';
import { field, param, reqSignIn } from './context.ts';
import { sendPage, seeOther } from './render.ts';
import { chromeOf, setFlash } from './session.ts';

/** The events the form offers (API names); a hook keeps any other it has. */
export const FORM_EVENTS = [
  'push',
  'create',
  'delete',
  'release',
  'pull_request',
  'issues',
  'workflow_run',
  'workflow_job',
] as const;
/** Deliveries shown on a hook's page, newest first. */
const DELIVERIES_SHOWN = 20;

function idParam(req: FastifyRequest, name: string): number {
  const raw = param(req, name);
  return /^\d{1,15}$/.test(raw) ? Number(raw) : 0;
}

/** The form's fields as the hooks service takes them. */
function formInput(body: unknown) {
  const events = FORM_EVENTS.filter((event) => field(body, `event_${event}`) === 'on');
  return {
    config: {
      url: field(body, 'url').trim(),
      content_type: field(body, 'content_type') || 'json',
    },
    secret: field(body, 'secret'),
    events: events.length > 0 ? [...events] : ['push'],
    branch_filter: field(body, 'branch_filter'),
    authorization_header: field(body, 'authorization_header'),
    active: field(body, 'active') === 'on',
  };
}

export function hookRoutes(app: FastifyInstance, ctx: WebContext): void {
  const { services, guards: g, cookies } = ctx;
  const enc = encodeURIComponent;
  const web = [
    { api: 'org', prefix: '/org/:org/settings/hooks' },
    { api: 'repo', prefix: '/:owner/:repo/settings/hooks' },
  ] as const;

  for (const where of web) {
    const api = hookRouteScopes(g).find((scope) => scope.kind === where.api);
    if (!api) throw new Error(`no hook scope ${where.api}`);
    const guards = [reqSignIn, ...api.guards];
    const base = (place: HookPlace) =>
      place.kind === 'org'
        ? `/org/${enc(place.org.name)}/settings/hooks`
        : `/${enc(place.owner.name)}/${enc(place.repo.name)}/settings/hooks`;
    const heading = (place: HookPlace) =>
      place.kind === 'org' ? `Organization ${place.org.name}` : `${place.owner.name}/${place.repo.name}`;

    const back = async (
      req: FastifyRequest,
      reply: FastifyReply,
      to: string,
      work: () => Promise<string>,
    ): Promise<FastifyReply> => {
      try {
        setFlash(reply, cookies, 'info', await work());
      } catch (error) {
        if (!(error instanceof AppError) || error.kind === 'not_found') throw error;
        setFlash(reply, cookies, 'error', error.message);
      }
      return seeOther(reply, to);
    };

    app.get(where.prefix, { preHandler: guards }, async (req, reply) => {
      const place = api.place(req);
      const { hooks } = await services.webhooks.list(scopeOfPlace(place), { page: 1, limit: 100, offset: 0 });
      return sendPage(reply, 'hooks', chromeOf(cookies, req, reply, 'Webhooks'), {
        base: base(place),
        heading: heading(place),
        hooks: hooks.map((hook) => ({ hook, events: apiEventsOf(hook.events) })),
      });
    });

    app.get(`${where.prefix}/new`, { preHandler: guards }, async (req, reply) => {
      const place = api.place(req);
      return sendPage(reply, 'hook-form', chromeOf(cookies, req, reply, 'Add webhook'), {
        base: base(place),
        heading: heading(place),
        hook: null,
        events: ['push'],
        formEvents: FORM_EVENTS,
        deliveries: [],
      });
    });

    app.post(`${where.prefix}/new`, { preHandler: guards }, async (req, reply) => {
      const place = api.place(req);
      const input = formInput(req.body);
      return back(req, reply, base(place), async () => {
        const hook = await services.webhooks.create(scopeOfPlace(place), {
          type: 'forgejo',
          config: { ...input.config, secret: input.secret },
          events: input.events,
          branch_filter: input.branch_filter,
          authorization_header: input.authorization_header,
          active: input.active,
        });
        return `Webhook ${hook.id} added.`;
      });
    });

    app.get(`${where.prefix}/:id`, { preHandler: guards }, async (req, reply) => {
      const place = api.place(req);
      const scope = scopeOfPlace(place);
      const hook = await services.webhooks.get(scope, idParam(req, 'id'));
      const { deliveries } = await services.webhookDeliveries.list(scope, hook.id, {
        page: 1,
        limit: DELIVERIES_SHOWN,
        offset: 0,
      });
      const details = await Promise.all(
        deliveries.map((delivery) => services.webhookDeliveries.get(scope, hook.id, delivery.id)),
      );
      return sendPage(reply, 'hook-form', chromeOf(cookies, req, reply, `Webhook ${hook.id}`), {
        base: base(place),
        heading: heading(place),
        hook,
        events: apiEventsOf(hook.events),
        formEvents: FORM_EVENTS,
        deliveries: details.map((detail) => ({
          ...detail,
          requestBody:
            typeof detail.request?.payload === 'string'
              ? detail.request.payload
              : JSON.stringify(detail.request?.payload ?? null, null, 2),
        })),
      });
    });

    app.post(`${where.prefix}/:id`, { preHandler: guards }, async (req, reply) => {
      const place = api.place(req);
      const id = idParam(req, 'id');
      const input = formInput(req.body);
      return back(req, reply, `${base(place)}/${id}`, async () => {
        await services.webhooks.edit(scopeOfPlace(place), id, {
          config: input.config,
          events: input.events,
          branch_filter: input.branch_filter,
          ...(input.authorization_header !== '' ? { authorization_header: input.authorization_header } : {}),
          keepAuthorizationHeader: field(req.body, 'clear_authorization_header') !== 'on',
          active: input.active,
        });
        return 'The webhook has been updated.';
      });
    });

    app.post(`${where.prefix}/:id/delete`, { preHandler: guards }, async (req, reply) => {
      const place = api.place(req);
      return back(req, reply, base(place), async () => {
        await services.webhooks.delete(scopeOfPlace(place), idParam(req, 'id'));
        return 'The webhook has been removed.';
      });
    });

    // Test delivery: a push of the default branch's head for a repository's hook
    // (Forgejo's TestWebhook), a ping for an organization's.
    app.post(`${where.prefix}/:id/test`, { preHandler: guards }, async (req, reply) => {
      const place = api.place(req);
      const id = idParam(req, 'id');
      const doer = req.auth.doer;
      if (!doer) throw AppError.unauthorized('sign in first');
      return back(req, reply, `${base(place)}/${id}`, async () => {
        if (place.kind === 'repo') await services.webhookTests.send(place.repo, place.owner, id, doer, '');
        else await services.webhookDeliveries.ping(place, id, doer);
        return 'A test delivery has been queued.';
      });
    });

    app.post(`${where.prefix}/:id/deliveries/:delivery/redeliver`, { preHandler: guards }, async (req, reply) => {
      const place = api.place(req);
      const id = idParam(req, 'id');
      return back(req, reply, `${base(place)}/${id}`, async () => {
        await services.webhookDeliveries.redeliver(scopeOfPlace(place), id, idParam(req, 'delivery'));
        return 'The delivery has been queued again.';
      });
    });
  }
}

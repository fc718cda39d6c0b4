// Webhook wire types, named after Forgejo's structs (modules/structs/hook.go).
import { Type } from 'typebox';
import type { Static } from 'typebox';

export const Hook = Type.Object(
  {
    id: Type.Integer(),
    type: Type.String(),
    branch_filter: Type.String(),
    url: Type.String({ description: 'target URL' }),
    config: Type.Record(Type.String(), Type.String(), {
      description:
        'deprecated: `url` and `content_type` (slack adds channel, username, icon_url, color); never the secret',
    }),
    events: Type.Array(Type.String(), { description: 'subscribed events in a fixed order' }),
    authorization_header: Type.String({
      description: 'the Authorization header sent with deliveries, in clear (as Forgejo)',
    }),
    content_type: Type.String({ description: '`json` or `form`' }),
    metadata: Type.Unknown({ description: "the type's settings; null for types without any" }),
    active: Type.Boolean(),
    updated_at: Type.String({ format: 'date-time' }),
    created_at: Type.String({ format: 'date-time' }),
  },
  { title: 'Hook' },
);
export type HookJson = Static<typeof Hook>;

// Every field is optional here: the service checks presence in Forgejo's order
// (`[Type]: Required` before `[Config]: Required` before `[BranchFilter]: …`).
export const CreateHookOption = Type.Object(
  {
    type: Type.Optional(
      Type.String({
        description:
          'forgejo, gitea, gogs, slack, discord, dingtalk, telegram, msteams, feishu, matrix, wechatwork, packagist or sourcehut_builds (required)',
      }),
    ),
    config: Type.Optional(
      Type.Record(Type.String(), Type.String(), {
        description:
          'url, content_type (json|form), secret, is_system_webhook; slack: channel, username, icon_url, color (required)',
      }),
    ),
    events: Type.Optional(Type.Array(Type.String(), { description: 'default ["push"]' })),
    branch_filter: Type.Optional(Type.String({ description: 'glob of branches for push/create/delete' })),
    authorization_header: Type.Optional(Type.String()),
    active: Type.Optional(Type.Boolean({ default: false })),
  },
  { title: 'CreateHookOption' },
);

export const EditHookOption = Type.Object(
  {
    config: Type.Optional(Type.Record(Type.String(), Type.String())),
    events: Type.Optional(Type.Array(Type.String(), { description: 'omitted or empty resets to ["push"]' })),
    branch_filter: Type.Optional(Type.String({ description: 'omitted clears it' })),
    authorization_header: Type.Optional(Type.String({ description: 'omitted clears it' })),
    active: Type.Optional(Type.Boolean({ description: 'omitted leaves it unchanged' })),
  },
  { title: 'EditHookOption' },
);

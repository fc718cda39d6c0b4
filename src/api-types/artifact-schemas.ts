// Wire type of an Actions artifact: Forgejo 16's ActionArtifact
// (modules/structs/action.go), keys in Go field order.
import { Type } from 'typebox';
import type { Static } from 'typebox';

const Time = (description: string) => Type.String({ format: 'date-time', description });

export const ActionArtifact = Type.Object(
  {
    id: Type.Integer({ description: 'the smallest row id of the (run, name) group' }),
    name: Type.String(),
    size_in_bytes: Type.Integer({ description: 'the stored size (a v4 artifact: its zip)' }),
    archive_download_url: Type.String({ description: '…/actions/artifacts/{id}/zip' }),
    expired: Type.Boolean({ description: 'its files were removed after its retention' }),
    run_id: Type.Integer({ description: 'the run that uploaded it' }),
    created_at: Time('first upload'),
    updated_at: Time('last change'),
    expires_at: Time('when its files are removed'),
  },
  { title: 'ActionArtifact' },
);
export type ActionArtifactJson = Static<typeof ActionArtifact>;

export const ActionArtifactArray = Type.Array(ActionArtifact, {
  description: 'newest first; paginated with page and limit, X-Total-Count and Link',
});

// Actions variables → Forgejo's JSON (api.ActionVariable). Secrets have no
// converter of their own: only their name and time are ever shown.
import type { ActionVariableJson } from '../api-types/schemas.ts';
import type { ScopedValue } from '../models/scoped-values.ts';

export function toApiVariable(variable: ScopedValue): ActionVariableJson {
  return { owner_id: variable.ownerId, repo_id: variable.repoId, name: variable.name, data: variable.data };
}

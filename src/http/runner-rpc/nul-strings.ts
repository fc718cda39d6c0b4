// U+0000 in a runner's strings (a name, a label, a version, a job handle):
// PostgreSQL cannot store it in text, and nothing stored can match it, so the
// call is refused as invalid_argument before any handler runs, as the REST
// API refuses it in JSON bodies. Exempt: log lines (stored in files),
// outputs (the service stores U+FFFD in its place and acknowledges the key as
// sent, so the runner's closing loop ends) and Ping's data (echoed, never
// stored).
import type { DescField, DescMessage } from '@bufbuild/protobuf';
import type { Interceptor } from '@connectrpc/connect';
import { AppError } from '../../modules/errors.ts';

const MAY_HOLD_NUL: ReadonlySet<string> = new Set([
  'runner.v1.LogRow.content',
  'runner.v1.UpdateTaskRequest.outputs',
  'ping.v1.PingRequest.data',
]);

function hasNul(value: unknown): boolean {
  return typeof value === 'string' && value.includes('\u0000');
}

/** The proto name of the first string field (at any depth) holding U+0000, or null. */
export function fieldWithNul(desc: DescMessage, message: Record<string, unknown>): string | null {
  for (const field of desc.fields) {
    if (MAY_HOLD_NUL.has(`${desc.typeName}.${field.name}`)) continue;
    const value = message[field.localName];
    if (value === undefined || value === null) continue;
    const found = valueWithNul(field, value);
    if (found !== null) return found;
  }
  return null;
}

function valueWithNul(field: DescField, value: unknown): string | null {
  switch (field.fieldKind) {
    case 'scalar':
      return hasNul(value) ? field.name : null;
    case 'message':
      return fieldWithNul(field.message, value as Record<string, unknown>);
    case 'list':
      for (const item of value as unknown[]) {
        const found =
          field.listKind === 'message'
            ? fieldWithNul(field.message, item as Record<string, unknown>)
            : hasNul(item)
              ? field.name
              : null;
        if (found !== null) return found;
      }
      return null;
    case 'map':
      for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
        if (hasNul(key)) return field.name;
        const found =
          field.mapKind === 'message'
            ? fieldWithNul(field.message, item as Record<string, unknown>)
            : hasNul(item)
              ? field.name
              : null;
        if (found !== null) return found;
      }
      return null;
    default:
      return null;
  }
}

export const refuseNulStrings: Interceptor = (next) => async (req) => {
  if (!req.stream) {
    const field = fieldWithNul(req.method.input, req.message as unknown as Record<string, unknown>);
    if (field !== null) throw AppError.invalid(`${field} must not contain NUL characters`);
  }
  return next(req);
};

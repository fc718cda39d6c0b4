// Packagist update requests, as Forgejo's services/webhook/packagist.go sends
// them: the same body for every event, `{"repository": {"url": <package URL>}}`,
// POSTed to the hook URL (Forgejo's form builds it as
// https://packagist.org/api/update-package?username=…&apiToken=…), without
// Forgejo's X-Forgejo-* headers.
//
// The package URL comes from the hook's settings; a hook created through the
// API has none (Forgejo's API cannot set them and then sends an empty URL,
// which Packagist refuses), so the repository's web URL stands in — the URL a
// package's repository is usually registered under.
import { emptyPush, skip } from './converter.ts';
import type { Converter } from './converter.ts';
import { jsonBody, list, obj, repoView, str } from './text.ts';

/** The repository an event is about: most payloads carry it at the top, action runs inside `run`. */
function repositoryUrlOf(payload: Record<string, unknown>): string {
  return repoView(payload.repository).htmlUrl || repoView(obj(payload.run).repository).htmlUrl;
}

export const packagist: Converter = (input) => {
  if (input.eventType === 'push' && list(input.payload.commits).length === 0) return emptyPush('packagist');
  const packageUrl = str(input.meta.package_url) || repositoryUrlOf(input.payload);
  if (packageUrl === '')
    return skip(`packagist hooks need a package URL, and this ${input.eventType} event names no repository`);
  return {
    kind: 'request',
    request: {
      method: 'POST',
      url: input.url,
      headers: { 'content-type': 'application/json' },
      body: jsonBody({ repository: { url: packageUrl } }),
      forgejoHeaders: false,
    },
  };
};

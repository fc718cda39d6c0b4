// List paging as Gantry serves it: Forgejo's `page`/`limit` vocabulary with the
// deliberate departure that lists are always bounded (a missing page is page 1).

export interface PagingDefaults {
  defaultPagingNum: number;
  maxResponseItems: number;
}

export interface Page {
  /** 1-based. */
  page: number;
  limit: number;
  offset: number;
}

/** Lenient like Forgejo: non-numeric or non-positive values fall back to the defaults. */
export function parsePage(query: { page?: unknown; limit?: unknown }, defaults: PagingDefaults): Page {
  const page = positiveInt(first(query.page)) ?? 1;
  const requested = positiveInt(first(query.limit));
  const limit = Math.min(requested ?? defaults.defaultPagingNum, defaults.maxResponseItems);
  return { page, limit, offset: (page - 1) * limit };
}

function first(value: unknown): unknown {
  return Array.isArray(value) ? value[0] : value;
}

function positiveInt(value: unknown): number | null {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value > 0 ? value : null;
  if (typeof value !== 'string' || !/^\+?\d+$/.test(value.trim())) return null;
  const parsed = Number(value.trim());
  return Number.isSafeInteger(parsed) && parsed > 0 ? parsed : null;
}

/**
 * Forgejo's `Link` header (modules/paginator): next, last, first, prev, comma-joined,
 * each the request URL with `page` replaced. Empty when everything fits on one page.
 */
export function linkHeader(requestUrl: URL, page: Page, total: number): string | null {
  const lastPage = Math.max(1, Math.ceil(total / page.limit));
  if (lastPage <= 1) return null;
  const current = Math.min(Math.max(page.page, 1), lastPage);
  const at = (n: number): string => {
    const url = new URL(requestUrl.href);
    url.searchParams.set('page', String(n));
    url.searchParams.sort();
    return url.href;
  };
  const links: string[] = [];
  if (total > current * page.limit) links.push(`<${at(current + 1)}>; rel="next"`);
  if (current < lastPage) links.push(`<${at(lastPage)}>; rel="last"`);
  if (current > 1) links.push(`<${at(1)}>; rel="first"`);
  if (current > 1) links.push(`<${at(current - 1)}>; rel="prev"`);
  return links.length > 0 ? links.join(',') : null;
}

/** Parses an id path segment like Forgejo's ParamsInt64: anything unparsable is 0. */
export function parseIdParam(value: string | undefined): number {
  if (value === undefined || !/^\+?\d+$/.test(value)) return 0;
  const parsed = Number(value);
  return Number.isSafeInteger(parsed) ? parsed : 0;
}

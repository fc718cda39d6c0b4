// What every route file of the console receives, and the small helpers they share.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config.ts';
import { AppError } from '../../modules/errors.ts';
import type { Services } from '../../services/index.ts';
import type { Guard, Guards } from '../guards.ts';
import type { CookieSettings } from './session.ts';

export interface WebContext {
  config: Config;
  services: Services;
  /** The API's guards: the console asks the same questions the API does. */
  guards: Guards;
  cookies: CookieSettings;
}

/** Signed-out visitors of a page that needs a user are sent to sign in first. */
export const reqSignIn: Guard = async (req) => {
  if (!req.auth.doer) throw AppError.unauthorized('sign in first');
};

/**
 * Whether `guard` lets this request through: how a page decides to show a
 * button, by asking the very guard its POST route runs (never a copy of the rule).
 */
export async function passes(guard: Guard, req: FastifyRequest, reply: FastifyReply): Promise<boolean> {
  try {
    await (guard as (req: FastifyRequest, reply: FastifyReply) => Promise<void>)(req, reply);
    return true;
  } catch (error) {
    if (error instanceof AppError) return false;
    throw error;
  }
}

/** A form field as a string ('' when absent or not a string). */
export function field(body: unknown, name: string): string {
  const value = (body as Record<string, unknown> | null | undefined)?.[name];
  return typeof value === 'string' ? value : '';
}

/** A query parameter as a string ('' when absent). */
export function queryParam(req: FastifyRequest, name: string): string {
  const value = (req.query as Record<string, unknown> | undefined)?.[name];
  return typeof value === 'string' ? value : '';
}

export function param(req: FastifyRequest, name: string): string {
  return (req.params as Record<string, string | undefined>)[name] ?? '';
}

/** A path or query number (`12`), or -1 for anything else: never NaN, never a float. */
export function positiveInt(raw: string): number {
  return /^\d{1,15}$/.test(raw) ? Number(raw) : -1;
}

/** Links to the neighbouring pages of a list `size` rows a page, `total` rows in all, at `url` (`?<param>=n`). */
export interface Pager {
  page: number;
  pages: number;
  previousUrl: string | null;
  nextUrl: string | null;
}

/** The 1-based page query parameter (1 when absent or not a number) and its rows' offset. */
export function pageOf(
  req: FastifyRequest,
  size: number,
  param = 'page',
): { page: number; limit: number; offset: number } {
  const page = Math.max(1, positiveInt(queryParam(req, param)));
  return { page, limit: size, offset: (page - 1) * size };
}

export function pagerOf(page: number, size: number, total: number, url: string, param = 'page'): Pager {
  const pages = Math.max(1, Math.ceil(total / size));
  const link = (n: number) => (n === 1 ? url : `${url}?${param}=${n}`);
  return {
    page,
    pages,
    previousUrl: page > 1 ? link(Math.min(page - 1, pages)) : null,
    nextUrl: page < pages ? link(page + 1) : null,
  };
}

// Per-IP and per-token request rate limits. Placeholder: not written yet.
import type { FastifyInstance } from 'fastify';
import type { Deps } from '../deps.ts';

export function installRateLimits(_app: FastifyInstance, _deps: Deps): void {}

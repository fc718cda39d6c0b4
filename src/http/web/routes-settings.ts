import type { FastifyInstance } from 'fastify';
import type { WebContext } from './context.ts';

export function settingsRoutes(_app: FastifyInstance, _ctx: WebContext): void {}

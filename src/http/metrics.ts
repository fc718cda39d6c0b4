// GET /metrics (Prometheus text format). Placeholder: not written yet.
import type { FastifyInstance } from 'fastify';
import type { Deps } from '../deps.ts';

export function installMetrics(_app: FastifyInstance, _deps: Deps): void {}

// Every route of a running Gantry, for the fuzz test: the router's own table
// (so a route added tomorrow is fuzzed without touching the test) joined with
// what the OpenAPI document says about its body and query, and with the
// request messages of the Connect services.
import type { FastifyInstance } from 'fastify';
import type { DescMessage } from '@bufbuild/protobuf';
import { PingService } from '../../../src/gen/ping/v1/services_pb.ts';
import { RunnerService } from '../../../src/gen/runner/v1/services_pb.ts';

export type RouteKind = 'api' | 'git' | 'rpc' | 'other';

/** A JSON schema as the OpenAPI document carries it (only what the fuzzer reads). */
export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  additionalProperties?: boolean | JsonSchema;
}

export interface FuzzRoute {
  method: string;
  /** The router's template, e.g. `/api/v1/repos/:owner/:repo`. */
  template: string;
  params: string[];
  kind: RouteKind;
  /** The JSON request body schema of an API route, when it has one. */
  body: JsonSchema | null;
  /** Query parameter names the OpenAPI document lists. */
  query: string[];
  /** The request message of a Connect method. */
  message: DescMessage | null;
}

/** The methods a client may send; the router's extras (TRACE, QUERY…) are left out. */
export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;

const TREE_LINE = /^((?:│ {3}| {4})*)(?:├── |└── )(.*?)(?: \(([A-Z, ]+)\))?$/;

/**
 * Parses `printRoutes({ commonPrefix: false })`: one node per line, indented
 * four columns per level, each node's text appended to its parent's path.
 */
export function routerTable(app: FastifyInstance): { template: string; methods: string[] }[] {
  const stack: string[] = [];
  const out: { template: string; methods: string[] }[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const match = TREE_LINE.exec(line);
    if (match === null) continue;
    const depth = (match[1] ?? '').length / 4;
    stack.length = depth;
    const template = `${stack[depth - 1] ?? ''}${match[2] ?? ''}`;
    stack.push(template);
    if (match[3] !== undefined) out.push({ template, methods: match[3].split(', ') });
  }
  return out;
}

interface OpenApiOperation {
  parameters?: { in: string; name: string }[];
  requestBody?: { content?: Record<string, { schema?: JsonSchema }> };
}

function kindOf(template: string): RouteKind {
  if (template.startsWith('/api/v1/')) return 'api';
  if (template.startsWith('/api/actions/')) return 'rpc';
  if (/^\/:owner\/:repo\//.test(template)) return 'git';
  return 'other';
}

function connectMessages(): Map<string, DescMessage> {
  const byPath = new Map<string, DescMessage>();
  for (const service of [PingService, RunnerService]) {
    for (const method of service.methods) byPath.set(`/api/actions/${service.typeName}/${method.name}`, method.input);
  }
  return byPath;
}

/** Joins the router table with the OpenAPI document (`paths` relative to /api/v1, `{param}` style). */
export function fuzzRoutes(
  app: FastifyInstance,
  openapi: { paths: Record<string, Record<string, OpenApiOperation>> },
): FuzzRoute[] {
  const operations = new Map<string, OpenApiOperation>();
  for (const [path, item] of Object.entries(openapi.paths)) {
    const template = `/api/v1${path.replace(/\{([^}]+)\}/g, ':$1')}`;
    for (const [method, operation] of Object.entries(item))
      operations.set(`${method.toUpperCase()} ${template}`, operation);
  }
  const messages = connectMessages();
  const routes: FuzzRoute[] = [];
  for (const { template, methods } of routerTable(app)) {
    const params = [...template.matchAll(/:(\w+)|\*/g)].map((m) => m[1] ?? '*');
    const kind = kindOf(template);
    // Connect routes take every method but serve POST only; the others are still sent, now and then.
    const served = kind === 'rpc' ? ['POST'] : methods.filter((m) => (HTTP_METHODS as readonly string[]).includes(m));
    for (const method of served) {
      const operation = operations.get(`${method} ${template}`) ?? operations.get(`GET ${template}`);
      routes.push({
        method,
        template,
        params,
        kind,
        body: operation?.requestBody?.content?.['application/json']?.schema ?? null,
        query: (operation?.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
        message: messages.get(template) ?? null,
      });
    }
  }
  return routes;
}

/** Operations in the OpenAPI document the router does not serve: the two must agree. */
export function undocumentedOrMissing(
  routes: FuzzRoute[],
  openapi: { paths: Record<string, Record<string, unknown>> },
): string[] {
  const served = new Set(routes.map((r) => `${r.method} ${r.template}`));
  const problems: string[] = [];
  for (const [path, item] of Object.entries(openapi.paths)) {
    for (const method of Object.keys(item)) {
      const key = `${method.toUpperCase()} /api/v1${path.replace(/\{([^}]+)\}/g, ':$1')}`;
      if (!served.has(key)) problems.push(`documented but not routed: ${key}`);
    }
  }
  return problems;
}

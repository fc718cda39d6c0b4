// The jobs of a run and their logs (Forgejo 16's routers/api/v1/repo/action.go
// ListActionRunJobs, GetActionJobLogs, GetActionRunLogs; Gitea's
// GetWorkflowJob for one job). Reading needs read access to the Actions unit,
// as the runs routes: anonymous works on public repositories.
import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import { parseByteRange } from '../../../modules/byte-range.ts';
import { parseIdParam } from '../../../modules/pagination.ts';
import { toActionRunJob, toActionWorkflowJob } from '../../../services/convert-jobs.ts';
import { API_CACHE_CONTROL } from '../../api-cache-control.ts';
import { requireRepo } from '../../request-context.ts';
import { sendWritten } from '../../send-written.ts';
import type { ApiApp, RouteContext } from './route-context.ts';
import { ActionRunJobArray, ActionWorkflowJob } from '../../../api-types/job-schemas.ts';
import { errorResponses } from '../../../api-types/schemas.ts';

const TEXT = 'text/plain; charset=utf-8';

function httpDate(unixSec: number): string {
  return new Date(unixSec * 1000).toUTCString();
}

/** Go's strconv.ParseInt failing reads as 0 (Forgejo's ctx.FormInt64): a task attempt that never exists. */
function parseAttempt(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const text = Array.isArray(value) ? String(value[0] ?? '') : String(value);
  if (!/^[+-]?\d+$/.test(text)) return 0;
  const parsed = Number(text);
  return Number.isSafeInteger(parsed) ? parsed : 0;
}

function sendUnsatisfiable(reply: FastifyReply, size: number) {
  // Go's ServeContent: 416 with the size in Content-Range, a plain-text reason.
  return reply
    .status(416)
    .header('Content-Range', `bytes */${size}`)
    .type(TEXT)
    .send('invalid range: failed to overlap\n');
}

export function actionsJobRoutes(app: ApiApp, ctx: RouteContext): void {
  const { config, services, guards: g } = ctx;
  const readGuards = [g.scopes('repository'), g.repoAssignment, g.publicOnly, g.reqRepoReader('actions')];
  const tags = ['repository'];
  const runParams = Type.Object({ owner: Type.String(), repo: Type.String(), run_id: Type.String() });
  const jobParams = Type.Object({ owner: Type.String(), repo: Type.String(), job_id: Type.String() });

  app.get(
    '/repos/:owner/:repo/actions/runs/:run_id/jobs',
    {
      schema: {
        operationId: 'ListActionRunJobs',
        tags,
        description: "The run's jobs by id, unpaginated (Forgejo 16).",
        params: runParams,
        response: { 200: ActionRunJobArray, ...errorResponses(403, 404) },
      },
      preValidation: readGuards,
    },
    async (req) => {
      const runId = parseIdParam(req.params.run_id);
      const jobs = await services.jobs.listOfRun(requireRepo(req).repo, runId);
      return jobs.map(toActionRunJob);
    },
  );

  app.get(
    '/repos/:owner/:repo/actions/jobs/:job_id',
    {
      schema: {
        operationId: 'GetWorkflowJob',
        tags,
        description: "Gitea's ActionWorkflowJob; each step shows its own status and times.",
        params: jobParams,
        response: { 200: ActionWorkflowJob, ...errorResponses(403, 404) },
      },
      preValidation: readGuards,
    },
    async (req) => {
      const { repo, owner } = requireRepo(req);
      const jobId = parseIdParam(req.params.job_id);
      const details = await services.jobs.details(repo, jobId);
      const repoPath = `${owner.name}/${repo.name}`;
      return toActionWorkflowJob(details, `${config.rootUrl}api/v1/repos/${repoPath}`, `${config.rootUrl}${repoPath}`);
    },
  );

  app.get(
    '/repos/:owner/:repo/actions/jobs/:job_id/logs',
    {
      schema: {
        operationId: 'GetActionJobLogs',
        tags,
        description:
          "The job's log as plain text, one `<RFC 3339 time, 7 fractional digits> <content>` line per runner line. " +
          'Without `attempt`, the current attempt. While the job runs: the lines acknowledged to the runner so far. ' +
          'One `Range: bytes=…` is honoured (206).',
        params: jobParams,
        querystring: Type.Object({
          attempt: Type.Optional(Type.String({ description: 'the attempt number (1 is the first run)' })),
        }),
        response: { ...errorResponses(403, 404) },
      },
      preValidation: readGuards,
    },
    async (req, reply) => {
      const jobId = parseIdParam(req.params.job_id);
      const attempt = parseAttempt((req.query as { attempt?: unknown }).attempt);
      const log = await services.jobLogs.open(requireRepo(req).repo, jobId, attempt);
      const lastModified = httpDate(log.modified);
      reply
        .type(TEXT)
        .header('Accept-Ranges', 'bytes')
        .header('Last-Modified', lastModified)
        .header('Content-Disposition', `attachment; filename="${log.filename}"`);
      // If-Range with anything but the current Last-Modified: the client's copy is stale, send it all.
      const ifRange = req.headers['if-range'];
      const range =
        ifRange === undefined || ifRange === lastModified
          ? parseByteRange(req.headers.range, log.size)
          : { kind: 'whole' as const };
      if (range.kind === 'unsatisfiable') return sendUnsatisfiable(reply, log.size);
      const [start, end] = range.kind === 'whole' ? [0, log.size - 1] : [range.start, range.end];
      if (range.kind === 'partial') reply.status(206).header('Content-Range', `bytes ${start}-${end}/${log.size}`);
      reply.header('Content-Length', String(end - start + 1));
      // HEAD (Fastify's automatic route): the headers only, without reading the log.
      // (An empty stream: a string body would have Fastify reset Content-Length to 0.)
      if (req.method === 'HEAD') return reply.send(Readable.from([]));
      const body = await log.read(start, end);
      // Written, not piped: the body reuses its buffers (log-body.ts); onSend does not run for it.
      reply.header('Cache-Control', API_CACHE_CONTROL);
      return sendWritten(reply, (sink) => body.writeTo(sink));
    },
  );

  app.get(
    '/repos/:owner/:repo/actions/runs/:run_id/logs',
    {
      schema: {
        operationId: 'GetActionRunLogs',
        tags,
        description:
          "A zip of every job's current-attempt log, streamed: `<job name>-<job id>-attempt-<N>.log`, or `….MISSING` " +
          'with the reason when a job has no log. No ZIP64: an archive past 4 GiB lists the rest as missing.',
        params: runParams,
        response: { ...errorResponses(403, 404) },
      },
      preValidation: readGuards,
    },
    async (req, reply) => {
      const runId = parseIdParam(req.params.run_id);
      const body = await services.jobLogs.runLogsZip(requireRepo(req).repo, runId);
      return reply
        .type('application/zip')
        .header('Content-Disposition', `attachment; filename="run-${runId}-logs.zip"`)
        .send(body);
    },
  );
}

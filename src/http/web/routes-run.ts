// The run page: jobs, the selected job's steps and live log, attempts, and
// the run-control buttons (Forgejo: routers/web/repo/actions/view.go,
// web_src/js/components/RepoActionView.vue). Each button is shown only when
// the guard of its POST route lets this user through (`passes`), and that
// route runs the same guard again: the API's rules, asked twice, never copied.
//
// The live log is a cursor poll (Forgejo's model, once a second) of
// `…/attempt/{n}/log?offset=<bytes>&line=<lines>`: the answer holds the
// committed lines after `offset` (never a half-written one: the log's size
// is what the runner has been acknowledged), the new offset, and the
// steps' state read after the lines, so each line can be placed in its step.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isDone, statusName } from '../../modules/actions-status.ts';
import { AppError } from '../../modules/errors.ts';
import type { ActionRunJob } from '../../models/action-runs.ts';
import type { RerunSelection } from '../../services/actions/run-control.ts';
import { requireRepo } from '../request-context.ts';
import type { WebContext } from './context.ts';
import { param, passes, positiveInt, queryParam, reqSignIn } from './context.ts';
import { sendPage, seeOther } from './render.ts';
import { repoBase } from './routes-actions.ts';
import { runArtifactsPage } from './routes-run-artifacts.ts';
import { chromeOf, setFlash } from './session.ts';

/** The most log bytes one poll answers; the client asks again at once for the rest. */
const MAX_POLL_BYTES = 512 * 1024;

/** A stored line is `<RFC 3339 time with 7 digits> <content>` (task-logs.ts formatLogLine). */
function splitLogLine(line: string): { time: string; text: string } {
  const match = /^(\d{4,}-\d\d-\d\dT[0-9:.]+Z) /.exec(line);
  return match ? { time: match[1] as string, text: line.slice(match[0].length) } : { time: '', text: line };
}

async function readStream(stream: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return Buffer.concat(chunks);
}

export function runRoutes(app: FastifyInstance, ctx: WebContext): void {
  const { services, guards: g, cookies } = ctx;
  const readGuards = [g.repoAssignment, g.reqRepoReader('actions')];
  const writeGuard = g.reqRepoWriter('actions');
  const writeGuards = [reqSignIn, ...readGuards, writeGuard];
  const deleteGuards = [reqSignIn, ...readGuards, g.reqAdmin];

  const runOf = async (req: FastifyRequest) => {
    const { repo } = requireRepo(req);
    return services.runs.getByIndex(repo, positiveInt(param(req, 'index')));
  };

  /** The run's jobs in order and the one at `jobpos` (0-based, Forgejo's position), or 404. */
  const jobsOf = async (req: FastifyRequest, runId: number) => {
    const jobs = await services.jobs.listOfRun(requireRepo(req).repo, runId);
    const raw = param(req, 'jobpos');
    const pos = raw === '' ? 0 : positiveInt(raw);
    const job = jobs[pos];
    if (job === undefined) throw AppError.notFoundMessage(`the run has no job ${raw}`);
    return { jobs, job, pos };
  };

  const runUrl = (req: FastifyRequest, index: number) => `${repoBase(req)}/actions/runs/${index}`;

  // The run and job URLs lead to the job's latest attempt (Forgejo: 307).
  const toLatestAttempt = async (req: FastifyRequest, reply: FastifyReply) => {
    const { run } = await runOf(req);
    const { job, pos } = await jobsOf(req, run.id);
    return reply.redirect(`${runUrl(req, run.index)}/jobs/${pos}/attempt/${Math.max(1, job.attempt)}`, 307);
  };
  app.get('/:owner/:repo/actions/runs/:index', { preHandler: readGuards }, toLatestAttempt);
  app.get('/:owner/:repo/actions/runs/:index/jobs/:jobpos', { preHandler: readGuards }, toLatestAttempt);

  app.get(
    '/:owner/:repo/actions/runs/:index/jobs/:jobpos/attempt/:attempt',
    { preHandler: readGuards },
    async (req, reply) => {
      const { run, triggerUser } = await runOf(req);
      const { jobs, job, pos } = await jobsOf(req, run.id);
      const attempt = positiveInt(param(req, 'attempt'));
      if (attempt < 1 || attempt > Math.max(1, job.attempt)) throw AppError.notFoundMessage('no such attempt');
      const { task, steps } = await services.jobs.attempt(job, attempt);
      const signedIn = req.auth.doer !== null;
      const canWrite = signedIn && (await passes(writeGuard, req, reply));
      const canDelete = signedIn && (await passes(g.reqAdmin, req, reply));
      const runDone = isDone(run.status) && jobs.every((j) => isDone(j.status));
      const failed = (j: ActionRunJob) => statusName(j.status) === 'failure' || statusName(j.status) === 'cancelled';
      const base = `${runUrl(req, run.index)}/jobs/${pos}/attempt/${attempt}`;
      const artifacts = await runArtifactsPage(services, req, run.id, runUrl(req, run.index), base);
      return sendPage(reply, 'run', chromeOf(cookies, req, reply, `${run.title} · ${run.workflowId} #${run.index}`), {
        actionsUrl: `${repoBase(req)}/actions`,
        runUrl: runUrl(req, run.index),
        attemptUrl: base,
        run,
        triggerUser,
        jobs,
        job,
        pos,
        attempt,
        attempts: Array.from({ length: Math.max(1, job.attempt) }, (_, i) => Math.max(1, job.attempt) - i),
        task: task ?? null,
        steps,
        attemptDone: attempt < job.attempt || isDone(job.status),
        artifacts,
        canDeleteArtifacts: canWrite,
        buttons: {
          cancel: canWrite && !runDone,
          rerunAll: canWrite && runDone,
          rerunFailed: canWrite && runDone && jobs.some(failed),
          rerunJob: canWrite && runDone && isDone(job.status),
          delete: canDelete && runDone,
        },
      });
    },
  );

  app.get(
    '/:owner/:repo/actions/runs/:index/jobs/:jobpos/attempt/:attempt/log',
    { preHandler: readGuards },
    async (req, reply) => {
      const { repo } = requireRepo(req);
      const { run } = await runOf(req);
      const { job } = await jobsOf(req, run.id);
      const attempt = positiveInt(param(req, 'attempt'));
      const offset = Math.max(0, positiveInt(queryParam(req, 'offset')));
      let line = Math.max(0, positiveInt(queryParam(req, 'line')));
      const lines: Array<{ n: number; time: string; text: string }> = [];
      let next = offset;
      try {
        const log = await services.jobLogs.open(repo, job.id, attempt);
        if (log.size > offset) {
          const end = Math.min(log.size, offset + MAX_POLL_BYTES);
          const bytes = await readStream((await log.read(offset, end - 1)).stream());
          // Whole lines only: a cut poll ends at its last newline and the next poll goes on from there.
          const cut = end === log.size ? bytes.length : bytes.lastIndexOf(0x0a) + 1;
          for (const raw of bytes.subarray(0, cut).toString('utf8').split('\n')) {
            if (raw === '') continue;
            line += 1;
            lines.push({ n: line, ...splitLogLine(raw) });
          }
          next = offset + cut;
        }
      } catch (error) {
        if (!(error instanceof AppError) || error.kind !== 'not_found') throw error;
        // Not started yet (or the log expired): nothing to show at this offset.
        if (error.message === 'logs have expired' && offset === 0 && line === 0)
          lines.push({ n: 1, time: '', text: 'The logs of this job have expired.' });
      }
      // Read after the lines: the steps are at least as new as the log they place.
      const fresh = (await services.jobs.listOfRun(repo, run.id)).find((j) => j.id === job.id) ?? job;
      const { task, steps } = await services.jobs.attempt(fresh, attempt);
      const done = attempt < fresh.attempt || isDone(fresh.status);
      return reply.header('Cache-Control', 'no-store').send({
        offset: next,
        line,
        lines,
        more: next < (task?.logSize ?? 0),
        done,
        status: statusName(fresh.status),
        steps: steps.map((s) => ({
          name: s.name,
          status: statusName(s.status),
          logIndex: s.logIndex,
          logLength: s.logLength,
        })),
      });
    },
  );

  // The raw log (Forgejo: GET …/attempt/{n}/logs, an attachment).
  app.get(
    '/:owner/:repo/actions/runs/:index/jobs/:jobpos/attempt/:attempt/logs',
    { preHandler: readGuards },
    async (req, reply) => {
      const { repo } = requireRepo(req);
      const { run } = await runOf(req);
      const { job } = await jobsOf(req, run.id);
      const log = await services.jobLogs.open(repo, job.id, positiveInt(param(req, 'attempt')));
      const stream = (await log.read(0, log.size - 1)).stream();
      return reply
        .type('text/plain; charset=utf-8')
        .header('Content-Disposition', `attachment; filename="${log.filename}"`)
        .header('Content-Length', String(log.size))
        .send(stream);
    },
  );

  app.post('/:owner/:repo/actions/runs/:index/cancel', { preHandler: writeGuards }, async (req, reply) => {
    const { run } = await runOf(req);
    await services.runControl.cancel(requireRepo(req).repo, run.id);
    setFlash(reply, cookies, 'info', 'The run is being cancelled.');
    return seeOther(reply, runUrl(req, run.index));
  });

  const rerun = (selectionOf: (req: FastifyRequest, runId: number) => Promise<RerunSelection>) =>
    async function rerunHandler(req: FastifyRequest, reply: FastifyReply) {
      const { run } = await runOf(req);
      try {
        await services.runControl.rerun(requireRepo(req).repo, run.id, await selectionOf(req, run.id));
        setFlash(reply, cookies, 'info', 'A new attempt has started.');
      } catch (error) {
        // Refusals (still running, workflow disabled or invalid) are told on the run page.
        if (!(error instanceof AppError) || error.kind === 'not_found') throw error;
        setFlash(reply, cookies, 'error', error.message);
      }
      const pos = param(req, 'jobpos');
      return seeOther(reply, pos === '' ? runUrl(req, run.index) : `${runUrl(req, run.index)}/jobs/${pos}`);
    };
  app.post(
    '/:owner/:repo/actions/runs/:index/rerun',
    { preHandler: writeGuards },
    rerun(async () => ({ kind: 'all' })),
  );
  app.post(
    '/:owner/:repo/actions/runs/:index/rerun-failed',
    { preHandler: writeGuards },
    rerun(async () => ({ kind: 'failed' })),
  );
  app.post(
    '/:owner/:repo/actions/runs/:index/jobs/:jobpos/rerun',
    { preHandler: writeGuards },
    rerun(async (req, runId) => ({ kind: 'job', id: (await jobsOf(req, runId)).job.id })),
  );

  app.post('/:owner/:repo/actions/runs/:index/delete', { preHandler: deleteGuards }, async (req, reply) => {
    const { run } = await runOf(req);
    try {
      await services.runControl.deleteRun(requireRepo(req).repo, run.id);
    } catch (error) {
      if (!(error instanceof AppError) || error.kind === 'not_found') throw error;
      setFlash(reply, cookies, 'error', error.message);
      return seeOther(reply, runUrl(req, run.index));
    }
    setFlash(reply, cookies, 'info', `Run #${run.index} was deleted.`);
    return seeOther(reply, `${repoBase(req)}/actions`);
  });
}

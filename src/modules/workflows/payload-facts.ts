// What the server reads back from a job's workflow payload (the YAML a runner
// receives, expand-jobs.ts's buildPayload): its steps' names, for the task's
// step rows, and the workflow's `name:`, for the job's commit statuses. Both
// come from one parse, kept for later jobs with the same payload.
//
// Why a memo: the payload is parsed when a run's first job is claimed
// (runner-protocol.ts keeps the names for the run's other legs) and, for push
// runs, on every status change of every job (commit-status-writer.ts). Runs of
// one workflow carry the same payloads (a matrix leg's differs only by its
// leg's values), yet each parsed its own: in a PostgreSQL throughput profile
// (2026-11-28) the 20 runs of a swarm parsed the same payload 20 times, about
// 1.5 ms each, 1.9 % of `gantry web`'s busy samples.
//
// Guarantees: an answer is exactly what parsing the payload gives (the key is
// the whole payload string; nothing else is read). Bounded: at most
// MAX_ENTRIES payloads and MAX_CHARS of payload text are kept, the oldest
// forgotten first; a longer payload is parsed every time. Facts are frozen,
// since callers share them. Losing the memo (a restart) only costs parses.
import { parse as parseYaml } from 'yaml';

export interface PayloadFacts {
  /** Step names as Forgejo's jobparser gives them (Step.String), one per step of the payload's single job. */
  readonly stepNames: readonly string[];
  /** The workflow's `name:` (the payload keeps the workflow's header); null when it has none or does not parse. */
  readonly workflowName: string | null;
}

const MAX_ENTRIES = 256;
/** Payload text kept in all, in UTF-16 units: 1 Mi of them is 1–2 MiB of heap. */
const MAX_CHARS = 1 << 20;

const NOTHING: PayloadFacts = Object.freeze({ stepNames: Object.freeze([]), workflowName: null });

/** The facts of a payload, parsed now (no memo). */
export function parsePayloadFacts(workflowPayload: string): PayloadFacts {
  let doc: unknown;
  try {
    doc = parseYaml(workflowPayload);
  } catch {
    // A payload that does not parse has no steps, and names its run by its file (commit-status-writer.ts).
    return NOTHING;
  }
  const top = (typeof doc === 'object' && doc !== null ? doc : {}) as { name?: unknown; jobs?: unknown };
  const workflowName = typeof top.name === 'string' && top.name !== '' ? top.name : null;
  return Object.freeze({ stepNames: Object.freeze(stepNamesOfDocument(top.jobs)), workflowName });
}

/**
 * Step names as Forgejo's jobparser gives them (Step.String): the name, else
 * the action used, else the script, else the step id. One per step of the
 * payload's single job; none when the payload has no job or steps.
 */
function stepNamesOfDocument(jobs: unknown): string[] {
  if (typeof jobs !== 'object' || jobs === null) return [];
  const job = Object.values(jobs)[0] as { steps?: unknown } | undefined;
  if (!Array.isArray(job?.steps)) return [];
  return job.steps.map((step: unknown) => {
    const s = (typeof step === 'object' && step !== null ? step : {}) as Record<string, unknown>;
    for (const key of ['name', 'uses', 'run', 'id']) {
      const value = s[key];
      if (value !== undefined && value !== null && String(value) !== '') return String(value);
    }
    return '';
  });
}

/** A bounded memo of payload facts by payload text; see the header. */
export class PayloadFactsMemo {
  private readonly facts = new Map<string, PayloadFacts>();
  private chars = 0;

  constructor(
    private readonly maxEntries = MAX_ENTRIES,
    private readonly maxChars = MAX_CHARS,
  ) {}

  of(workflowPayload: string): PayloadFacts {
    const known = this.facts.get(workflowPayload);
    if (known !== undefined) return known;
    const facts = parsePayloadFacts(workflowPayload);
    if (workflowPayload.length > this.maxChars) return facts;
    this.facts.set(workflowPayload, facts);
    this.chars += workflowPayload.length;
    while (this.facts.size > this.maxEntries || this.chars > this.maxChars) {
      const oldest = this.facts.keys().next().value as string;
      this.facts.delete(oldest);
      this.chars -= oldest.length;
    }
    return facts;
  }

  /** How many payloads, and how much of their text, the memo holds. */
  get held(): { entries: number; chars: number } {
    return { entries: this.facts.size, chars: this.chars };
  }
}

const shared = new PayloadFactsMemo();

/** The payload's facts, from the process's memo. */
export function payloadFacts(workflowPayload: string): PayloadFacts {
  return shared.of(workflowPayload);
}

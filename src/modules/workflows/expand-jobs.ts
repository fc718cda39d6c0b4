// Expands a parsed workflow into the jobs of one run: one job per top-level job and matrix
// leg, each carrying the single-job workflow its runner executes. Follows Forgejo's jobparser
// (forgejo-runner act/jobparser/jobparser.go; matrix rules from act/model/workflow.go
// GetMatrixes), with the job-name rule of Gitea's jobparser (a literal name gets the suffix).

import { Document, isMap, isScalar, isSeq, Pair, YAMLMap } from 'yaml';
import type { ExpressionScope } from './expressions.ts';
import { containsExpression, readsContext } from './expressions.ts';
import type { ParsedWorkflow, WorkflowJobSpec, WorkflowSource } from './parse.ts';
import { rawJobConcurrency } from './job-concurrency.ts';
import type { LegConcurrency } from './job-concurrency.ts';
import { planningScope } from './planning-scope.ts';
import type { ExpansionContext } from './planning-scope.ts';

/**
 * Bounds on one run, checked while it is planned so that nothing big is built first: legs
 * are counted before any payload is written, and a job's payloads are weighed before they
 * are rendered (see expandJobs).
 */
export interface ExpansionLimits {
  /** Most jobs of one run, each matrix leg counted. */
  maxJobs: number;
  /** Most bytes of workflow payload (UTF-8) all jobs of one run may carry together. */
  maxPayloadBytes: number;
}

/** Which limit a workflow went over; the caller words the message (it knows the settings). */
export interface LimitExceeded {
  limit: 'jobs' | 'payload-bytes';
  max: number;
}

export interface Expansion {
  jobs: ExpandedJob[];
  errors: string[];
  /** Set when the run would exceed a limit: then `jobs` and `errors` are empty. */
  exceeded?: LimitExceeded;
}

const NO_LIMITS: ExpansionLimits = { maxJobs: Infinity, maxPayloadBytes: Infinity };

export interface ExpandedJob {
  /** YAML key of the job. */
  jobId: string;
  /** Display name, at most 255 bytes (Forgejo's column). */
  name: string;
  needs: string[];
  /** Evaluated runner labels; [] for a job that calls a reusable workflow. */
  runsOn: string[];
  hasIf: boolean;
  /** YAML of a workflow holding only this job and leg, as the runner receives it. */
  workflowPayload: string;
  /** The job's `concurrency:` as written, with the leg's matrix (job-concurrency.ts); absent when none. */
  concurrency?: LegConcurrency;
}

/** The reason one job cannot be planned; reported, never thrown out of expandJobs. */
class PlanError extends Error {}

/** The run as a whole is over a limit: planning stops at once. Never thrown out of expandJobs. */
class OverLimit extends Error {
  constructor(readonly exceeded: LimitExceeded) {
    super(`more than ${exceeded.max} ${exceeded.limit}`);
  }
}

type Leg = Record<string, unknown>;

interface NamedLeg {
  values: Leg;
  /** `(v1, v2)`: values in key order, as Go's fmt prints them. */
  label: string;
}

const MAX_JOB_NAME_BYTES = 255;
// GitHub's limit; it also stops a matrix of many long axes from exhausting memory.
const MAX_MATRIX_LEGS = 256;
// What Gitea/Forgejo keep of the workflow in each job's payload (SingleWorkflow header).
const PAYLOAD_HEADER_KEYS: ReadonlySet<string> = new Set([
  'name',
  'run-name',
  'on',
  'env',
  'defaults',
  'permissions',
  'concurrency',
]);
// New strings are double-quoted so that the runner's YAML 1.1-leaning Go parser cannot read
// a label such as `on` or `014` as anything but a string.
const PAYLOAD_FORMAT = { lineWidth: 0, defaultStringType: 'QUOTE_DOUBLE', defaultKeyType: 'PLAIN' } as const;

function keyText(node: unknown): string | undefined {
  return isScalar(node) && node.value != null ? String(node.value) : undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Sets own properties only, so that a key named `__proto__` stays data. */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function copyRecord(source: Record<string, unknown>): Record<string, unknown> {
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(source)) setOwn(copy, key, value);
  return copy;
}

/** Go compares strings byte-wise (UTF-8), which JavaScript's `<` does not. */
function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, i) => deepEqual(item, b[i]));
  }
  if (isRecord(a) && isRecord(b)) {
    const keys = Object.keys(a);
    return (
      keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && deepEqual(a[key], b[key]))
    );
  }
  return false;
}

function someScalar(node: unknown, test: (text: string) => boolean): boolean {
  if (isMap(node)) return node.items.some((pair) => someScalar(pair.value, test));
  if (isSeq(node)) return node.items.some((item) => someScalar(item, test));
  return isScalar(node) && typeof node.value === 'string' && test(node.value);
}

/** The node as plain data, every `${{ }}` string evaluated (a lone expression keeps its type). */
function evaluateNode(node: unknown, scope: ExpressionScope): unknown {
  if (isMap(node)) {
    const result: Record<string, unknown> = {};
    for (const pair of node.items) setOwn(result, keyText(pair.key) ?? '', evaluateNode(pair.value, scope));
    return result;
  }
  if (isSeq(node)) return node.items.map((item) => evaluateNode(item, scope));
  if (isScalar(node)) return typeof node.value === 'string' ? scope.evaluate(node.value) : (node.value ?? null);
  return null;
}

// --- matrix -------------------------------------------------------------------------------

/** Go's fmt.Sprint of a float64 (%v): shortest digits, exponent below 1e-4 and from 1e21. */
function formatGoNumber(value: number): string {
  if (!Number.isFinite(value)) return Number.isNaN(value) ? 'NaN' : value > 0 ? '+Inf' : '-Inf';
  const magnitude = Math.abs(value);
  if (magnitude === 0 || (magnitude >= 1e-4 && magnitude < 1e21)) return String(value);
  const [mantissa = '', exponent = ''] = value.toExponential().split('e');
  const sign = exponent.startsWith('-') ? '-' : '+';
  return `${mantissa}e${sign}${exponent.replace(/^[+-]/, '').padStart(2, '0')}`;
}

/** fmt.Sprint as jobparser applies it to a decoded YAML value: `[a b]`, `map[k:v]`, `<nil>`. */
function formatGoValue(value: unknown): string {
  if (value === null || value === undefined) return '<nil>';
  if (typeof value === 'string') return value;
  if (typeof value === 'number') return formatGoNumber(value);
  if (Array.isArray(value)) return `[${value.map(formatGoValue).join(' ')}]`;
  if (isRecord(value)) {
    const entries = Object.keys(value)
      .sort(compareBytes)
      .map((key) => `${key}:${formatGoValue(value[key])}`);
    return `map[${entries.join(' ')}]`;
  }
  return String(value);
}

function legLabel(leg: Leg): string {
  return `(${Object.keys(leg)
    .sort(compareBytes)
    .map((key) => formatGoValue(leg[key]))
    .join(', ')})`;
}

function matrixEntries(value: unknown, section: 'include' | 'exclude'): Leg[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new PlanError(`matrix ${section} must be a list of mappings`);
  // act also accepts a list nested one level deep
  return value.flat().map((entry) => {
    if (!isRecord(entry)) throw new PlanError(`matrix ${section} must be a list of mappings`);
    return entry;
  });
}

function cartesianProduct(axes: ReadonlyMap<string, unknown[]>): Leg[] {
  let legs: Leg[] = [{}];
  for (const [key, values] of axes) {
    legs = legs.flatMap((leg) =>
      values.map((value) => {
        const next = copyRecord(leg);
        setOwn(next, key, value);
        return next;
      }),
    );
  }
  return legs;
}

/** Every key the two share has equal values (act's commonKeysMatch). */
function agreesOnSharedKeys(leg: Leg, entry: Leg): boolean {
  return Object.keys(leg).every((key) => !Object.hasOwn(entry, key) || deepEqual(leg[key], entry[key]));
}

/** Every original axis the two share has equal values (act's commonKeysMatch2). */
function agreesOnAxes(leg: Leg, entry: Leg, axes: ReadonlyMap<string, unknown[]>): boolean {
  return Object.keys(leg).every(
    (key) => !axes.has(key) || !Object.hasOwn(entry, key) || deepEqual(leg[key], entry[key]),
  );
}

/**
 * act's GetMatrixes: the product of the axes less the excluded legs; an include that agrees
 * with legs on their axes is merged into all of them, any other include becomes a leg of its
 * own. Legs are then ordered by their label, as jobparser sorts them.
 */
function combineMatrix(matrix: Record<string, unknown>): NamedLeg[] {
  const axes = new Map<string, unknown[]>();
  for (const [key, values] of Object.entries(matrix)) {
    if (key === 'include' || key === 'exclude') continue;
    if (!Array.isArray(values)) throw new PlanError(`matrix key "${key}" must be a list`);
    axes.set(key, values);
  }
  const includes = matrixEntries(matrix.include, 'include');
  const excludes = matrixEntries(matrix.exclude, 'exclude');
  for (const exclude of excludes) {
    for (const key of Object.keys(exclude)) {
      if (!axes.has(key)) throw new PlanError(`matrix exclude key "${key}" does not match any key within the matrix`);
    }
  }
  const productSize = [...axes.values()].reduce((size, values) => size * values.length, 1);
  if (productSize > MAX_MATRIX_LEGS)
    throw new PlanError(`matrix has ${productSize} combinations, more than ${MAX_MATRIX_LEGS}`);

  const legs =
    axes.size === 0 ? [] : cartesianProduct(axes).filter((leg) => !excludes.some((ex) => agreesOnSharedKeys(leg, ex)));
  const standalone: Leg[] = [];
  const unmatched: Leg[] = [];
  for (const include of includes) {
    if (!Object.keys(include).some((key) => axes.has(key))) {
      standalone.push(copyRecord(include));
      continue;
    }
    let matched = false;
    for (const leg of legs) {
      if (!agreesOnAxes(leg, include, axes)) continue;
      matched = true;
      for (const [key, value] of Object.entries(include)) setOwn(leg, key, value);
    }
    if (!matched) unmatched.push(copyRecord(include));
  }
  legs.push(...standalone, ...unmatched);
  if (legs.length === 0) legs.push({});
  if (legs.length > MAX_MATRIX_LEGS)
    throw new PlanError(`matrix has ${legs.length} combinations, more than ${MAX_MATRIX_LEGS}`);
  return legs.map((values) => ({ values, label: legLabel(values) })).sort((a, b) => compareBytes(a.label, b.label));
}

function matrixLegs(job: YAMLMap, scope: ExpressionScope): NamedLeg[] {
  const strategy = job.get('strategy', true);
  const matrixNode = isMap(strategy) ? strategy.get('matrix', true) : undefined;
  if (matrixNode === undefined || matrixNode === null) return [{ values: {}, label: '()' }];
  if (someScalar(matrixNode, (text) => readsContext(text, 'needs'))) {
    throw new PlanError('strategy.matrix reads needs outputs, which are not known when the run is created');
  }
  const matrix = evaluateNode(matrixNode, scope);
  if (!isRecord(matrix)) throw new PlanError('strategy.matrix must be a mapping');
  return combineMatrix(matrix);
}

// --- name and runs-on ---------------------------------------------------------------------

/**
 * jobparser's rule: no name → the job id; a literal name in a matrix gets the leg label;
 * a name with an expression is interpolated. One that cannot be evaluated yet (e.g. it
 * reads `needs`) stays as written, for the runner to render.
 */
function renderJobName(jobId: string, rawName: string | undefined, leg: NamedLeg, scope: ExpressionScope): string {
  const name = rawName ?? '';
  if (!containsExpression(name) || !name.includes('}}')) {
    const base = name === '' ? jobId : name;
    return Object.keys(leg.values).length > 0 ? `${base} ${leg.label}` : base;
  }
  try {
    return scope.interpolate(name) || jobId;
  } catch {
    return name;
  }
}

/** Forgejo's util.SplitStringAtByteN(name, 255): cut on a character boundary, end with '…'. */
function truncateJobName(name: string): string {
  if (Buffer.byteLength(name) <= MAX_JOB_NAME_BYTES) return name;
  const room = MAX_JOB_NAME_BYTES - Buffer.byteLength('…');
  let bytes = 0;
  let end = 0;
  for (const character of name) {
    const size = Buffer.byteLength(character);
    if (bytes + size > room) break;
    bytes += size;
    end += character.length;
  }
  return `${name.slice(0, end)}…`;
}

/** act's FlattenRunsOnNode: a label, a list of labels, or `{ group, labels }` (group last). */
function labelsOf(value: unknown): string[] {
  if (value === null || value === undefined) return [];
  if (Array.isArray(value)) return value.flatMap(labelsOf);
  if (isRecord(value)) return [...labelsOf(value.labels), ...labelsOf(value.group)];
  return [String(value)];
}

function evaluateRunsOn(job: YAMLMap, scope: ExpressionScope): string[] {
  const node = job.get('runs-on', true);
  if (node === undefined || node === null) return [];
  if (someScalar(node, (text) => readsContext(text, 'needs'))) {
    throw new PlanError('runs-on reads needs outputs, which are not known when the run is created');
  }
  // An empty label could never match a runner; it usually is a variable that is not set.
  const labels = labelsOf(evaluateNode(node, scope)).filter((label) => label !== '');
  if (labels.length === 0) throw new PlanError('runs-on evaluates to no runner label');
  return labels;
}

// --- payload ------------------------------------------------------------------------------

// Keys that differ from leg to leg; the rest of a job is the same in all of its payloads.
const PER_LEG_KEYS: ReadonlySet<string> = new Set(['name', 'needs', 'runs-on', 'strategy']);

// Rendered once per cached workflow: writing the same steps out for every leg of every run
// would dominate the cost of planning a run. Keyed by the (never modified) parsed nodes.
const renderedHeaders = new WeakMap<YAMLMap, string>();
const renderedJobBodies = new WeakMap<YAMLMap, string>();

function renderMapping(pairs: unknown[]): string {
  if (pairs.length === 0) return '';
  const doc = new Document();
  const map = new YAMLMap();
  map.items.push(...(pairs as Pair[]));
  doc.contents = map;
  return doc.toString(PAYLOAD_FORMAT);
}

/** Shifts block YAML right; empty lines stay empty so that block scalars keep their text. */
function indentLines(text: string, spaces: number): string {
  const pad = ' '.repeat(spaces);
  return text
    .split('\n')
    .map((line) => (line === '' ? line : pad + line))
    .join('\n');
}

function headerPairs(root: YAMLMap): unknown[] {
  return root.items.filter((pair) => PAYLOAD_HEADER_KEYS.has(keyText(pair.key) ?? ''));
}

/** The job's own keys other than the per-leg ones: the same in every leg's payload. */
function jobBodyPairs(job: YAMLMap): unknown[] {
  return job.items.filter((pair) => !PER_LEG_KEYS.has(keyText(pair.key) ?? ''));
}

function headerText(root: YAMLMap): string {
  let text = renderedHeaders.get(root);
  if (text === undefined) {
    text = renderMapping(headerPairs(root));
    renderedHeaders.set(root, text);
  }
  return text;
}

/** The job body at the indentation of a job's keys. */
function jobBodyText(job: YAMLMap): string {
  let text = renderedJobBodies.get(job);
  if (text === undefined) {
    text = indentLines(renderMapping(jobBodyPairs(job)), 4);
    renderedJobBodies.set(job, text);
  }
  return text;
}

// Per node, as nodes are shared: parse.ts resolves each alias to its anchored node.
const textSizes = new WeakMap<object, number>();

/**
 * The characters of every key and scalar under `node`, a shared node counted each time it
 * is reached. Rendered YAML holds at least that text (UTF-8 never has fewer bytes than
 * UTF-16 units), so this is a floor of the payload's size, found without rendering it: a
 * few aliases can make a payload of gigabytes out of a small file. Each distinct node is
 * visited once.
 */
function textSize(node: unknown): number {
  if (isScalar(node)) return node.value == null ? 0 : String(node.value).length;
  if (node instanceof Pair) return textSize(node.key) + textSize(node.value);
  if (!isMap(node) && !isSeq(node)) return 0;
  let size = textSizes.get(node);
  if (size === undefined) {
    size = 0;
    for (const item of node.items) size += textSize(item);
    textSizes.set(node, size);
  }
  return size;
}

function pairsTextSize(pairs: readonly unknown[]): number {
  return pairs.reduce<number>((sum, pair) => sum + textSize(pair), 0);
}

function strategyForLeg(strategy: unknown, leg: Leg, doc: Document): unknown {
  if (!isMap(strategy) || !strategy.has('matrix')) return strategy;
  const reduced = new YAMLMap();
  for (const pair of strategy.items) if (keyText(pair.key) !== 'matrix') reduced.items.push(pair);
  if (Object.keys(leg).length > 0) {
    // Each value as a one-element list, so that the runner's own expansion yields this leg alone.
    const matrix: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(leg)) setOwn(matrix, key, [value]);
    reduced.items.push(doc.createPair('matrix', matrix));
  }
  return reduced.items.length > 0 ? reduced : undefined;
}

/**
 * The workflow cut down to this job: header kept, `needs` erased (the runner would look for
 * those jobs), matrix reduced to the leg, runs-on and name evaluated. The per-leg keys are
 * written as `jobs: {id: {…}}`, ending the document at the job's indentation, so the
 * pre-rendered rest of the job continues that mapping.
 */
function buildPayload(
  source: WorkflowSource,
  jobId: string,
  job: YAMLMap,
  leg: Leg,
  name: string,
  runsOn: string[],
): string {
  const doc = new Document();
  const perLeg = new YAMLMap();
  perLeg.items.push(doc.createPair('name', name));
  if (job.has('runs-on')) perLeg.items.push(doc.createPair('runs-on', runsOn.length === 1 ? runsOn[0] : runsOn));
  const strategy = strategyForLeg(job.get('strategy', true), leg, doc);
  if (strategy !== undefined && strategy !== null) perLeg.items.push(new Pair(doc.createNode('strategy'), strategy));
  const jobs = new YAMLMap();
  jobs.items.push(doc.createPair(jobId, perLeg));
  const root = new YAMLMap();
  root.items.push(doc.createPair('jobs', jobs));
  doc.contents = root;
  return headerText(source.root) + doc.toString(PAYLOAD_FORMAT) + jobBodyText(job);
}

// --- entry points -------------------------------------------------------------------------

interface PlannedJob {
  spec: WorkflowJobSpec;
  job: YAMLMap;
  legs: NamedLeg[];
}

/** Renders the job's legs, handing each payload's size to `charge` as soon as it exists. */
function expandJob(
  source: WorkflowSource,
  plan: PlannedJob,
  scope: ExpressionScope,
  charge: (bytes: number) => void,
): ExpandedJob[] {
  const { spec, job, legs } = plan;
  const rawName = keyText(job.get('name', true));
  const expanded: ExpandedJob[] = [];
  for (const [index, leg] of legs.entries()) {
    const legScope = scope.extend({ matrix: leg.values, strategy: { 'job-index': index, 'job-total': legs.length } });
    const name = renderJobName(spec.id, rawName, leg, legScope);
    const runsOn = evaluateRunsOn(job, legScope);
    const workflowPayload = buildPayload(source, spec.id, job, leg.values, name, runsOn);
    charge(Buffer.byteLength(workflowPayload));
    const concurrency = rawJobConcurrency(job.get('concurrency', true));
    expanded.push({
      jobId: spec.id,
      name: truncateJobName(name),
      needs: [...spec.needs],
      runsOn,
      hasIf: spec.hasIf,
      workflowPayload,
      ...(concurrency !== undefined
        ? {
            concurrency: {
              ...concurrency,
              matrix: leg.values,
              strategy: { 'job-index': index, 'job-total': legs.length },
            },
          }
        : {}),
    });
  }
  return expanded;
}

function jobError(spec: WorkflowJobSpec, error: unknown): string {
  return `job "${spec.id}": ${error instanceof Error ? error.message : String(error)}`;
}

/**
 * The jobs of one run, in file order and legs in jobparser's order. A job that cannot be
 * planned is left out and named in `errors`; callers should then fail the run as a whole.
 *
 * Limits are checked before the work they bound. First every job's legs are listed and
 * counted (at most one job's legs, MAX_MATRIX_LEGS small values, are made beyond
 * `maxJobs`); no payload exists yet. Then, before a job's payloads are rendered, their
 * floor (textSize) is weighed against what is left of `maxPayloadBytes`, and each payload
 * is counted as it is made. Over a limit, planning stops and `exceeded` says which.
 */
export function expandJobs(
  parsed: ParsedWorkflow,
  ctx: ExpansionContext,
  limits: ExpansionLimits = NO_LIMITS,
): Expansion {
  if (parsed.errors.length > 0) return { jobs: [], errors: [...parsed.errors] };
  const source = parsed.source;
  if (!source) return { jobs: [], errors: ['the workflow could not be read'] };
  const scope = planningScope(parsed, ctx);
  const errors: string[] = [];

  const planned: PlannedJob[] = [];
  let legCount = 0;
  for (const spec of parsed.jobs) {
    const job = source.jobNodes.get(spec.id);
    if (!job) continue;
    let legs: NamedLeg[];
    try {
      legs = matrixLegs(job, scope);
    } catch (error) {
      errors.push(jobError(spec, error));
      continue;
    }
    legCount += legs.length;
    if (legCount > limits.maxJobs) return { jobs: [], errors, exceeded: { limit: 'jobs', max: limits.maxJobs } };
    planned.push({ spec, job, legs });
  }

  let payloadBytes = 0;
  const payloadLimit = new OverLimit({ limit: 'payload-bytes', max: limits.maxPayloadBytes });
  const charge = (bytes: number): void => {
    payloadBytes += bytes;
    if (payloadBytes > limits.maxPayloadBytes) throw payloadLimit;
  };
  const headerFloor = pairsTextSize(headerPairs(source.root));
  const jobs: ExpandedJob[] = [];
  try {
    for (const plan of planned) {
      const floor = (headerFloor + pairsTextSize(jobBodyPairs(plan.job))) * plan.legs.length;
      if (payloadBytes + floor > limits.maxPayloadBytes) throw payloadLimit;
      try {
        jobs.push(...expandJob(source, plan, scope, charge));
      } catch (error) {
        if (error instanceof OverLimit) throw error;
        errors.push(jobError(plan.spec, error));
      }
    }
  } catch (error) {
    if (error instanceof OverLimit) return { jobs: [], errors, exceeded: error.exceeded };
    throw error;
  }
  return { jobs, errors };
}

/** The evaluated `run-name`, or undefined when there is none, it fails or it comes out blank. */
export function evaluateRunTitle(parsed: ParsedWorkflow, ctx: ExpansionContext): string | undefined {
  if (parsed.runName === undefined) return undefined;
  try {
    const title = planningScope(parsed, ctx).interpolate(parsed.runName);
    return title.trim() === '' ? undefined : title;
  } catch {
    return undefined;
  }
}

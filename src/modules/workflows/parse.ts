// Reads a workflow file once: validates it against the workflow schema of
// @actions/workflow-parser, normalises `on:` and lists the jobs. The YAML document is kept
// (aliases resolved) so that expandJobs can build each job's payload without reading the file
// again: results are cached by blob id and expanded for every run.

import { isMapping, NoOperationTraceWriter, parseWorkflow as parseWorkflowTemplate } from '@actions/workflow-parser';
import type { EventsConfig } from '@actions/workflow-parser/model/workflow-template';
import { convertConcurrency } from '@actions/workflow-parser/model/converter/concurrency';
import { convertOn } from '@actions/workflow-parser/model/converter/events';
import { convertJobs } from '@actions/workflow-parser/model/converter/jobs';
import type { TemplateContext } from '@actions/workflow-parser/templates/template-context';
import type { TemplateToken } from '@actions/workflow-parser/templates/tokens/template-token';
import { isAlias, isMap, isScalar, isSeq, parseDocument } from 'yaml';
import { filterPatternProblem } from './patterns.ts';
import type { Document, Node as YamlNode, YAMLMap } from 'yaml';

export type { EventsConfig };

export interface WorkflowJobSpec {
  id: string;
  needs: string[];
  hasIf: boolean;
}

/** The parsed file, read-only: expandJobs shares its nodes between payloads. */
export interface WorkflowSource {
  readonly root: YAMLMap;
  readonly jobNodes: ReadonlyMap<string, YAMLMap>;
}

export interface ParsedWorkflow {
  /** Literal workflow `name:`, if present. */
  name?: string;
  /** Raw `run-name:` text (may contain `${{ }}`). */
  runName?: string;
  /**
   * Normalised `on:` as the parser's converter gives it (`on: push` → `{ push: {} }`);
   * {} when the YAML could not be read. Best effort when `errors` is non-empty.
   */
  events: EventsConfig;
  /** Top-level jobs in file order. */
  jobs: WorkflowJobSpec[];
  /** Non-empty means the workflow is invalid and no job may be created. */
  errors: string[];
  /** Present only when `errors` is empty. */
  source?: WorkflowSource;
}

// An alias stands for its anchor's whole subtree, so a few nested aliases can ask for
// billions of nodes; real workflows have a few thousand.
const MAX_EXPANDED_NODES = 200_000;
// The same for text: a thousand aliases of a 10 KB string are 10 MB to the workflow parser
// (5 s of CPU; ten thousand took 5 minutes) and to every job payload. Real workflows share
// step lists and env between jobs: far less than four 1 MiB files (the default file cap).
const MAX_EXPANDED_CHARS = 4 * 1024 * 1024;

/** The yaml library's messages end with a code frame; the first line already names the place. */
function firstLine(message: string): string {
  return message.split('\n', 1)[0]?.trim() ?? message;
}

function scalarText(node: unknown): string | undefined {
  if (!isScalar(node) || node.value == null) return undefined;
  return String(node.value);
}

function readNeeds(node: unknown): string[] {
  if (isSeq(node)) return node.items.map(scalarText).filter((need): need is string => need !== undefined);
  const single = scalarText(node);
  return single === undefined ? [] : [single];
}

function listJobs(jobNodes: ReadonlyMap<string, YAMLMap>): WorkflowJobSpec[] {
  return [...jobNodes].map(([id, job]) => ({
    id,
    needs: readNeeds(job.get('needs', true)),
    hasIf: job.has('if') && job.get('if') != null && job.get('if') !== '',
  }));
}

function collectJobNodes(root: YAMLMap | undefined): Map<string, YAMLMap> {
  const jobNodes = new Map<string, YAMLMap>();
  const jobs = root?.get('jobs', true);
  if (!isMap(jobs)) return jobNodes;
  for (const pair of jobs.items) {
    const id = scalarText(pair.key);
    if (id !== undefined && isMap(pair.value) && !jobNodes.has(id)) jobNodes.set(id, pair.value);
  }
  return jobNodes;
}

/**
 * Replaces every alias with its anchored node and drops the anchors, so that one job's
 * subtree can be written out alone (Gitea's jobparser also resolves aliases before it splits
 * a workflow). The node is shared rather than copied: the document is never modified after
 * this. Throws for an alias inside its own anchor and for a document that would grow beyond
 * the limits (nodes, text), both of which the workflow parser would follow without end.
 * Returns how many aliases were replaced.
 */
function resolveAliases(doc: Document.Parsed): number {
  let aliases = 0;
  let size = 0;
  let chars = 0;
  // YAML: an alias names the closest anchor before it; anchor names may be reused.
  const anchors = new Map<string, YamlNode>();
  const sizes = new WeakMap<YamlNode, { nodes: number; chars: number }>();
  const open = new Set<YamlNode>();
  const grow = (nodes: number, text: number): void => {
    size += nodes;
    chars += text;
    if (size > MAX_EXPANDED_NODES)
      throw new Error(`more than ${MAX_EXPANDED_NODES} YAML nodes once aliases are expanded`);
    if (chars > MAX_EXPANDED_CHARS)
      throw new Error(`more than ${MAX_EXPANDED_CHARS} characters of YAML text once aliases are expanded`);
  };
  const walk = (node: unknown): unknown => {
    if (isAlias(node)) {
      const target = anchors.get(node.source);
      if (target === undefined) return node;
      if (open.has(target)) throw new Error(`YAML alias *${node.source} is inside its own anchor`);
      const grown = sizes.get(target);
      grow(grown?.nodes ?? 1, grown?.chars ?? 0);
      aliases += 1;
      return target;
    }
    if (!isMap(node) && !isSeq(node) && !isScalar(node)) return node;
    const sizeBefore = size;
    const charsBefore = chars;
    grow(1, isScalar(node) && node.value != null ? String(node.value).length : 0);
    if (node.anchor) anchors.set(node.anchor, node);
    delete node.anchor;
    open.add(node);
    if (isMap(node)) {
      for (const pair of node.items) {
        pair.key = walk(pair.key);
        pair.value = walk(pair.value);
      }
    } else if (isSeq(node)) {
      node.items = node.items.map(walk);
    }
    open.delete(node);
    sizes.set(node, { nodes: size - sizeBefore, chars: chars - charsBefore });
    return node;
  };
  doc.contents = walk(doc.contents) as typeof doc.contents;
  return aliases;
}

interface Conversion {
  events: EventsConfig;
  errors: string[];
}

/**
 * The synchronous part of convertWorkflowTemplate (which is async only to fetch reusable
 * workflows, which we never do): `on`, `jobs` (needs: unknown jobs, cycles) and `concurrency`.
 */
function convertTemplate(context: TemplateContext, root: TemplateToken): Conversion {
  let events: EventsConfig = {};
  if (!isMapping(root)) {
    context.error(root, 'a workflow must be a mapping');
  } else {
    for (const item of root) {
      // Each converter may throw on a malformed token; one bad section should not hide the others.
      try {
        const key = item.key.assertString('root key').value;
        if (key === 'on') events = convertOn(context, item.value);
        else if (key === 'jobs') convertJobs(context, item.value);
        else if (key === 'concurrency') convertConcurrency(context, item.value);
      } catch (error) {
        context.error(item.value, error);
      }
    }
  }
  const errors = context.errors
    .getErrors()
    .map((error) => firstLine(error.message))
    .filter((message) => !message.endsWith(GITHUB_CRON_ERROR));
  return { events, errors };
}

/**
 * The parser checks `cron:` against GitHub's dialect, which has no `TZ=`,
 * `@every` or descriptors. Forgejo reads schedules with its own dialect
 * (modules/cron-spec.ts) and a spec it rejects costs that schedule only, not
 * the workflow's other triggers: the entry is kept here, unchecked, and the
 * schedule registration reports it (services/actions/schedules.ts).
 */
const GITHUB_CRON_ERROR = "Invalid cron expression. Expected format: '* * * * *' (minute hour day month weekday)";

const FILTER_KEYS = ['branches', 'branches-ignore', 'tags', 'tags-ignore', 'paths', 'paths-ignore'] as const;

/**
 * Filter patterns over Gantry's limits (patterns.ts filterPatternProblem), as
 * parse errors. Checked here, once per file, so matching never sees them.
 */
function oversizedFilterPatterns(fileName: string, events: EventsConfig): string[] {
  const errors: string[] = [];
  for (const [event, config] of Object.entries(events)) {
    if (typeof config !== 'object' || config === null) continue;
    for (const key of FILTER_KEYS) {
      const list: unknown = (config as Record<string, unknown>)[key];
      if (!Array.isArray(list)) continue;
      list.forEach((pattern, index) => {
        const problem = typeof pattern === 'string' ? filterPatternProblem(pattern) : null;
        if (problem !== null) errors.push(`${fileName}: on.${event}.${key}[${index}]: pattern ${problem}`);
      });
    }
  }
  return errors;
}

function failed(fileName: string, error: unknown): ParsedWorkflow {
  const reason =
    error instanceof RangeError ? 'nested too deeply' : error instanceof Error ? error.message : String(error);
  return { events: {}, jobs: [], errors: [`${fileName}: ${reason}`] };
}

function readWorkflow(fileName: string, content: string): ParsedWorkflow {
  // The template tokens drop YAML formatting (3.10 would become 3.1), so payloads are cut
  // from the document itself. uniqueKeys matches the parser, which reports duplicates itself.
  // Aliases are expanded first, with limits, because the parser would expand them without.
  const doc = parseDocument(content, { uniqueKeys: false });
  const aliases = doc.errors.length === 0 ? resolveAliases(doc) : 0;
  // The parser looks each alias up by walking the whole document: 5,000 aliases in an 80 KB
  // file took it 73 s. It reads the document written out without them instead, whose size
  // the limits above bound; its line numbers would then point into that text, so they go.
  const parserInput = aliases > 0 ? doc.toString({ lineWidth: 0 }) : content;
  const located = (message: string): string =>
    aliases > 0 ? message.replace(/ \(Line: \d+, Col: \d+\)/g, '') : message;

  const template = parseWorkflowTemplate({ name: fileName, content: parserInput }, new NoOperationTraceWriter());
  if (!template.value) {
    const errors = template.context.errors.getErrors().map((error) => located(firstLine(error.message)));
    return { events: {}, jobs: [], errors: errors.length > 0 ? errors : [`${fileName}: not a workflow`] };
  }
  const converted = convertTemplate(template.context, template.value);
  const errors = converted.errors.map(located);
  const oversized = oversizedFilterPatterns(fileName, converted.events);
  errors.push(...oversized);
  // An `on:` we refuse to evaluate selects nothing trustworthy: dropped, so the
  // workflow is treated as unreadable and a push gets one failed run saying why.
  const events = oversized.length > 0 ? {} : converted.events;

  const root = isMap(doc.contents) ? doc.contents : undefined;
  const jobNodes = collectJobNodes(root);
  const parsed: ParsedWorkflow = { events, jobs: listJobs(jobNodes), errors };
  const name = scalarText(root?.get('name', true));
  if (name !== undefined) parsed.name = name;
  const runName = scalarText(root?.get('run-name', true));
  if (runName !== undefined) parsed.runName = runName;
  if (errors.length === 0 && root) parsed.source = { root, jobNodes };
  return parsed;
}

/** Never throws: whatever is wrong with the file ends up in `errors`. */
export function parseWorkflow(fileName: string, content: string): ParsedWorkflow {
  try {
    return readWorkflow(fileName, content);
  } catch (error) {
    return failed(fileName, error);
  }
}

/**
 * Each job's `runs-on` labels as written, for the runs page's warning about
 * labels no online runner has (Forgejo: routers/web/repo/actions/actions.go
 * List). A job whose `runs-on` is an expression (matrix, inputs) or a
 * `group:`/`labels:` mapping is left out: its labels are known only per run.
 */
export function literalRunsOn(parsed: ParsedWorkflow): Array<{ job: string; labels: string[] }> {
  const out: Array<{ job: string; labels: string[] }> = [];
  for (const [job, node] of parsed.source?.jobNodes ?? []) {
    const runsOn: unknown = node.get('runs-on', true);
    const labels = isSeq(runsOn) ? runsOn.items.map(scalarText) : [scalarText(runsOn)];
    if (labels.length === 0 || labels.some((label) => label === undefined || containsExpressionText(label))) continue;
    out.push({ job, labels: labels as string[] });
  }
  return out;
}

function containsExpressionText(text: string | undefined): boolean {
  return text !== undefined && text.includes('${{');
}

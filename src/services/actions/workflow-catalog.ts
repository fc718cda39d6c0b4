// The workflow files of a commit, parsed. Reading goes through the long-lived
// cat-file processes; parsing is cached by blob id, so a workflow file that did
// not change between pushes (or across a thousand dispatches) is parsed once.
import { listWorkflowFiles } from '../../modules/git/workflow-files.ts';
import type { RepositoryReader } from '../../modules/git/repository-reader.ts';
import { parseWorkflow } from '../../modules/workflows/parse.ts';
import type { ParsedWorkflow } from '../../modules/workflows/parse.ts';

export interface WorkflowFile {
  /** The workflows directory used at this commit, e.g. `.forgejo/workflows`. */
  dir: string;
  /** Path relative to `dir` (`ci.yml`, `sub/x.yml`): the run's `workflow_id`. */
  name: string;
  blobOid: string;
  parsed: ParsedWorkflow;
}

const DEFAULT_CACHE_ENTRIES = 1000;

export class WorkflowCatalog {
  // Map iteration order is insertion order: re-inserting on a hit makes the
  // first key the least recently used one.
  private readonly parsed = new Map<string, ParsedWorkflow>();

  constructor(private readonly maxEntries = DEFAULT_CACHE_ENTRIES) {}

  /** Every workflow of the commit, or [] when it has no workflows directory. */
  async workflowsAt(reader: RepositoryReader, commitOid: string): Promise<WorkflowFile[]> {
    const listing = await listWorkflowFiles(reader, commitOid);
    if (listing === null) return [];
    const files: WorkflowFile[] = [];
    for (const file of listing.files) {
      files.push({ dir: listing.dir, name: file.name, blobOid: file.blobOid, parsed: await this.parse(reader, file.blobOid, file.name) });
    }
    return files;
  }

  /** One workflow by its name relative to the workflows directory (exact, case-sensitive). */
  async workflowAt(reader: RepositoryReader, commitOid: string, name: string): Promise<WorkflowFile | null> {
    const listing = await listWorkflowFiles(reader, commitOid);
    const file = listing?.files.find((f) => f.name === name);
    if (listing === null || file === undefined) return null;
    return { dir: listing.dir, name: file.name, blobOid: file.blobOid, parsed: await this.parse(reader, file.blobOid, file.name) };
  }

  private async parse(reader: RepositoryReader, blobOid: string, name: string): Promise<ParsedWorkflow> {
    const cached = this.parsed.get(blobOid);
    if (cached !== undefined) {
      this.parsed.delete(blobOid);
      this.parsed.set(blobOid, cached);
      return cached;
    }
    const blob = await reader.readBlob(blobOid);
    const parsed = parseWorkflow(name, blob === null ? '' : blob.toString('utf8'));
    this.parsed.set(blobOid, parsed);
    if (this.parsed.size > this.maxEntries) {
      const oldest = this.parsed.keys().next().value;
      if (oldest !== undefined) this.parsed.delete(oldest);
    }
    return parsed;
  }
}

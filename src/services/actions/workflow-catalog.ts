// The workflow files of a commit, parsed. Reading goes through the long-lived
// cat-file processes; parsing is cached by blob id, so a workflow file that did
// not change between pushes (or across a thousand dispatches) is parsed once,
// and the listing is cached by commit id (a commit's tree never changes).
// A file over GANTRY_ACTIONS_MAX_WORKFLOW_SIZE is never read whole: cat-file
// announces its size first, and the file parses as an error saying so.
import { ObjectTooLargeError } from '../../modules/git/cat-file.ts';
import { listWorkflowFiles } from '../../modules/git/workflow-files.ts';
import type { RepositoryReader } from '../../modules/git/repository-reader.ts';
import { parseWorkflow } from '../../modules/workflows/parse.ts';
import type { ParsedWorkflow } from '../../modules/workflows/parse.ts';
import { workflowTooLargeMessage } from './run-limits.ts';

export interface WorkflowFile {
  /** The workflows directory used at this commit, e.g. `.forgejo/workflows`. */
  dir: string;
  /** Path relative to `dir` (`ci.yml`, `sub/x.yml`): the run's `workflow_id`. */
  name: string;
  blobOid: string;
  parsed: ParsedWorkflow;
}

const DEFAULT_CACHE_ENTRIES = 1000;

type Listing = Awaited<ReturnType<typeof listWorkflowFiles>>;

/** A small LRU map: Map iteration order is insertion order, so re-inserting on a hit keeps the first key the least recently used. */
class Lru<V> {
  private readonly entries = new Map<string, V>();

  constructor(private readonly max: number) {}

  get(key: string): V | undefined {
    const value = this.entries.get(key);
    if (value !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, value);
    }
    return value;
  }

  set(key: string, value: V): void {
    this.entries.set(key, value);
    if (this.entries.size > this.max) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
  }
}

export class WorkflowCatalog {
  private readonly parsed: Lru<ParsedWorkflow>;
  private readonly listings: Lru<Listing>;

  constructor(
    private readonly maxWorkflowBytes: number,
    maxEntries = DEFAULT_CACHE_ENTRIES,
  ) {
    this.parsed = new Lru(maxEntries);
    this.listings = new Lru(maxEntries);
  }

  /** Every workflow of the commit, or [] when it has no workflows directory. */
  async workflowsAt(reader: RepositoryReader, commitOid: string): Promise<WorkflowFile[]> {
    const listing = await this.listing(reader, commitOid);
    if (listing === null) return [];
    const files: WorkflowFile[] = [];
    for (const file of listing.files) {
      files.push({
        dir: listing.dir,
        name: file.name,
        blobOid: file.blobOid,
        parsed: await this.parse(reader, file.blobOid, file.name),
      });
    }
    return files;
  }

  /** One workflow by its name relative to the workflows directory (exact, case-sensitive). */
  async workflowAt(reader: RepositoryReader, commitOid: string, name: string): Promise<WorkflowFile | null> {
    const listing = await this.listing(reader, commitOid);
    const file = listing?.files.find((f) => f.name === name);
    if (listing === null || file === undefined) return null;
    return {
      dir: listing.dir,
      name: file.name,
      blobOid: file.blobOid,
      parsed: await this.parse(reader, file.blobOid, file.name),
    };
  }

  private async listing(reader: RepositoryReader, commitOid: string): Promise<Listing> {
    // Keyed by repository too: the same commit may exist in several repositories.
    const key = `${reader.gitDir}\0${commitOid}`;
    const cached = this.listings.get(key);
    if (cached !== undefined) return cached;
    const listing = await listWorkflowFiles(reader, commitOid);
    this.listings.set(key, listing);
    return listing;
  }

  private async parse(reader: RepositoryReader, blobOid: string, name: string): Promise<ParsedWorkflow> {
    const cached = this.parsed.get(blobOid);
    if (cached !== undefined) return cached;
    let parsed: ParsedWorkflow;
    try {
      const blob = await reader.readBlob(blobOid, { maxSize: this.maxWorkflowBytes });
      parsed = parseWorkflow(name, blob === null ? '' : blob.toString('utf8'));
    } catch (error) {
      if (!(error instanceof ObjectTooLargeError)) throw error;
      // No events: like a file that does not parse, it fails one run per push (push-triggers.ts).
      parsed = {
        events: {},
        jobs: [],
        errors: [workflowTooLargeMessage(name, error.object.size, this.maxWorkflowBytes)],
      };
    }
    // Cached under the blob id: the limit is fixed for the life of the process.
    this.parsed.set(blobOid, parsed);
    return parsed;
  }
}

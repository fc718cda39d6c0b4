// The work a server process does besides answering requests: failing stuck
// tasks (actions/housekeeping.ts), delivering the webhook outbox
// (webhooks/delivery-worker.ts) and pruning old deliveries (webhooks/retention.ts).
// Built with everything else by the composition root (deps.ts), started only
// by `gantry web`: the CLI commands build the same deps and must not run it.
// Every process may run all of it at once; each worker is safe in parallel.

/** One worker: started once, stopped once (finishing what it has in hand). */
export interface BackgroundWorker {
  start(): void;
  stop(): Promise<void>;
}

export class BackgroundWork {
  private started = false;

  constructor(private readonly workers: readonly BackgroundWorker[]) {}

  start(): void {
    if (this.started) return;
    this.started = true;
    for (const worker of this.workers) worker.start();
  }

  /** Stops the workers in order; a no-op when they never started. */
  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    for (const worker of this.workers) await worker.stop();
  }
}

// Runs an idempotent maintenance pass (a retention prune, a cleanup) on a
// timer in every process: the first pass soon after start, not at once
// (startup has enough to do), then every `intervalMs`. A failed pass is
// reported and the next one runs as planned; passes never overlap, because
// a tick that finds the previous pass still running skips. stop() waits for
// the pass in flight, so a shutdown never cuts one off halfway through its
// batch (each batch is its own transaction, so a crash costs at most a redo).
const FIRST_PASS_MAX_DELAY_MS = 30_000;

export class PeriodicPass {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly pass: () => Promise<unknown>,
    private readonly onError: (error: unknown) => void = () => {},
  ) {}

  start(intervalMs: number): void {
    if (this.timer) return;
    const tick = (): void => {
      if (this.running) return;
      this.running = this.pass()
        .then(
          () => undefined,
          (error: unknown) => this.onError(error),
        )
        .finally(() => {
          this.running = null;
        });
    };
    this.timer = setTimeout(
      () => {
        tick();
        this.timer = setInterval(tick, intervalMs);
        this.timer.unref();
      },
      Math.min(intervalMs, FIRST_PASS_MAX_DELAY_MS),
    );
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      clearInterval(this.timer);
    }
    this.timer = null;
    await this.running;
  }
}

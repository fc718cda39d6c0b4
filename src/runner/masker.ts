// Hides secrets in log lines before they leave the runner: every secret value,
// the task token, and every value a step masks with `::add-mask::` becomes
// `***` (forgejo-runner internal/pkg/report/mask.go). A multi-line secret is
// masked line by line as well, because the log is sent line by line: a line
// of it can show up on its own (one line of a key file, echoed).

const MASK = '***';

export class Masker {
  private readonly values = new Set<string>();
  /** Longest first, so a value that contains another is replaced whole. */
  private ordered: string[] = [];

  add(value: string): void {
    const candidates = [value, ...value.split(/\r?\n/)];
    let changed = false;
    for (const candidate of candidates) {
      // Blank lines (and blank values) would mask every line; they hide nothing.
      if (candidate.trim() === '' || this.values.has(candidate)) continue;
      this.values.add(candidate);
      changed = true;
    }
    if (changed) this.ordered = [...this.values].sort((a, b) => b.length - a.length);
  }

  mask(line: string): string {
    let out = line;
    for (const value of this.ordered) if (out.includes(value)) out = out.split(value).join(MASK);
    return out;
  }
}

// Memory of another process as the kernel counts it (Linux /proc).
import fs from 'node:fs/promises';

export interface ProcessMemory {
  /** Resident set size now (VmRSS), bytes. */
  rss: number;
  /** The highest resident set size so far (VmHWM), bytes. */
  peakRss: number;
}

/** Reads /proc/<pid>/status; throws where there is no /proc (not Linux). */
export async function readProcessMemory(pid: number): Promise<ProcessMemory> {
  const status = await fs.readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string): number => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status);
    if (!match) throw new Error(`/proc/${pid}/status has no ${field}`);
    return Number(match[1]) * 1024;
  };
  return { rss: kib('VmRSS'), peakRss: kib('VmHWM') };
}

/**
 * Sets the kernel's RSS high-water mark (VmHWM) of `pid` back to its current
 * RSS (Linux: clear_refs 5), so a later peak is the measured work's own;
 * false where that is not allowed.
 */
export async function resetPeakMemory(pid: number): Promise<boolean> {
  try {
    await fs.writeFile(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

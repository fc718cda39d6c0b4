// CPU time of another process as the kernel counts it (Linux /proc).
import fs from 'node:fs/promises';

/** Seconds of CPU (user + system) the process has used so far. */
export async function processCpuSeconds(pid: number): Promise<number> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
  // The fields after the command name, which may itself hold spaces and parentheses.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return ticks / 100;
}

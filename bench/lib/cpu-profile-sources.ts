// The bench's `gantry web` children run the production build (dist/), so a
// CPU profile they write (GANTRY_BENCH_CPU_PROF) names the bundle's lines. V8
// does not apply source maps to profiles: this rewrites each frame in the
// bundle to the source file and line it came from (src/…, or
// node_modules/@actions/… for what the bundle inlines), so profiles read the
// same as those of the sources. Profiles that name no bundle are left as they
// are; a rewritten one names none any more, so running it twice is harmless.
import fs from 'node:fs/promises';
import path from 'node:path';
import { SourceMap } from 'node:module';
import type { SourceMapPayload } from 'node:module';
import { pathToFileURL } from 'node:url';

interface CallFrame {
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface CpuProfile {
  nodes: { callFrame: CallFrame }[];
}

/** Rewrites the profiles in `dir` whose frames are in `bundle` (a file beside its `.map`); returns how many. */
export async function mapProfilesToSources(dir: string, bundle: string): Promise<number> {
  const bundleUrl = pathToFileURL(bundle).href;
  const mapUrl = pathToFileURL(`${bundle}.map`);
  let map: SourceMap | null = null;
  let rewritten = 0;
  const names = await fs.readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return []; // no child wrote a profile
    throw error;
  });
  for (const name of names) {
    if (!name.endsWith('.cpuprofile')) continue;
    const file = path.join(dir, name);
    const text = await fs.readFile(file, 'utf8');
    if (!text.includes(bundleUrl)) continue;
    map ??= new SourceMap(JSON.parse(await fs.readFile(mapUrl, 'utf8')) as SourceMapPayload);
    const profile = JSON.parse(text) as CpuProfile;
    for (const { callFrame } of profile.nodes) {
      if (callFrame.url !== bundleUrl) continue;
      const entry = map.findEntry(callFrame.lineNumber, callFrame.columnNumber) as Partial<{
        originalSource: string;
        originalLine: number;
        originalColumn: number;
      }>;
      if (entry.originalSource === undefined) continue;
      callFrame.url = new URL(entry.originalSource, mapUrl).href;
      callFrame.lineNumber = entry.originalLine ?? 0;
      callFrame.columnNumber = entry.originalColumn ?? 0;
    }
    const temp = `${file}.tmp`;
    await fs.writeFile(temp, JSON.stringify(profile));
    await fs.rename(temp, file);
    rewritten += 1;
  }
  return rewritten;
}

// Collecting the buffers of a large request body as it streams through, so
// an upload costs the server a few MB, not ~32 MB.
//
// Node's HTTP parser hands every read of a request body to JavaScript as a
// fresh Buffer (a copy of its read buffer), so receiving N bytes allocates N
// bytes, each chunk garbage as soon as it is written out. V8 frees such a
// buffer only when a scavenge (a minor GC) finds its young wrapper dead, and
// an upload allocates almost nothing else on the JavaScript heap, so
// scavenges come only when V8 forces one for the buffers themselves: once the
// young ones hold twice its default maximum semi-space, 32 MB on 64-bit
// (--trace-gc shows a Scavenge for "external memory pressure" every 32 MB of
// a 1 GiB upload). A 1 GiB artifact upload grew the server's RSS by 33–34 MB
// (issue 15's bench, target ≤ 32 MB), whatever its size beyond that; no V8
// flag moves this threshold (--max-semi-space-size does not).
//
// `noteReceived(bytes)` is called by code that streams a request body to
// disk: after every RECEIVED_BYTES_PER_SCAVENGE bytes (counted over the
// whole process) it runs a scavenge, so at most about that much of such
// garbage piles up. A scavenge touches only the young generation; with
// little of it alive it takes about a millisecond (one per 4 MiB is
// ~25 per second at 100 MB/s). The `gc` function is reached as Node's own
// tests do: --expose-gc set at run time, then the `gc` of a new vm context
// (the process's global scope gets none). Where that is refused,
// noteReceived does nothing and V8's own threshold applies.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** How much request body may pile up as garbage before a scavenge: 4 MiB measured +13 MB peak on the bench. */
export const RECEIVED_BYTES_PER_SCAVENGE = 4 * 1024 * 1024;

type Collect = (options: { type: 'minor' }) => void;

let collect: Collect | null | undefined;
let sinceLast = 0;

function collector(): Collect | null {
  if (collect === undefined) {
    try {
      setFlagsFromString('--expose-gc');
      const found: unknown = runInNewContext('typeof gc === "function" ? gc : null');
      collect = typeof found === 'function' ? (found as Collect) : null;
    } catch {
      collect = null;
    }
  }
  return collect;
}

/** Counts `bytes` of request body just received (fresh buffers); scavenges once enough have passed. */
export function noteReceived(bytes: number): void {
  sinceLast += bytes;
  if (sinceLast < RECEIVED_BYTES_PER_SCAVENGE) return;
  sinceLast = 0;
  collector()?.({ type: 'minor' });
}

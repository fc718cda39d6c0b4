// How runner RPC answers are gzip-compressed, on the Connect path (routes.ts)
// and the direct paths (fetch-task-direct.ts, report-front.ts) alike.
//
// From COMPRESS_MIN_BYTES on only. Forgejo compresses from 1 KiB
// (connect.WithCompressMinBytes(1024)), which takes in every task a runner
// is given: its answer is a few KiB (mostly the context as protobuf), and
// gzipping it cost about 27 µs of the server's one event loop per claimed
// job, 5-10 % of what a job costs a SQLite server in all (issue 18's runner
// bench). Sent plain, such an answer is a few KiB more on the wire, which a
// runner's network carries for far less than that CPU; and the Connect
// protocol lets a server answer uncompressed whatever the client accepts, so
// every client reads it (forgejo-runner and act_runner decode either). A
// larger answer (a big event payload, many secrets, many outputs) is still
// compressed.
//
// An answer of up to 64 KiB is compressed synchronously, since the
// asynchronous path costs a zlib stream and a thread-pool round trip per
// answer, more than compressing it; larger answers through the thread pool,
// so the event loop is never held long. Those are compressed at zlib's
// fastest level: a task's answer comes out 5 % larger than at the default
// level for about half the CPU.
import { constants, gzipSync } from 'node:zlib';
import { compressionGzip } from '@connectrpc/connect-node';
import type { Compression } from '@connectrpc/connect/protocol';

/** Answers from this size on are gzip-compressed for a runner that accepts gzip (routes.ts: compressMinBytes). */
export const COMPRESS_MIN_BYTES = 16 * 1024;

/** Answers up to this size are gzipped at once rather than through the thread pool. */
const SYNC_GZIP_MAX_BYTES = 64 * 1024;
const SYNC_GZIP_OPTIONS = { level: constants.Z_BEST_SPEED };

/** connect-node's gzip, with small answers compressed synchronously. */
export const gzipAnswers: Compression = {
  name: compressionGzip.name,
  compress(bytes) {
    if (bytes.byteLength > SYNC_GZIP_MAX_BYTES) return compressionGzip.compress(bytes);
    const compressed = gzipSync(bytes, SYNC_GZIP_OPTIONS);
    return Promise.resolve(new Uint8Array(compressed.buffer, compressed.byteOffset, compressed.byteLength));
  },
  decompress: (bytes, readMaxBytes) => compressionGzip.decompress(bytes, readMaxBytes),
};

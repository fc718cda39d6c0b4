// How runner RPC answers are gzip-compressed, on the Connect path (routes.ts)
// and the direct FetchTask path (fetch-task-direct.ts) alike: an answer of a
// few KiB (a task) synchronously, since the asynchronous path costs a zlib
// stream and a thread-pool round trip per answer, more than compressing it;
// larger answers through the thread pool, so the event loop is never held long.
// Those small answers are compressed at zlib's fastest level: a task's answer
// (about 5 KiB, mostly its context as protobuf) comes out 5 % larger than at
// the default level for about half the CPU, and on a busy fleet every
// claimed job pays it.
import { constants, gzipSync } from 'node:zlib';
import { compressionGzip } from '@connectrpc/connect-node';
import type { Compression } from '@connectrpc/connect/protocol';

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

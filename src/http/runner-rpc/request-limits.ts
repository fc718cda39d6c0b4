// How many bytes each runner method may send, counted before and after
// decompression. Small for everything that is read whole: the messages are a
// few hundred bytes, and Ping and Register answer anyone, so a gzip "bomb"
// must stop inflating early. UpdateTask carries the job's outputs (each up to
// 1 MiB is stored, task-reports.ts), so it keeps more room, but only for an
// authenticated runner. A binary UpdateLog is streamed into the log file in
// batches (update-log-stream.ts), so its limit is a setting
// (GANTRY_ACTIONS_LOG_MAX_REQUEST_SIZE), not a memory bound; in JSON (or
// gRPC) it is decoded whole by Connect, so it keeps the buffered limit: no
// runner sends it that way (act_runner and forgejo-runner speak binary
// protobuf), and a JSON text is held several times over while it is parsed.
import type { DescMethod } from '@bufbuild/protobuf';
import type { BodyLimit } from './request-body.ts';

/** Ping, Register, Declare, FetchTask, FetchSingleTask: a few hundred bytes in practice. */
const SMALL_REQUEST_BYTES = 64 * 1024;
/** UpdateTask (outputs), and UpdateLog when it is not streamed. */
const BUFFERED_REQUEST_BYTES = 32 * 1024 * 1024;

const LOG_REQUEST_SETTING = 'GANTRY_ACTIONS_LOG_MAX_REQUEST_SIZE';

/** The limit of `method`'s request when it is read whole (Connect's readMaxBytes, and the gate's). */
export function bufferedLimitOf(method: DescMethod, logRequestMaxBytes: number): BodyLimit {
  if (method.name === 'UpdateTask') return { maxBytes: BUFFERED_REQUEST_BYTES };
  if (method.name === 'UpdateLog')
    return { maxBytes: Math.min(BUFFERED_REQUEST_BYTES, logRequestMaxBytes), setting: LOG_REQUEST_SETTING };
  return { maxBytes: SMALL_REQUEST_BYTES };
}

/** The limit of a streamed (binary) UpdateLog. */
export function streamedLogLimit(logRequestMaxBytes: number): BodyLimit {
  return { maxBytes: logRequestMaxBytes, setting: LOG_REQUEST_SETTING };
}

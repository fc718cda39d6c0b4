// UpdateLog in binary protobuf, stored as it arrives. After an outage a
// runner sends every unacknowledged row in one request and never splits it
// (forgejo-runner's reporter), so one request may hold hundreds of MiB. Its
// rows are decoded one by one (update-log-decoder.ts) and handed to
// TaskReportService.updateLog in batches of about BATCH_BYTES, each an
// UpdateLog of its own at the next index. Forgejo's ack-index protocol makes
// that equivalent to one call: a batch stores only what is not stored yet,
// and a gap stores nothing. `no_more` is applied once at the end, with the
// request's own index, exactly as the single call would. Memory: one batch,
// one partial row and the stream's buffers, whatever the request's size.
//
// A stored batch stays stored if something later in the request fails (bad
// bytes, a lost race): it is a prefix of what the runner sent, committed and
// acknowledged like any UpdateLog, so the runner's next call (from its old
// index) stores just the rest. At the size limit the same holds on purpose:
// the rows that arrived whole are stored and acknowledged, the answer is the
// ack, and the runner sends the remainder in its next call — a backlog
// larger than the limit drains in steps instead of being refused forever.
// Only a limit reached before a single row is complete is refused
// (resource_exhausted).
import { create, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { createAsyncIterable } from '@connectrpc/connect/protocol';
import type { UniversalServerResponse } from '@connectrpc/connect/protocol';
import { contentTypeUnaryProto } from '@connectrpc/connect/protocol-connect';
import { UpdateLogResponseSchema } from '../../gen/runner/v1/messages_pb.ts';
import type { Runner } from '../../models/runners.ts';
import type { LogRow } from '../../services/actions/task-logs.ts';
import type { TaskReportService } from '../../services/actions/task-reports.ts';
import { WireError } from './byte-stream.ts';
import { toNumber } from './mapping.ts';
import { BodyLimitError } from './request-body.ts';
import { UpdateLogDecoder } from './update-log-decoder.ts';
import type { LogRequestHead } from './update-log-decoder.ts';

/** Rows are stored once about this many bytes of them are decoded (a batch is one append and one fsync). */
const BATCH_BYTES = 1024 * 1024;
/** What a row costs besides its content (its object, timestamp, line prefix), so tiny rows still make bounded batches. */
const ROW_OVERHEAD_BYTES = 128;

export interface StreamedLogAnswer {
  ackIndex: number;
  /** False when the size limit stopped the reading: the rest of the body was never read. */
  complete: boolean;
}

/** UpdateLog whose body is `body` (binary protobuf, already decompressed and bounded). */
export async function updateLogFromStream(
  reports: TaskReportService,
  runner: Runner,
  body: AsyncIterable<Uint8Array>,
): Promise<StreamedLogAnswer> {
  const decoder = new UpdateLogDecoder(body);
  let batch: LogRow[] = [];
  let batchBytes = 0;
  // task_id and index as the first stored batch froze them (null: nothing stored yet).
  const stored: { head: LogRequestHead | null } = { head: null };
  let handed = 0;
  let ack = 0;

  const store = async (): Promise<void> => {
    const head = (stored.head ??= decoder.freezeHead());
    const result = await reports.updateLog(runner, {
      taskId: toNumber(head.taskId),
      index: toNumber(head.index) + handed,
      rows: batch,
      noMore: false,
    });
    handed += batch.length;
    ack = result.ackIndex;
    batch = [];
    batchBytes = 0;
  };

  try {
    for (let row = await decoder.nextRow(); row !== null; row = await decoder.nextRow()) {
      batch.push(row);
      batchBytes += row.content.length + ROW_OVERHEAD_BYTES;
      if (batchBytes >= BATCH_BYTES) await store();
    }
  } catch (error) {
    if (!(error instanceof BodyLimitError)) throw asConnectError(error);
    if (batch.length > 0) await store();
    if (handed === 0) throw error;
    return { ackIndex: ack, complete: false };
  }

  // The whole message is read: task_id, index and no_more are final.
  const head = stored.head;
  if (head === null) {
    const result = await reports.updateLog(runner, {
      taskId: toNumber(decoder.taskId),
      index: toNumber(decoder.index),
      rows: batch,
      noMore: decoder.noMore,
    });
    return { ackIndex: result.ackIndex, complete: true };
  }
  if (batch.length > 0) await store();
  if (decoder.noMore)
    ack = (
      await reports.updateLog(runner, {
        taskId: toNumber(head.taskId),
        index: toNumber(head.index),
        rows: [],
        noMore: true,
      })
    ).ackIndex;
  return { ackIndex: ack, complete: true };
}

function asConnectError(error: unknown): unknown {
  if (error instanceof WireError)
    return new ConnectError(
      `cannot decode the request as runner.v1.UpdateLogRequest: ${error.message}`,
      Code.InvalidArgument,
    );
  return error;
}

/**
 * The Connect answer of a streamed UpdateLog: a few bytes, so never
 * compressed (below compressMinBytes). A body left unread closes the connection.
 */
export function updateLogResponse(answer: StreamedLogAnswer): UniversalServerResponse {
  const body = toBinary(
    UpdateLogResponseSchema,
    create(UpdateLogResponseSchema, { ackIndex: BigInt(answer.ackIndex) }),
  );
  return {
    status: 200,
    header: new Headers({
      'content-type': contentTypeUnaryProto,
      'content-length': String(body.byteLength),
      ...(answer.complete ? {} : { connection: 'close' }),
    }),
    body: createAsyncIterable([body]),
  };
}

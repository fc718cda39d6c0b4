// UpdateTask's answer, for the Connect route (routes.ts) and the front path
// (report-front.ts) alike: the task's state as the service settled it, and
// the output keys it took.
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { Result, UpdateTaskRequest, UpdateTaskResponseSchema } from '../../gen/runner/v1/messages_pb.ts';
import type { Runner } from '../../models/runners.ts';
import type { TaskReportService } from '../../services/actions/task-reports.ts';
import { fromProtoTaskState } from './mapping.ts';

export async function updateTask(
  reports: TaskReportService,
  runner: Runner,
  req: UpdateTaskRequest,
): Promise<MessageInitShape<typeof UpdateTaskResponseSchema>> {
  const state = fromProtoTaskState(req.state);
  const result = await reports.updateTask(runner, state, req.outputs);
  return { state: { id: BigInt(state.id), result: result.result as Result }, sentOutputs: result.sentOutputs };
}

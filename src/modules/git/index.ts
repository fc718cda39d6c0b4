// Public surface of the git module: the rest of Gantry imports from here only.
export { runGit, GitCommandError, gitEnvironment } from './run-git.ts';
export type { RunGitOptions } from './run-git.ts';
export { isValidBranchName, MAX_BRANCH_NAME_BYTES } from './ref-name.ts';
export {
  initBareRepository,
  commitInitialFile,
  branchExists,
  setHeadBranch,
  isEmptyRepository,
  removeRepository,
  moveRepository,
} from './bare-repository.ts';
export { markProvisional, isProvisional, clearProvisional } from './provisional-marker.ts';
export type { ObjectFormat, InitBareRepositoryOptions, CommitInitialFileOptions } from './bare-repository.ts';
export {
  parseGitService,
  rpcRequestContentType,
  advertiseRefs,
  serviceRpc,
  decodeRequestBody,
  UnsupportedContentEncodingError,
} from './smart-http.ts';
export type {
  GitService,
  GitExit,
  GitResponse,
  ServiceRpcResponse,
  AdvertiseRefsOptions,
  ServiceRpcOptions,
} from './smart-http.ts';
export { ensureHooks, parseRefUpdates } from './receive-hooks.ts';
export type { RefUpdate } from './receive-hooks.ts';
export { CatFileProcess, CatFilePool, CatFileError, ObjectTooLargeError } from './cat-file.ts';
export type {
  GitObject,
  GitObjectInfo,
  GitObjectType,
  ReadObjectOptions,
  CatFileProcessOptions,
  CatFilePoolOptions,
} from './cat-file.ts';
export { parseTree, parseCommit } from './objects.ts';
export type { TreeEntry, TreeEntryKind, Signature, Commit } from './objects.ts';
export { RepositoryReader } from './repository-reader.ts';
export type { CommitWithId } from './repository-reader.ts';
export { WORKFLOW_DIRS, listWorkflowFiles, changedPaths } from './workflow-files.ts';
export type { WorkflowFile, WorkflowFiles, ChangedPathsOptions } from './workflow-files.ts';

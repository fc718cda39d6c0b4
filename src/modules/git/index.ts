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
export type { ObjectFormat, InitBareRepositoryOptions, CommitInitialFileOptions } from './bare-repository.ts';

// Actions variables at user, organization and repository scope (Forgejo:
// services/actions/variables.go, routers/api/v1/{user,org,repo}/action.go).
// The checks run in the order of Forgejo's handlers, which decides which error
// a request with several problems gets.
import { AppError } from '../../modules/errors.ts';
import type { Clock } from '../../modules/clock.ts';
import { normalizeName, variableNameProblem } from '../../modules/actions-names.ts';
import type { Db } from '../../models/database.ts';
import { isUniqueViolation } from '../../models/database.ts';
import { insertVariable, listVariablesPage, updateVariable } from '../../models/action-variables.ts';
import {
  deleteScopedValue,
  findScopedValue,
  listScopedValuesForRepository,
  ownerThenRepositoryValues,
} from '../../models/scoped-values.ts';
import type { ScopedValue } from '../../models/scoped-values.ts';
import type { Repository } from '../../models/repos.ts';
import type { Scope } from '../../modules/scope.ts';
import { checkedValue } from './secrets.ts';

const NOT_FOUND = 'variable not found';

/** `name` as the client typed it, as Forgejo's message shows it. */
function alreadyExists(name: string): AppError {
  return AppError.conflict(`variable name ${name} already exists`);
}

function checkName(name: string): void {
  const problem = variableNameProblem(name);
  if (problem) throw AppError.invalid(problem);
}

export interface UpdateVariableInput {
  /** New name; empty or absent keeps the current one. */
  name?: string;
  value: string;
}

export class VariableService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  async list(
    scope: Scope,
    page: { limit: number; offset: number },
  ): Promise<{ variables: ScopedValue[]; total: number }> {
    return listVariablesPage(this.db, scope, page.limit, page.offset);
  }

  async get(scope: Scope, name: string): Promise<ScopedValue> {
    return this.found(await findScopedValue(this.db, 'action_variable', scope, normalizeName(name)));
  }

  /** What get answers from its read, made already (the repository guard reads it with the repository). */
  found(variable: ScopedValue | null): ScopedValue {
    if (!variable) throw AppError.notFoundMessage(NOT_FOUND);
    return variable;
  }

  /** Forgejo checks for an existing name before validating it. */
  async create(scope: Scope, name: string, rawValue: string): Promise<void> {
    const value = checkedValue('Value', rawValue);
    const upper = normalizeName(name);
    if (await findScopedValue(this.db, 'action_variable', scope, upper)) throw alreadyExists(name);
    checkName(name);
    try {
      await insertVariable(this.db, scope, upper, value, this.clock.nowSec());
    } catch (error) {
      // Two concurrent creations of one name: the unique index decides.
      if (isUniqueViolation(error)) throw alreadyExists(name);
      throw error;
    }
  }

  /** Renaming onto a name the scope already has is 409 (a Gantry departure: Forgejo answers 500). */
  async update(scope: Scope, pathName: string, input: UpdateVariableInput): Promise<void> {
    const value = checkedValue('Value', input.value);
    const existing = await findScopedValue(this.db, 'action_variable', scope, normalizeName(pathName));
    if (!existing) throw AppError.notFoundMessage(NOT_FOUND);
    const newName = input.name || pathName;
    checkName(newName);
    const upper = normalizeName(newName);
    if (upper !== existing.name && (await findScopedValue(this.db, 'action_variable', scope, upper)))
      throw alreadyExists(newName);
    try {
      if (!(await updateVariable(this.db, existing.id, upper, value, this.clock.nowSec())))
        throw AppError.notFoundMessage(NOT_FOUND);
    } catch (error) {
      if (isUniqueViolation(error)) throw alreadyExists(newName);
      throw error;
    }
  }

  async delete(scope: Scope, name: string): Promise<void> {
    if (!(await deleteScopedValue(this.db, 'action_variable', scope, normalizeName(name))))
      throw AppError.notFoundMessage(NOT_FOUND);
  }

  /** What a job of `repo` sees: the owner's variables, overridden by the repository's own. */
  async variablesForRepo(repo: Pick<Repository, 'id' | 'ownerId'>): Promise<Map<string, string>> {
    return variablesOf(await listScopedValuesForRepository(this.db, 'action_variable', repo.ownerId, repo.id));
  }
}

/** variablesForRepo from the rows it would read, read already (a claim's statement reads them). */
export function variablesOf(rows: readonly Pick<ScopedValue, 'repoId' | 'name' | 'data'>[]): Map<string, string> {
  return ownerThenRepositoryValues(rows, (row) => row.data);
}

// Creating users (admin API and CLI) and looking accounts up.
import { AppError } from '../modules/errors.ts';
import type { Clock } from '../modules/clock.ts';
import type { PasswordHasher } from '../modules/crypto/password.ts';
import { describeNameProblem, isValidEmail, isValidUsername, usernameProblem } from '../modules/names.ts';
import type { Db } from '../models/database.ts';
import { isUniqueViolation } from '../models/database.ts';
import {
  countIndividualUsers,
  emailInUse,
  findAccountById,
  findAccountByName,
  insertAccount,
  setPasswordHash,
} from '../models/users.ts';
import type { User, Visibility } from '../models/users.ts';

export const MIN_PASSWORD_LENGTH = 8;

export interface CreateUserInput {
  username: string;
  email: string;
  password: string;
  fullName?: string;
  loginName?: string;
  sourceId?: number;
  mustChangePassword: boolean;
  isAdmin?: boolean;
  restricted?: boolean;
  visibility?: Visibility;
}

export class AccountService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly hasher: PasswordHasher,
  ) {}

  /** Name checks shared by users and organizations (Forgejo: IsUsableUsername). */
  static checkUsableName(name: string): void {
    if (!isValidUsername(name)) throw AppError.unprocessable('[Username]: invalid username');
    const problem = usernameProblem(name);
    if (problem) throw AppError.unprocessable(describeNameProblem(problem));
  }

  async createUser(input: CreateUserInput): Promise<User> {
    AccountService.checkUsableName(input.username);
    if (!isValidEmail(input.email)) throw AppError.unprocessable(`e-mail invalid [email: ${input.email}]`);
    if (input.password.length < MIN_PASSWORD_LENGTH) throw AppError.invalid('PasswordIsRequired');
    const passwordHash = await this.hasher.hash(input.password);
    try {
      return await this.db.transaction().execute(async (tx) => {
        if (await findAccountByName(tx, input.username))
          throw AppError.unprocessable(`user already exists [name: ${input.username}]`);
        if (await emailInUse(tx, input.email))
          throw AppError.unprocessable(`e-mail already in use [email: ${input.email}]`);
        return insertAccount(tx, {
          name: input.username,
          email: input.email,
          passwordHash,
          fullName: input.fullName,
          loginName: input.loginName,
          sourceId: input.sourceId,
          isOrganization: false,
          isAdmin: input.isAdmin,
          mustChangePassword: input.mustChangePassword,
          restricted: input.restricted,
          visibility: input.visibility,
          nowSec: this.clock.nowSec(),
        });
      });
    } catch (error) {
      // Two concurrent creations of one name: the unique index decides.
      if (isUniqueViolation(error)) throw AppError.unprocessable(`user already exists [name: ${input.username}]`);
      throw error;
    }
  }

  /**
   * A user sets a new password (the web console's change-password page,
   * which `must_change_password` leads to); clears that flag.
   */
  async changePassword(user: User, password: string): Promise<void> {
    if (password.length < MIN_PASSWORD_LENGTH)
      throw AppError.invalid(`the password must be at least ${MIN_PASSWORD_LENGTH} characters long`);
    await setPasswordHash(this.db, user.id, await this.hasher.hash(password), false, this.clock.nowSec());
  }

  async hasNoUsers(): Promise<boolean> {
    return (await countIndividualUsers(this.db)) === 0;
  }

  /** An individual user by name, or a Forgejo-style 404. */
  async requireUser(name: string): Promise<User> {
    const user = await findAccountByName(this.db, name);
    if (!user || user.isOrganization) throw AppError.notFoundMessage(`user does not exist [uid: 0, name: ${name}]`);
    return user;
  }

  async findByName(name: string): Promise<User | null> {
    return findAccountByName(this.db, name);
  }

  async findById(id: number): Promise<User | null> {
    return findAccountById(this.db, id);
  }
}

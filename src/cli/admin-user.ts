// `gantry admin user create|generate-access-token`, with Forgejo's flags and
// messages. They open the database directly, so they work while the server runs.
import { randomBytes } from 'node:crypto';
import type { Config } from '../config.ts';
import { createDeps } from '../deps.ts';
import type { Deps } from '../deps.ts';
import { AppError } from '../modules/errors.ts';
import { MIN_PASSWORD_LENGTH } from '../services/accounts.ts';
import { CliError } from './cli-error.ts';

interface CreateOptions {
  username?: string;
  name?: string;
  email: string;
  password?: string;
  randomPassword?: boolean;
  admin?: boolean;
  mustChangePassword?: boolean;
  restricted?: boolean;
  fullname?: string;
  accessToken?: boolean;
}

interface TokenOptions {
  username: string;
  tokenName: string;
  scopes: string;
  raw?: boolean;
}

async function withDeps<T>(config: Config, run: (deps: Deps) => Promise<T>): Promise<T> {
  const deps = await createDeps({ ...config, logLevel: 'warn' });
  try {
    return await run(deps);
  } catch (error) {
    if (error instanceof AppError) throw new CliError(error.message);
    throw error;
  } finally {
    await deps.close();
  }
}

export async function adminUserCreate(config: Config, opts: CreateOptions): Promise<void> {
  const username = opts.username ?? opts.name;
  if (!username) throw new CliError('--username is required');
  if (opts.password && opts.randomPassword)
    throw new CliError('--password and --random-password are mutually exclusive');
  const password = opts.randomPassword ? randomBytes(12).toString('base64url') : opts.password;
  if (!password) throw new CliError('a password is required: pass --password or --random-password');
  // The API answers Forgejo's terse `PasswordIsRequired` for this; a person at a
  // terminal needs the rule itself.
  if (password.length < MIN_PASSWORD_LENGTH)
    throw new CliError(
      `the password is too short: use at least ${MIN_PASSWORD_LENGTH} characters (or --random-password)`,
    );

  await withDeps(config, async ({ services }) => {
    // Forgejo: the very first user is not forced to change the password unless asked.
    const firstUser = await services.accounts.hasNoUsers();
    const mustChangePassword = opts.mustChangePassword ?? !firstUser;
    const user = await services.accounts.createUser({
      username,
      email: opts.email,
      password,
      fullName: opts.fullname,
      isAdmin: opts.admin ?? false,
      restricted: opts.restricted ?? false,
      mustChangePassword,
    });
    if (opts.randomPassword) console.log(`generated random password is '${password}'`);
    if (opts.accessToken) {
      const created = await services.accessTokens.create(user, 'gitea-admin', ['all']);
      console.log(`Access token was successfully created... ${created.secret}`);
    }
    console.log(`New user '${user.name}' has been successfully created!`);
  });
}

export async function adminGenerateAccessToken(config: Config, opts: TokenOptions): Promise<void> {
  await withDeps(config, async ({ services }) => {
    const user = await services.accounts.requireUser(opts.username);
    const created = await services.accessTokens.create(user, opts.tokenName, [opts.scopes]);
    console.log(opts.raw ? created.secret : `Access token was successfully created: ${created.secret}`);
  });
}

// The user the scenarios work as: `bench-owner`, with a token of every scope,
// created straight through the services of the server being measured (no
// HTTP round trips before the measurement starts).
import type { User } from '../../src/models/users.ts';
import type { Services } from '../../src/services/index.ts';

export async function createBenchOwner(
  services: Pick<Services, 'accounts' | 'accessTokens'>,
): Promise<{ owner: User; token: string }> {
  const owner = await services.accounts.createUser({
    username: 'bench-owner',
    email: 'bench-owner@bench.invalid',
    password: 'bench-password',
    mustChangePassword: false,
  });
  const token = (await services.accessTokens.create(owner, 'bench', ['all'])).secret;
  return { owner, token };
}

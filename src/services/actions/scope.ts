// Secrets are bound to their place (the scope types live in modules/scope.ts).

/**
 * Associated data of a secret's ciphertext: its place. A ciphertext copied to
 * another row (scope or name) fails to decrypt instead of leaking there.
 */
export function secretAssociatedData(ownerId: number, repoId: number, name: string): string {
  return `secret:${ownerId}:${repoId}:${name}`;
}

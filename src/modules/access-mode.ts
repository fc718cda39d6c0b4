// Forgejo's access modes (models/perm/access_mode.go), ordered so that a higher
// number grants everything a lower one does.
export const AccessMode = {
  none: 0,
  read: 1,
  write: 2,
  admin: 3,
  owner: 4,
} as const;
export type AccessModeValue = (typeof AccessMode)[keyof typeof AccessMode];

const NAMES = ['none', 'read', 'write', 'admin', 'owner'] as const;
export type AccessModeName = (typeof NAMES)[number];

export function accessModeName(mode: number): AccessModeName {
  return NAMES[mode] ?? 'none';
}

export function accessModeFromName(name: string): AccessModeValue | null {
  const index = NAMES.indexOf(name as AccessModeName);
  return index < 0 ? null : (index as AccessModeValue);
}

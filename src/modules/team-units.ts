// Per-unit access of organization teams (Forgejo: a team's `units_map`, stored
// as team_unit rows; models/organization/team.go UnitAccessMode, models/unit/
// unit.go MinUnitAccessMode). Gantry keeps a team's units as one JSON map of
// Forgejo unit key → access mode name, exactly what the API shows as
// `units_map`; this file is the only place that reads it.
import { AccessMode } from './access-mode.ts';

/**
 * The units a repository permission is computed for: `code` (always on,
 * governs git) and the units a repository can switch off (Gantry's
 * has_* columns).
 */
export const PERMISSION_UNITS = [
  'code',
  'issues',
  'pull_requests',
  'wiki',
  'projects',
  'releases',
  'packages',
  'actions',
] as const;
export type PermissionUnit = (typeof PERMISSION_UNITS)[number];

/** Forgejo's unit keys (models/unit/unit.go, `NameKey`), as clients send them in `units` and `units_map`. */
export const UNIT_KEYS: Readonly<Record<PermissionUnit, string>> = {
  code: 'repo.code',
  issues: 'repo.issues',
  pull_requests: 'repo.pulls',
  wiki: 'repo.wiki',
  projects: 'repo.projects',
  releases: 'repo.releases',
  packages: 'repo.packages',
  actions: 'repo.actions',
};

/** External trackers and wikis can only ever be read: they never lower a team's level (MinUnitAccessMode). */
const READ_ONLY_UNIT_KEYS: ReadonlySet<string> = new Set(['repo.ext_issues', 'repo.ext_wiki']);

/**
 * Forgejo's perm.ParseAccessMode for user input: `read`, `write`, `admin`;
 * anything else (including `owner`, which is never parsed from input) is none.
 */
export function parseAccessModeInput(name: string): number {
  switch (name) {
    case 'read':
      return AccessMode.read;
    case 'write':
      return AccessMode.write;
    case 'admin':
      return AccessMode.admin;
    default:
      return AccessMode.none;
  }
}

/**
 * The team's level from a `units_map` (MinUnitAccessMode): the lowest level
 * above none, or none when every unit is none. (Taking the minimum of an
 * empty list would give the highest level: a map of only `none` must grant
 * nothing, not admin.)
 */
export function minUnitAccessMode(unitsMap: Readonly<Record<string, string>>): number {
  let result: number = AccessMode.none;
  for (const [key, name] of Object.entries(unitsMap)) {
    if (READ_ONLY_UNIT_KEYS.has(key.toLowerCase())) continue;
    const mode = parseAccessModeInput(name);
    if (mode > AccessMode.none && (result === AccessMode.none || mode < result)) result = mode;
  }
  return result;
}

export interface TeamUnits {
  /** The team's own level (Forgejo: team.authorize). */
  authorize: number;
  /** Forgejo unit key → access mode name. */
  units: Readonly<Record<string, string>>;
}

/**
 * The team's level on one unit (Team.UnitAccessMode): the mode its map gives
 * that unit's key (matched case-insensitively, as Forgejo's TypeFromKey), and
 * none for a unit the map leaves out.
 *
 * A team with an empty map is one Gantry stored without units (Forgejo
 * refuses to create those: "units permission should not be empty"); it keeps
 * the meaning it had before units were enforced: every unit at the team's
 * level.
 */
export function teamUnitMode(team: TeamUnits, unit: PermissionUnit): number {
  const entries = Object.entries(team.units);
  if (entries.length === 0) return team.authorize;
  const key = UNIT_KEYS[unit];
  const entry = entries.find(([k]) => k.toLowerCase() === key);
  return entry ? parseAccessModeInput(entry[1]) : AccessMode.none;
}

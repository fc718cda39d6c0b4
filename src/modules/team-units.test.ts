import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AccessMode } from './access-mode.ts';
import { minUnitAccessMode, parseAccessModeInput, teamUnitMode } from './team-units.ts';

test('access modes from input: read, write, admin; owner and anything else are none', () => {
  assert.equal(parseAccessModeInput('read'), AccessMode.read);
  assert.equal(parseAccessModeInput('write'), AccessMode.write);
  assert.equal(parseAccessModeInput('admin'), AccessMode.admin);
  for (const other of ['owner', 'none', '', 'Write']) assert.equal(parseAccessModeInput(other), AccessMode.none, other);
});

test("a units_map's team level is its lowest unit level above none, and none when every unit is none", () => {
  assert.equal(minUnitAccessMode({ 'repo.code': 'write', 'repo.actions': 'read' }), AccessMode.read);
  assert.equal(minUnitAccessMode({ 'repo.code': 'write', 'repo.actions': 'none' }), AccessMode.write);
  assert.equal(minUnitAccessMode({ 'repo.code': 'none', 'repo.actions': 'none' }), AccessMode.none);
  assert.equal(minUnitAccessMode({ 'repo.code': 'owner' }), AccessMode.none);
  // External trackers and wikis are read-only and do not lower the level.
  assert.equal(minUnitAccessMode({ 'repo.code': 'admin', 'repo.ext_issues': 'read' }), AccessMode.admin);
});

test('a team grants each unit what its map says, none for a unit left out; an empty map grants every unit at the team level', () => {
  const team = {
    authorize: AccessMode.write,
    units: { 'repo.code': 'write', 'REPO.ACTIONS': 'read', 'repo.issues': 'none' },
  };
  assert.equal(teamUnitMode(team, 'code'), AccessMode.write);
  assert.equal(teamUnitMode(team, 'actions'), AccessMode.read);
  assert.equal(teamUnitMode(team, 'issues'), AccessMode.none);
  assert.equal(teamUnitMode(team, 'wiki'), AccessMode.none);
  assert.equal(teamUnitMode({ authorize: AccessMode.read, units: {} }, 'actions'), AccessMode.read);
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseWorkflowCommand } from './workflow-commands.ts';

test('commands with properties and escaped data; ordinary lines are not commands', () => {
  assert.deepEqual(parseWorkflowCommand('::error file=a%2Cb.ts,line=3::bad%0Athing'), {
    name: 'error',
    properties: { file: 'a,b.ts', line: '3' },
    message: 'bad\nthing',
  });
  assert.deepEqual(parseWorkflowCommand('::add-mask::s3cr3t'), { name: 'add-mask', properties: {}, message: 's3cr3t' });
  assert.equal(parseWorkflowCommand('echo ::add-mask::x'), null);
  assert.equal(parseWorkflowCommand('plain output'), null);
});

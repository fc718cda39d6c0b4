#!/usr/bin/env node
// Runs the TypeScript sources through tsx: @actions/workflow-parser imports JSON
// without import attributes, which plain node refuses, and this keeps one way
// to run Gantry in development and production.
import { register } from 'tsx/esm/api';

register();
const { runCli } = await import('../src/cli/main.ts');
await runCli(process.argv);

#!/usr/bin/env node
// Runs the TypeScript sources through tsx (development, `npx gantry`, the
// tests): @actions/workflow-parser imports JSON without import attributes,
// which plain node refuses, and tsx compiles each source file as it is loaded,
// so what runs is always the checkout as it is. Production runs the bundle
// that `npm run build` writes to dist/ instead (`npm start` builds, then runs
// it), without tsx's loader thread and transpiled sources in memory.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/run.ts');

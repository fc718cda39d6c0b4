// The `gantry` command's entry: the CLI with the process's arguments.
// bin/gantry.mjs loads it through tsx (development, `npx gantry`, the tests);
// scripts/build.mjs bundles it into dist/ (`npm start`, production).
import { runCli } from './main.ts';

await runCli(process.argv);

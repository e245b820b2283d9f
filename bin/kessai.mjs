#!/usr/bin/env node
// Launches the TypeScript CLI through tsx, so `./bin/kessai.mjs …` works from a checkout without a build
// (not `npx kessai`, which looks an unlinked name up on the package registry).
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
process.exit(await main(process.argv));

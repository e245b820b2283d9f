#!/usr/bin/env node
// Launches the TypeScript CLI through tsx, so `npx kessai` works from a checkout without a build.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
process.exit(await main(process.argv));

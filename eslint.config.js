// Lint enforces the boundaries of ../shared/STYLE.md: engine code takes time and randomness as
// inputs (ctx.clock, ctx.ids), and src/domain stays pure (no database, logger or scheduler).
import js from '@eslint/js';
import importPlugin from 'eslint-plugin-import';
import tseslint from 'typescript-eslint';

const clockAndRandomness = [
  {
    selector: "CallExpression[callee.object.name='Date'][callee.property.name='now']",
    message: 'Time is an input: use ctx.clock.now() instead of Date.now().',
  },
  {
    selector: "NewExpression[callee.name='Date'][arguments.length=0]",
    message: 'Time is an input: use ctx.clock.now() instead of new Date().',
  },
  {
    selector: "CallExpression[callee.object.name='Math'][callee.property.name='random']",
    message: 'Randomness is an input: use ctx.ids (seeded in simulation) instead of Math.random().',
  },
];

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', '.kessai/**', 'sim-out/**', 'coverage/**', 'scratch/**'] },
  { files: ['bin/**/*.mjs'], languageOptions: { globals: { process: 'readonly', console: 'readonly' } } },
  {
    // The browser scripts kessai serves (src/checkout/browser/): plain scripts for the buyer's browser.
    files: ['src/**/browser/*.js'],
    languageOptions: {
      sourceType: 'script',
      globals: { window: 'readonly', document: 'readonly', fetch: 'readonly', URL: 'readonly', URLSearchParams: 'readonly', btoa: 'readonly', Promise: 'readonly' },
    },
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Type-aware: a promise nobody awaits loses its error and its ordering.
    files: ['src/**/*.ts', 'jobs/**/*.ts', 'scripts/**/*.ts', 'test/**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: { '@typescript-eslint/no-floating-promises': 'error' },
  },
  {
    // No import cycles in the engine (no-cycle ignores `import type`: only values make a cycle).
    // eslint-plugin-import rather than import-x: import-x's resolver ships per-platform native
    // bindings that this machine's registry lacks, which broke `npm ci` (docs/decisions/database.md).
    files: ['src/**/*.ts', 'jobs/**/*.ts'],
    plugins: { import: importPlugin },
    settings: {
      'import/resolver': { node: { extensions: ['.ts', '.js', '.json'] } },
      'import/extensions': ['.ts', '.js'],
      'import/parsers': { '@typescript-eslint/parser': ['.ts'] },
    },
    rules: { 'import/no-cycle': ['error', { ignoreExternal: true }] },
  },
  {
    files: ['src/**/*.ts', 'jobs/**/*.ts'],
    rules: { 'no-restricted-syntax': ['error', ...clockAndRandomness] },
  },
  {
    // Features never reach up into the command line or the job wiring.
    files: ['src/**/*.ts'],
    ignores: ['src/cli/**', 'src/domain/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/cli', '**/cli/*', '**/jobs', '**/jobs/*'], message: 'Features never import src/cli or jobs: those are composition roots that import features.' }] },
      ],
    },
  },
  {
    // The engine sits below the features: it reaches only the database, the pure domain and the
    // card network it drives; a feature plugs in through a port in src/engine/context.ts.
    files: ['src/engine/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['../*', '!../db', '!../db/*', '!../domain', '!../domain/*', '!../processor', '!../processor/*'], message: 'src/engine imports no feature: give it a port in src/engine/context.ts that the feature implements.' },
            { group: ['**/cli', '**/cli/*', '**/jobs', '**/jobs/*'], message: 'Features never import src/cli or jobs: those are composition roots that import features.' },
          ],
        },
      ],
    },
  },
  {
    // Composition roots: the only places that may read the wall clock.
    files: ['src/cli/**/*.ts', 'src/engine/system-clock.ts'],
    rules: { 'no-restricted-syntax': 'off' },
  },
  {
    files: ['src/domain/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/db', '**/db/*', '../db/**'], message: 'src/domain is pure: no database access.' },
            { group: ['**/engine', '**/engine/*', '../engine/**'], message: 'src/domain is pure: no engine (clock, scheduler, context) imports.' },
            { group: ['**/cli', '**/cli/*', '**/jobs', '**/jobs/*'], message: 'Features never import src/cli or jobs: those are composition roots that import features.' },
            { group: ['pg', 'kysely', 'pino', 'node-cron', '@electric-sql/*'], message: 'src/domain is pure: no database, logger or scheduler imports.' },
          ],
        },
      ],
    },
  },
);

import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Each test file gets its own database (see test/support/database.ts); files run in
    // parallel on separate forks, which keeps PGlite's in-process engine out of the way of others.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
    globalSetup: ['test/support/global-setup.ts'],
    // Every call of a statement compiled once is checked against a build from its own values
    // (src/db/fixed-statement.ts); the servers the tests start inherit it.
    env: { KESSAI_CHECK_FIXED_STATEMENTS: '1' },
  },
});

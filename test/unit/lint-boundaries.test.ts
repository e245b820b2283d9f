/**
 * The lint boundaries of STYLE.md, proved through ESLint's Node API on the repository's own
 * eslint.config.js: engine and domain code take time and randomness as inputs, and src/domain is
 * pure, features never import src/cli or jobs, src/engine imports no feature, no floating promises, no import cycles. The example
 * file paths below do not exist on disk: lintText uses them to pick the rules, and the type-aware
 * rules get a default TypeScript project for them (EXAMPLE_FILES). The import cycle needs two real
 * files, written under src/ for the test and removed after it.
 */
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint, type Linter } from 'eslint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/** The files that do not exist, linted with a default project so that type-aware rules run on them. */
const EXAMPLE_FILES = ['src/engine/example.ts', 'src/domain/example.ts', 'src/cli/example.ts', 'jobs/example.ts', 'src/charges/example.ts', 'src/simulation/example.ts'];

let eslint: ESLint;
beforeAll(() => {
  eslint = new ESLint({
    cwd: repoRoot,
    overrideConfig: {
      files: EXAMPLE_FILES,
      languageOptions: { parserOptions: { projectService: { allowDefaultProject: EXAMPLE_FILES } } },
      // eslint-plugin-import's no-cycle reads the importing file from disk and throws on a path
      // that does not exist; the cycle rule is proved on real files below ("no import cycles").
      rules: { 'import/no-cycle': 'off' },
    },
  });
});

async function lint(code: string, filePath: string): Promise<Linter.LintMessage[]> {
  const results = await eslint.lintText(code, { filePath });
  expect(results).toHaveLength(1);
  return results[0]!.messages;
}

/** The rule ids reported, one per message, in order. */
async function ruleIds(code: string, filePath: string): Promise<(string | null)[]> {
  return (await lint(code, filePath)).map((message) => message.ruleId);
}

const WALL_CLOCK_AND_RANDOMNESS = {
  'Date.now()': 'export const at = Date.now();\n',
  'new Date()': 'export const at = new Date();\n',
  'Math.random()': 'export const r = Math.random();\n',
} as const;

const IMPURE_IMPORTS = {
  pg: "import pg from 'pg';\nexport const used = pg;\n",
  kysely: "import { Kysely } from 'kysely';\nexport const used = Kysely;\n",
  pino: "import pino from 'pino';\nexport const used = pino;\n",
  'node-cron': "import cron from 'node-cron';\nexport const used = cron;\n",
  '../db/connect': "import { openStore } from '../db/connect';\nexport const used = openStore;\n",
} as const;

describe('lintText works on paths that do not exist on disk', () => {
  it.each(['src/engine/example.ts', 'src/domain/example.ts', 'src/cli/example.ts'])('%s is linted, not ignored, and clean code passes', async (filePath) => {
    expect(existsSync(join(repoRoot, filePath))).toBe(false);
    const messages = await lint('export const answer: number = 42;\n', filePath);
    expect(messages).toEqual([]);
    // A lint error of the recommended config is still reported, so the file was really linted.
    expect(await ruleIds('export const answer: any = 42;\n', filePath)).toEqual(['@typescript-eslint/no-explicit-any']);
  });
});

describe('time and randomness are inputs in src/domain and src/engine', () => {
  for (const dir of ['src/domain', 'src/engine']) {
    it.each(Object.entries(WALL_CLOCK_AND_RANDOMNESS))(`${dir}: %s is an error (no-restricted-syntax)`, async (_name, code) => {
      const messages = await lint(code, `${dir}/example.ts`);
      expect(messages.map((m) => [m.ruleId, m.severity])).toEqual([['no-restricted-syntax', 2]]);
      expect(messages[0]!.message).toMatch(/is an input: use ctx\.(clock\.now\(\)|ids)/);
    });

    it(`${dir}: new Date(0) and new Date(instant) are fine`, async () => {
      expect(await lint('export const epoch = new Date(0);\nexport const copy = (d: Date): Date => new Date(d.getTime());\n', `${dir}/example.ts`)).toEqual([]);
    });
  }

  it('jobs/: Date.now() is an error too', async () => {
    expect(await ruleIds(WALL_CLOCK_AND_RANDOMNESS['Date.now()'], 'jobs/example.ts')).toEqual(['no-restricted-syntax']);
  });

  it('reports each use, on its line', async () => {
    const messages = await lint('export const a = Date.now();\nexport const b = new Date();\nexport const c = Math.random();\n', 'src/engine/example.ts');
    expect(messages.map((m) => [m.ruleId, m.line])).toEqual([
      ['no-restricted-syntax', 1],
      ['no-restricted-syntax', 2],
      ['no-restricted-syntax', 3],
    ]);
  });
});

describe('the composition roots may read the wall clock', () => {
  it.each(Object.entries(WALL_CLOCK_AND_RANDOMNESS))('src/cli: %s is allowed', async (_name, code) => {
    expect(await lint(code, 'src/cli/example.ts')).toEqual([]);
  });

  it('src/engine/system-clock.ts: new Date() is allowed', async () => {
    expect(await lint(WALL_CLOCK_AND_RANDOMNESS['new Date()'], 'src/engine/system-clock.ts')).toEqual([]);
  });
});

describe('src/domain is pure: no database, logger or scheduler imports', () => {
  it.each(Object.entries(IMPURE_IMPORTS))("importing '%s' in src/domain is an error (no-restricted-imports)", async (source, code) => {
    const messages = await lint(code, 'src/domain/example.ts');
    expect(messages.map((m) => [m.ruleId, m.severity])).toEqual([['no-restricted-imports', 2]]);
    expect(messages[0]!.message).toContain(`'${source}'`);
    expect(messages[0]!.message).toContain('src/domain is pure');
  });

  it.each(Object.entries(IMPURE_IMPORTS))("importing '%s' in src/engine is fine", async (_source, code) => {
    expect(await lint(code, 'src/engine/example.ts')).toEqual([]);
  });

  it('importing another domain module or decimal.js in src/domain is fine', async () => {
    const code = "import Decimal from 'decimal.js';\nimport { jstDate } from './time';\nexport const used = [Decimal, jstDate];\n";
    expect(await lint(code, 'src/domain/example.ts')).toEqual([]);
  });
});

describe('features never import src/cli or jobs', () => {
  const IMPORTS = {
    '../cli/main': "import { main } from '../cli/main';\nexport const used = main;\n",
    '../../jobs/index': "import * as jobs from '../../jobs/index';\nexport const used = jobs;\n",
  } as const;

  for (const dir of ['src/charges', 'src/simulation', 'src/domain']) {
    it.each(Object.entries(IMPORTS))(`${dir}: importing '%s' is an error (no-restricted-imports)`, async (source, code) => {
      const messages = await lint(code, `${dir}/example.ts`);
      expect(messages.map((m) => [m.ruleId, m.severity])).toEqual([['no-restricted-imports', 2]]);
      expect(messages[0]!.message).toContain(`'${source}'`);
      expect(messages[0]!.message).toContain('Features never import src/cli or jobs');
    });
  }

  it("src/cli may import jobs (it is a composition root)", async () => {
    expect(await lint("import * as jobs from '../../jobs/index';\nexport const used = jobs;\n", 'src/cli/example.ts')).toEqual([]);
  });
});

describe('src/engine imports no feature (a feature plugs in through a port)', () => {
  it.each([
    ['../webhooks/delivery', "import { deliverDue } from '../webhooks/delivery';\nexport const used = deliverDue;\n"],
    ['../webhooks/transport', "import type { WebhookTransport } from '../webhooks/transport';\nexport type Used = WebhookTransport;\n"],
    ['../charges/charges', "import * as charges from '../charges/charges';\nexport const used = charges;\n"],
    ['../api/server', "import { buildServer } from '../api/server';\nexport const used = buildServer;\n"],
  ])("importing '%s' in src/engine is an error", async (source, code) => {
    const messages = await lint(code, 'src/engine/example.ts');
    expect(messages.map((m) => [m.ruleId, m.severity])).toEqual([['no-restricted-imports', 2]]);
    expect(messages[0]!.message).toContain(`'${source}'`);
    expect(messages[0]!.message).toContain('src/engine imports no feature');
  });

  it('the database, the domain, the card network and its own modules are fine', async () => {
    const code = [
      "import type { Database } from '../db/schema';",
      "import { jstDate } from '../domain/time';",
      "import type { CardNetwork } from '../processor/card-network';",
      "import type { Context } from './context';",
      'export type Used = [Database, CardNetwork, Context];',
      'export const used = jstDate;',
      '',
    ].join('\n');
    expect(await lint(code, 'src/engine/example.ts')).toEqual([]);
  });

  it("importing '../cli/main' in src/engine is still refused as a composition root", async () => {
    const messages = await lint("import { main } from '../cli/main';\nexport const used = main;\n", 'src/engine/example.ts');
    expect(messages.length).toBeGreaterThan(0);
    expect(messages.every((m) => m.ruleId === 'no-restricted-imports')).toBe(true);
    expect(messages.map((m) => m.message).join('\n')).toContain('Features never import src/cli or jobs');
  });
});

describe('src/domain imports nothing from the engine', () => {
  it("importing '../engine/context' in src/domain is an error", async () => {
    const messages = await lint("import type { Context } from '../engine/context';\nexport type Used = Context;\n", 'src/domain/example.ts');
    expect(messages.map((m) => [m.ruleId, m.severity])).toEqual([['no-restricted-imports', 2]]);
    expect(messages[0]!.message).toContain('src/domain is pure');
  });
});

describe('no floating promises (type-aware)', () => {
  const FLOATING = 'async function work(): Promise<number> {\n  return 1;\n}\nexport function start(): void {\n  work();\n}\n';

  it.each(['src/engine/example.ts', 'jobs/example.ts', 'src/cli/example.ts'])('%s: an unawaited promise is an error', async (filePath) => {
    const messages = await lint(FLOATING, filePath);
    expect(messages.map((m) => [m.ruleId, m.line])).toEqual([['@typescript-eslint/no-floating-promises', 5]]);
  });

  it('an awaited or explicitly voided promise is fine', async () => {
    const code = 'async function work(): Promise<number> {\n  return 1;\n}\nexport async function start(): Promise<void> {\n  await work();\n  void work();\n}\n';
    expect(await lint(code, 'src/engine/example.ts')).toEqual([]);
  });
});

describe('no import cycles', () => {
  const probeDir = join(repoRoot, 'src', `lint-cycle-probe-${process.pid}`);
  beforeAll(() => {
    mkdirSync(probeDir, { recursive: true });
    writeFileSync(join(probeDir, 'a.ts'), "import { b } from './b';\nexport const a = (): number => b + 1;\n");
    writeFileSync(join(probeDir, 'b.ts'), "import { a } from './a';\nexport const b = 1;\nexport const useA = (): number => a();\n");
    writeFileSync(join(probeDir, 'c.ts'), "import { b } from './b';\nexport const c = b;\n");
  });
  afterAll(() => rmSync(probeDir, { recursive: true, force: true }));

  it('two modules that import each other are each an error (import/no-cycle); a module outside the cycle is fine', async () => {
    const results = await eslint.lintFiles([join(probeDir, 'a.ts'), join(probeDir, 'b.ts'), join(probeDir, 'c.ts')]);
    const byFile = Object.fromEntries(results.map((r) => [r.filePath.slice(probeDir.length + 1), r.messages.map((m) => m.ruleId)]));
    expect(byFile).toEqual({ 'a.ts': ['import/no-cycle'], 'b.ts': ['import/no-cycle'], 'c.ts': [] });
  });
});

/**
 * The import rules of ARCHITECTURE.md, checked by scripts/import-graph.ts (`npm run lint:imports`):
 * no import circle of any kind (values, types, re-exports, import()), and src/domain, src/engine and
 * src/operations import nothing from above them. Each rule is first shown to fail on a small tree
 * written for the test, then run on the repository.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { importCircles, importFindings, importGraph, upwardImports } from '../../scripts/import-graph';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

let tree: string | undefined;
afterEach(() => {
  if (tree !== undefined) rmSync(tree, { recursive: true, force: true });
  tree = undefined;
});

/** Writes `files` (path → text) under a fresh folder and returns it. */
function writeTree(files: Readonly<Record<string, string>>): string {
  tree = mkdtempSync(join(tmpdir(), 'kessai-imports-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(tree, path)), { recursive: true });
    writeFileSync(join(tree, path), text);
  }
  return tree;
}

describe('import circles', () => {
  it('a circle through a type-only import is found (ESLint import/no-cycle does not see it)', () => {
    const root = writeTree({
      'src/cli/run.ts': "import type { Options } from './command';\nexport const run = (o: Options): string => o.name;\n",
      'src/cli/command.ts': "export interface Options { name: string }\nexport const load = () => import('./run');\n",
      'src/cli/alone.ts': "import { run } from './run';\nexport const x = run;\n",
    });
    expect(importCircles(importGraph(root))).toEqual([['src/cli/command.ts', 'src/cli/run.ts']]);
  });

  it('a circle of three modules through re-exports is one finding; a tree without one has none', () => {
    const root = writeTree({
      'src/simulation/a.ts': "export { b } from './b';\nexport const a = 1;\n",
      'src/simulation/b.ts': "import { c } from './c';\nexport const b = c;\n",
      'src/simulation/c.ts': "import type { a } from './a';\nexport const c = 2;\nexport type A = typeof a;\n",
    });
    expect(importCircles(importGraph(root))).toEqual([['src/simulation/a.ts', 'src/simulation/b.ts', 'src/simulation/c.ts']]);
    writeFileSync(join(root, 'src/simulation/c.ts'), 'export const c = 2;\n');
    expect(importCircles(importGraph(root))).toEqual([]);
  });
});

describe('upward imports', () => {
  it('src/operations importing the wire or a feature, and src/engine importing a feature, are found', () => {
    const root = writeTree({
      'src/operations/registry.ts': "import { CHARGE_OPERATIONS } from '../api/v1/charges';\nimport type { Caller } from '../accounts/accounts';\nimport { reject } from '../domain/errors';\nexport const all = [CHARGE_OPERATIONS, reject];\nexport type C = Caller;\n",
      'src/engine/context.ts': "import type { WebhookTransport } from '../webhooks/transport';\nimport type { Database } from '../db/schema';\nexport type T = [WebhookTransport, Database];\n",
      'src/domain/money.ts': "import { sql } from '../db/sql';\nexport const s = sql;\n",
      'src/api/v1/charges.ts': 'export const CHARGE_OPERATIONS = [];\n',
      'src/accounts/accounts.ts': 'export interface Caller { id: string }\n',
      'src/domain/errors.ts': 'export const reject = 1;\n',
      'src/webhooks/transport.ts': 'export interface WebhookTransport { send(): void }\n',
      'src/db/schema.ts': 'export interface Database { x: 1 }\n',
      'src/db/sql.ts': 'export const sql = 1;\n',
      // Features may import anything below them: not a finding.
      'src/charges/charges.ts': "import { reject } from '../domain/errors';\nimport type { Database } from '../db/schema';\nexport const r = reject;\nexport type D = Database;\n",
    });
    expect(upwardImports(importGraph(root))).toEqual([
      'src/domain/money.ts → src/db/sql.ts',
      'src/engine/context.ts → src/webhooks/transport.ts',
      'src/operations/registry.ts → src/accounts/accounts.ts',
      'src/operations/registry.ts → src/api/v1/charges.ts',
    ]);
  });
});

describe('this repository', () => {
  it('has no import circle and no upward import', () => {
    const graph = importGraph(repoRoot);
    // The graph is real: the operation table imports the codecs, and the registry below it is found.
    expect(graph.get('src/api/operations.ts')).toContain('src/operations/registry.ts');
    expect(graph.get('src/api/operations.ts')).toContain('src/api/v1/charges.ts');
    expect(importFindings(repoRoot)).toEqual([]);
  });
});

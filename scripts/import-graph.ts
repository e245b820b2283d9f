/**
 * The import graph of src/ and jobs/, and the two rules ARCHITECTURE.md sets on it:
 * - no circle: no module reaches itself through imports. Every kind of import counts — values,
 *   `import type`, `export … from` and `import()` — because a circle of types still makes two
 *   modules that cannot be read, moved or loaded one without the other (ESLint's import/no-cycle
 *   skips type-only imports, so it cannot see those);
 * - dependencies point down: src/domain imports only src/domain; src/engine and src/operations
 *   import only themselves, the database, the domain and the card network port (src/processor) —
 *   nothing from a feature, the wire (src/api), the simulation, the command line or jobs/.
 *
 * `npm run lint:imports` (part of `npm run check`) prints every finding and exits 1 when there is
 * one. test/unit/import-graph.test.ts proves both rules on small trees and runs them on this one.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** Module → the modules it imports, as repository-relative paths with `/`. */
export type ImportGraph = ReadonlyMap<string, readonly string[]>;

/** The folders a lower layer may import from; a module matches the first prefix that fits. */
export const LOWER_LAYERS: readonly { readonly layer: string; readonly mayImport: readonly string[] }[] = [
  { layer: 'src/domain/', mayImport: ['src/domain/'] },
  { layer: 'src/engine/', mayImport: ['src/engine/', 'src/db/', 'src/domain/', 'src/processor/'] },
  { layer: 'src/operations/', mayImport: ['src/operations/', 'src/engine/', 'src/db/', 'src/domain/', 'src/processor/'] },
];

function walk(dir: string, found: string[]): void {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, found);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) found.push(path);
  }
}

function resolveImport(from: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  const base = resolve(dirname(from), specifier);
  for (const candidate of [base, `${base}.ts`, join(base, 'index.ts'), base.replace(/\.js$/, '.ts')]) {
    if (candidate.endsWith('.ts') && existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return undefined;
}

/** The graph of every .ts module under `roots` (folders relative to `repoRoot`). */
export function importGraph(repoRoot: string, roots: readonly string[] = ['src', 'jobs']): ImportGraph {
  const files: string[] = [];
  for (const root of roots) if (existsSync(join(repoRoot, root))) walk(join(repoRoot, root), files);
  const name = (path: string): string => relative(repoRoot, path).split(sep).join('/');
  const graph = new Map<string, string[]>();
  for (const file of files.sort()) {
    // preProcessFile scans every import form: static, type-only, re-exports and import().
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const targets = new Set<string>();
    for (const imported of importedFiles) {
      const target = resolveImport(file, imported.fileName);
      if (target !== undefined && target !== file) targets.add(name(target));
    }
    graph.set(name(file), [...targets].sort());
  }
  return graph;
}

/** Every circle, as the modules of one strongly connected component (Tarjan), sorted. */
export function importCircles(graph: ImportGraph): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter);
    counter += 1;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1) circles.push(component.sort());
    }
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) visit(node);
  return circles.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** Every import from a lower layer into anything it may not import, as `from → to`. */
export function upwardImports(graph: ImportGraph, layers = LOWER_LAYERS): string[] {
  const found: string[] = [];
  for (const [from, targets] of graph) {
    const rule = layers.find((candidate) => from.startsWith(candidate.layer));
    if (rule === undefined) continue;
    for (const to of targets) if (!rule.mayImport.some((allowed) => to.startsWith(allowed))) found.push(`${from} → ${to}`);
  }
  return found.sort();
}

/** The findings of both rules on a tree, one line each; empty when the tree keeps them. */
export function importFindings(repoRoot: string): string[] {
  const graph = importGraph(repoRoot);
  return [
    ...importCircles(graph).map((circle) => `import circle: ${circle.join(' ↔ ')}`),
    ...upwardImports(graph).map((edge) => `upward import: ${edge}`),
  ];
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const findings = importFindings(resolve(dirname(fileURLToPath(import.meta.url)), '..'));
  for (const finding of findings) console.error(finding);
  if (findings.length > 0) process.exit(1);
  console.log('import graph: no circle, no upward import');
}

/**
 * The Node version the README asks for is the one package.json declares and the one the tests run
 * on; the dependencies whose `engines` ask for a later Node (npm warns EBADENGINE) are the ones the
 * README names as running on it anyway — a new one must be looked at and named.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const ROOT = new URL('../../', import.meta.url);
const read = (path: string): string => readFileSync(fileURLToPath(new URL(path, ROOT)), 'utf8');

/** Whether an engines range admits some Node 20 release (each `||` alternative's lowest major). */
function admitsNode20(range: string): boolean {
  return range.split('||').some((alternative) => {
    const lowest = /(\d+)/.exec(alternative);
    return lowest === null || Number(lowest[1]) <= 20;
  });
}

it('README, package.json engines and the running Node agree; every dependency that declares a later Node is named in the README', () => {
  const pkg = JSON.parse(read('package.json')) as { engines: { node: string } };
  const readme = read('README.md');
  expect(pkg.engines.node).toBe('>=20.19');
  expect(readme).toContain('Node 20.19 or newer (`engines` in package.json');
  const [major, minor] = process.versions.node.split('.').map(Number) as [number, number];
  expect(major > 20 || (major === 20 && minor >= 19)).toBe(true);
  const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { version?: string; engines?: { node?: string } | string[] }> };
  const later = Object.entries(lock.packages)
    .filter(([path, entry]) => path !== '' && typeof entry.engines === 'object' && !Array.isArray(entry.engines) && entry.engines.node !== undefined && !admitsNode20(entry.engines.node))
    .map(([path, entry]) => `${path.replace(/^.*node_modules\//, '')} ${entry.version!.split('.').slice(0, 2).join('.')}`);
  expect(later.length).toBeGreaterThan(0);
  for (const name of later) expect(readme, name).toContain(name.replace(/^(\S+) /, '$1 '));
});

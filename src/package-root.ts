/**
 * The folder of kessai's package.json, found from this module's own address: the same answer when
 * the TypeScript source runs (src/…) and when the bundle built from it runs (dist/…, a different
 * depth), so files read at run time (sql/, the scenario schema, the browser scripts, the version)
 * are named from the package root, never by a relative path that holds in only one of the two.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

function findPackageRoot(from: URL): URL {
  for (let dir = new URL('./', from); ; ) {
    if (existsSync(fileURLToPath(new URL('package.json', dir)))) return dir;
    const parent = new URL('../', dir);
    if (parent.href === dir.href) throw new Error(`no package.json above ${fileURLToPath(from)}`);
    dir = parent;
  }
}

/** The package root as a `file:` URL ending in `/`. */
export const PACKAGE_ROOT: URL = findPackageRoot(new URL(import.meta.url));

/** A file of the package by its path from the root (`sql/`, `scripts/scenarios/…`), as a file system path. */
export const packagePath = (relative: string): string => fileURLToPath(new URL(relative, PACKAGE_ROOT));

/**
 * The database a new embedded data folder starts from. PGlite creates a database in an empty
 * folder by running initdb in a second PGlite instance plus initdb's own WebAssembly module, then
 * copying the result over; the migrations follow, statement by statement: well over twice the
 * memory and CPU of opening an existing folder (figures: docs/decisions/operating.md, "A new data
 * folder starts from the build's migrated database"). The build (scripts/build.ts) does all that
 * once, in memory, and keeps the result as a tarball in dist/; a new folder is unpacked from it
 * here, with Node's own file calls (PGlite's `loadDataDir` would write each file through its
 * emulated file system, several times slower), and `migrate` then finds every migration applied.
 *
 * The tarball's name carries the PGlite release that wrote it and a digest of the migrations it
 * holds (names and checksums): after an upgrade without a build, or with sql/ changed since, no
 * file matches and a new folder is made the slow way, by initdb and the migrations.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { packagePath } from '../package-root';
import { readMigrations, type MigrationFile } from './migrate';

/** The installed PGlite's version, from its package.json (which its `exports` do not list). */
export function pgliteVersion(): string {
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  for (let dir = dirname(entry); dir !== dirname(dir); dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (!existsSync(file)) continue;
    const manifest = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
    if (manifest.name === '@electric-sql/pglite' && manifest.version) return manifest.version;
  }
  throw new Error(`no package.json of @electric-sql/pglite above ${entry}`);
}

/** The template's file name in dist/ for a PGlite release and a set of migrations. */
export function pgliteTemplateName(version: string, migrations: readonly MigrationFile[]): string {
  const digest = createHash('sha256');
  for (const file of migrations) digest.update(`${file.name}\0${file.checksum}\0`);
  return `pglite-${version}-${digest.digest('hex').slice(0, 16)}.tar.gz`;
}

/** The template for the installed PGlite and the current sql/ (a file), or undefined when none was built. */
export function pgliteTemplateFile(): string | undefined {
  const file = packagePath(`dist/${pgliteTemplateName(pgliteVersion(), readMigrations())}`);
  return existsSync(file) ? file : undefined;
}

/** The file whose presence makes a folder a database to PGlite (it runs initdb without it). */
export const PG_VERSION_FILE = 'PG_VERSION';

/**
 * Unpacks a template (a gzipped ustar archive of PGlite's data folder: folders and plain files)
 * into `location`. PG_VERSION is written last: a process killed half-way leaves a folder that the
 * next open unpacks again, never a database with files missing.
 */
export function unpackPgliteTemplate(file: string, location: string): void {
  const tar = gunzipSync(readFileSync(file));
  let last: { readonly target: string; readonly contents: Uint8Array } | undefined;
  for (let offset = 0; offset + 512 <= tar.length; ) {
    const header = tar.subarray(offset, offset + 512);
    if (header.every((byte) => byte === 0)) break;
    const field = (start: number, length: number): string => {
      const raw = header.subarray(start, start + length);
      const end = raw.indexOf(0);
      return raw.subarray(0, end < 0 ? length : end).toString('utf8');
    };
    const prefix = field(345, 155);
    const name = `${prefix === '' ? '' : `${prefix}/`}${field(0, 100)}`;
    const size = parseInt(field(124, 12).trim() || '0', 8);
    const type = field(156, 1) || '0';
    const parts = name.split('/').filter((part) => part !== '' && part !== '.');
    if (parts.includes('..') || !Number.isInteger(size)) throw new Error(`${file}: unexpected entry ${JSON.stringify(name)}`);
    const target = join(location, ...parts);
    offset += 512;
    if (type === '5') mkdirSync(target, { recursive: true });
    else if (type === '0') {
      const contents = tar.subarray(offset, offset + size);
      if (parts.join('/') === PG_VERSION_FILE) last = { target, contents };
      else {
        mkdirSync(dirname(target), { recursive: true });
        writeFileSync(target, contents);
      }
    } else throw new Error(`${file}: unexpected entry type ${JSON.stringify(type)} (${name})`);
    offset += Math.ceil(size / 512) * 512;
  }
  if (last === undefined) throw new Error(`${file}: no ${PG_VERSION_FILE} in the template`);
  writeFileSync(last.target, last.contents);
}

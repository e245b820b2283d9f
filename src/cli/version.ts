/** `kessai --version`: the package's version, read from the checkout's own package.json. */
import { readFileSync } from 'node:fs';
import { packagePath } from '../package-root';

export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(packagePath('package.json'), 'utf8')) as { version: string };
  return pkg.version;
}

/**
 * The operator's credentials on disk, beside the data (a composition root: it reads the
 * environment, files and the operating system's randomness):
 * - the operator token: KESSAI_OPERATOR_TOKEN (named by KESSAI_OPERATOR_NAME, default `operator`),
 *   or else one generated on the first start and kept in `<data dir>/operator-token` (mode 0600,
 *   named `local`);
 * - `<data dir>/serve.json` (mode 0600), written by a running `kessai serve` on the embedded
 *   database: its address and a token of its own for this machine's CLI (named `cli`), so the CLI
 *   reaches the operator API while the server holds the data folder. Removed when serve stops.
 * Tokens are never logged or printed.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { newOperatorToken, type NamedToken } from '../api/admin/operator-tokens';

export const OPERATOR_TOKEN_FILE = 'operator-token';
export const SERVE_FILE = 'serve.json';

/** Writes a file only its owner can read (created that way: never readable by others, not even briefly). */
function writePrivate(path: string, text: string): void {
  writeFileSync(path, text, { mode: 0o600 });
  chmodSync(path, 0o600);
}

/** The operator tokens of `kessai serve`, and where a generated one is kept (undefined when configured). */
export function operatorTokensOf(dataDir: string, env: NodeJS.ProcessEnv = process.env): { tokens: NamedToken[]; file?: string } {
  const configured = env.KESSAI_OPERATOR_TOKEN?.trim();
  if (configured) return { tokens: [{ name: env.KESSAI_OPERATOR_NAME?.trim() || 'operator', token: configured }] };
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, OPERATOR_TOKEN_FILE);
  if (!existsSync(file)) writePrivate(file, `${newOperatorToken()}\n`);
  return { tokens: [{ name: 'local', token: readFileSync(file, 'utf8').trim() }], file };
}

export interface ServeFile {
  /** The server's base URL (`http://127.0.0.1:PORT`). */
  readonly url: string;
  readonly pid: number;
  /** The CLI's operator token on this server (name `cli`). */
  readonly token: string;
}

/** Writes serve.json with the CLI's token (made by the caller with newOperatorToken); returns a function that removes the file. */
export function writeServeFile(dataDir: string, url: string, token: string): { remove(): void } {
  const path = join(dataDir, SERVE_FILE);
  writePrivate(path, JSON.stringify({ url, pid: process.pid, token } satisfies ServeFile));
  return {
    remove() {
      try {
        const current = JSON.parse(readFileSync(path, 'utf8')) as ServeFile;
        if (current.pid === process.pid) rmSync(path, { force: true });
      } catch {
        // Gone already, or another server's: nothing to remove.
      }
    },
  };
}

/** The running server of a data folder, when serve.json names a live process. */
export function readServeFile(dataDir: string): ServeFile | undefined {
  const path = join(dataDir, SERVE_FILE);
  if (!existsSync(path)) return undefined;
  try {
    const file = JSON.parse(readFileSync(path, 'utf8')) as ServeFile;
    if (typeof file.url !== 'string' || typeof file.token !== 'string' || !Number.isInteger(file.pid)) return undefined;
    process.kill(file.pid, 0);
    return file;
  } catch {
    return undefined;
  }
}

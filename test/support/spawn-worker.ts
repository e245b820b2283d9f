/**
 * Starts a worker script in its own process, for tests that need real concurrency or a real crash.
 * It runs node itself with tsx's loader — not the tsx binary, which would run the script in a
 * grandchild that a SIGKILL of the child does not reach.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface SpawnedWorker {
  readonly child: ReturnType<typeof spawn>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
  errors(): string;
}

export function spawnWorker(script: string, databaseUrl: string, env: Record<string, string>): SpawnedWorker {
  return spawnNode(['--import', 'tsx', script], { DATABASE_URL: databaseUrl, ...env });
}

const KESSAI_BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));

/** The real `kessai` command (bin/kessai.mjs, which loads tsx itself) in its own process. */
export function spawnKessai(args: readonly string[], env: Record<string, string>): SpawnedWorker {
  return spawnNode([KESSAI_BIN, ...args], env);
}

function spawnNode(args: readonly string[], env: Record<string, string>): SpawnedWorker {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { child, exited, output: () => stdout, errors: () => stderr };
}

/**
 * Starts a worker script in its own process, for tests that need real concurrency or a real crash.
 * It runs node itself with tsx's loader — not the tsx binary, which would run the script in a
 * grandchild that a SIGKILL of the child does not reach.
 */
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
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

const CLOCK_AHEAD = fileURLToPath(new URL('./clock-ahead.mjs', import.meta.url));

/** The real `kessai` command (bin/kessai.mjs, which runs the build in dist/) in its own process. */
export function spawnKessai(args: readonly string[], env: Record<string, string>, options: SpawnOptions = {}): SpawnedWorker {
  if (options.clockAheadMs === undefined) return spawnNode([...(options.nodeArgs ?? []), KESSAI_BIN, ...args], env, options);
  return spawnNode([...(options.nodeArgs ?? []), '--import', CLOCK_AHEAD, KESSAI_BIN, ...args], { ...env, KESSAI_TEST_CLOCK_AHEAD_MS: String(options.clockAheadMs) }, options);
}

/**
 * Resolves once `ready` holds — state the test observes: the process's output, rows written, a
 * receiver's requests — checked every 10 ms; rejects if the process exits first.
 */
export async function until(proc: SpawnedWorker, ready: () => boolean | Promise<boolean>): Promise<void> {
  for (;;) {
    if (await ready()) return;
    if (proc.child.exitCode !== null || proc.child.signalCode !== null) {
      throw new Error(`exited (${proc.child.exitCode ?? proc.child.signalCode}) before it was ready:\n${proc.output()}\n${proc.errors()}`);
    }
    await sleep(10);
  }
}

export interface SpawnOptions {
  /** Discard the process's stderr (its logs) instead of keeping it for `errors()`: a benchmark's server. */
  readonly discardLogs?: boolean;
  /** Options for node itself, before the script (`--cpu-prof`, which NODE_OPTIONS does not take on Node 20). */
  readonly nodeArgs?: readonly string[];
  /**
   * Runs the process's wall clock this far ahead of the machine's (clock-ahead.mjs): it acts as a
   * process started that much later, e.g. once a killed worker's real-time leases have lapsed.
   */
  readonly clockAheadMs?: number;
  /** The working directory of the process (default: the test's). */
  readonly cwd?: string;
}

function spawnNode(args: readonly string[], env: Record<string, string>, options: SpawnOptions = {}): SpawnedWorker {
  return spawnCollecting(process.execPath, args, env, options);
}

/**
 * A command line run by bash as a user would paste it (one simple command, which bash runs in its
 * own place, so a signal reaches the command itself). An `undefined` in `env` unsets that variable.
 */
export function spawnShell(commandLine: string, env: Record<string, string | undefined>, options: SpawnOptions = {}): SpawnedWorker {
  return spawnCollecting('bash', ['-c', commandLine], env, options);
}

function spawnCollecting(command: string, args: readonly string[], env: Record<string, string | undefined>, options: SpawnOptions): SpawnedWorker {
  const merged = Object.fromEntries(Object.entries({ ...process.env, ...env }).filter((entry): entry is [string, string] => entry[1] !== undefined));
  const child = spawn(command, args, { cwd: options.cwd, env: merged, stdio: ['ignore', 'pipe', options.discardLogs ? 'ignore' : 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { child, exited, output: () => stdout, errors: () => stderr };
}

/**
 * `kessai serve --port 0` (and `args`) in its own process, resolved with its `/v1` base URL once
 * it prints it; rejected if it exits first.
 */
export async function startServe(args: readonly string[], env: Record<string, string>, options: SpawnOptions = {}): Promise<{ readonly server: SpawnedWorker; readonly apibase: string }> {
  const server = spawnKessai(['serve', '--port', '0', ...args], env, options);
  const apibase = await new Promise<string>((resolve, reject) => {
    const look = () => {
      const match = /kessai v1 API on (https?:\/\/\S+\/v1) /.exec(server.output());
      if (match) resolve(match[1]!);
    };
    server.child.stdout!.on('data', look);
    void server.exited.then(({ code, signal }) => reject(new Error(`kessai serve exited (${code ?? signal}) before listening: ${server.errors()}`)));
  });
  return { server, apibase };
}

/**
 * `kessai serve`: the v1 and v2 HTTP API (src/api/server.ts) on PostgreSQL when DATABASE_URL is
 * set, on the embedded database otherwise, where this process owns the data and also runs the
 * worker's scheduler (`--no-worker` turns it off). Options, help and the checks that need nothing
 * loaded; what it runs is serve-run.ts, loaded once they pass.
 */
import { createServer, isIP } from 'node:net';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { RATE_LIMIT_PROFILE_NAMES } from '../api/rate-limit-profiles';
import type { GlobalOptions } from './command-runtime';
import type { ServeOptions } from './serve-run';

function portArg(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65_535) throw new InvalidArgumentError(`expected a port from 0 to 65535, got ${JSON.stringify(value)}`);
  return n;
}

function secondsArg(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 3_600) throw new InvalidArgumentError(`expected a whole number of seconds from 1 to 3600, got ${JSON.stringify(value)}`);
  return n;
}

function bytesArg(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1_024) throw new InvalidArgumentError(`expected a whole number of bytes, at least 1024, got ${JSON.stringify(value)}`);
  return n;
}

/** Loopback addresses: the only ones served without TLS unless --insecure-http says so (v1 §5). */
export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

/**
 * Whether `host:port` can be listened on, asked of the operating system before the HTTP stack and
 * the database are loaded: a port in use is one line within a fraction of a second, not after the
 * whole start-up. (Another process may still take the port before the server listens; the
 * server's own listen then reports it.)
 */
export async function assertPortFree(host: string, port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE') reject(new Error(`port ${port} on ${host} is in use (another kessai serve?): stop that process or choose another --port`));
      else if (error.code === 'EACCES') reject(new Error(`not allowed to listen on port ${port} on ${host}: choose a port above 1023 with --port`));
      else if (error.code === 'EADDRNOTAVAIL') reject(new Error(`cannot listen on ${host}: no such address on this machine (--host)`));
      else reject(error);
    });
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('serve the v1 HTTP API (and, on the embedded database, run the worker in the same process)')
    .option('--port <n>', 'TCP port', portArg, 4010)
    .option('--host <address>', 'address to bind', '127.0.0.1')
    .option('--no-worker', 'on the embedded database: do not run the scheduler in this process')
    .option('--cert <file>', 'TLS certificate (PEM): serve HTTPS')
    .option('--key <file>', 'TLS private key (PEM)')
    .option('--insecure-http', 'allow plain HTTP on a non-loopback address')
    .option('--public-url <url>', 'the address buyers reach this server at (hosted checkout page URLs; default KESSAI_PUBLIC_URL, else the address each request came to)')
    .option('--body-limit <bytes>', 'largest request body accepted (default 65536)', bytesArg)
    .option('--metrics-port <n>', 'also serve Prometheus metrics at /metrics on this port, without the operator token (they are always at /metrics here with it)', portArg)
    .option('--metrics-host <address>', 'address of --metrics-port', '127.0.0.1')
    .option('--request-timeout <seconds>', 'longest time a client may take to send a whole request, headers and body; its headers get at most 10 s (default 30)', secondsArg)
    .addOption(
      new Option('--rate-limits <profile>', 'rate-limit profile: spec (v1 §8\'s values; the default on PostgreSQL) or development (1,000 requests/s a zone; the default on the embedded database); KESSAI_RATE_LIMITS refines either')
        .choices(RATE_LIMIT_PROFILE_NAMES)
        .env('KESSAI_RATE_LIMIT_PROFILE'),
    )
    .action(async (options: ServeOptions, command: Command) => {
      if ((options.cert === undefined) !== (options.key === undefined)) throw new Error('--cert and --key go together');
      const tls = options.cert !== undefined && options.key !== undefined;
      if (!tls && !isLoopback(options.host) && !options.insecureHttp) {
        throw new Error(`binding ${options.host} without TLS: give --cert and --key (all traffic must use HTTPS, v1 §5), or --insecure-http behind a TLS proxy`);
      }
      // Before anything slow (the HTTP stack, the database): a port in use is said at once.
      if (options.port !== 0) await assertPortFree(options.host, options.port);
      const { runServe } = await import('./serve-run');
      await runServe(options, command.optsWithGlobals() as GlobalOptions);
    });
}

/**
 * Which database the tests run on, in this order of choice:
 * 1. `DATABASE_URL` — a PostgreSQL server you point at (CI points it at the local server);
 * 2. testcontainers — a throwaway PostgreSQL container, when a container runtime answers;
 * 3. PGlite — embedded PostgreSQL, in memory, when neither is there.
 * Each test file then gets its own database (see database.ts).
 */
import { existsSync } from 'node:fs';
import { request } from 'node:http';

export type TestBackend = { readonly kind: 'postgres'; readonly serverUrl: string; readonly source: 'DATABASE_URL' | 'testcontainers' } | { readonly kind: 'pglite' };

declare module 'vitest' {
  export interface ProvidedContext {
    kessaiBackend: TestBackend;
    kessaiTemplate: string | null;
  }
}

/** True when a Docker-compatible engine answers its ping within a second; never waits longer. */
export async function containerRuntimeAnswers(): Promise<boolean> {
  const host = process.env.DOCKER_HOST;
  const socketPath = host?.startsWith('unix://') ? host.slice('unix://'.length) : host ? undefined : '/var/run/docker.sock';
  if (socketPath === undefined) return host !== undefined; // a TCP DOCKER_HOST: let testcontainers try it
  if (!existsSync(socketPath)) return false;
  return new Promise((resolve) => {
    const req = request({ socketPath, path: '/_ping', method: 'GET', timeout: 1_000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => {
      req.destroy();
      resolve(false);
    });
    req.on('error', () => resolve(false));
    req.end();
  });
}

/** The same URL with another database name. */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/**
 * What the PostgreSQL benchmarks share: the server they make scratch databases on, an admin
 * connection to it, and how they print.
 */
import pg from 'pg';

/** The server of DATABASE_URL, or the local one (user postgres). */
export const SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** The same server URL naming another database. */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** Runs `work` on a fresh connection to the server (CREATE / DROP DATABASE …), closed afterwards. */
export async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: SERVER });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

export const seconds = (ms: number): string => (ms / 1000).toFixed(2);
export const log = (line: string): void => void process.stdout.write(`${line}\n`);

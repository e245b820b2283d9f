/**
 * A gate for "a request with this Idempotency-Key is waiting for the one in flight": the server's
 * database handle, watched, resolves `waiting` once a request through it has read the key's row
 * as `pending` (the idempotency plugin then polls it). A test sends the retry, awaits `waiting`,
 * and only then lets the first request finish, so the retry is known to have waited.
 */
import type { Kysely, KyselyPlugin, PluginTransformResultArgs, QueryResult, UnknownRow } from 'kysely';
import type { Database } from '../../src/db/schema';

export interface PendingKeyWatch {
  readonly db: Kysely<Database>;
  /** Resolves once a read through `db` found an idempotency key's row `pending`. */
  readonly waiting: Promise<void>;
}

export function watchPendingKeys(db: Kysely<Database>): PendingKeyWatch {
  let seen!: () => void;
  const waiting = new Promise<void>((resolve) => (seen = resolve));
  const plugin: KyselyPlugin = {
    transformQuery: (args) => args.node,
    transformResult: async (args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> => {
      if (args.result.rows.some((row) => 'request_hash' in row && row.state === 'pending')) seen();
      return args.result;
    },
  };
  return { db: db.withPlugin(plugin), waiting };
}

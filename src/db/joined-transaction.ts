/**
 * A `Kysely` that runs everything inside one open transaction: plain statements run in it as they
 * are, and each `transaction().execute(body)` becomes a savepoint of it (released when `body`
 * returns, rolled back to when it throws). Code written against `ctx.db` (its own transactions,
 * its own commits) runs unchanged, and the outer transaction decides at the end whether any of it
 * is kept: the Idempotency-Key handling (src/api/idempotency.ts) commits an operation's writes
 * and its stored response together this way.
 *
 * The savepoint blocks run one after another (a block waits for the one before it), as two
 * transactions on the embedded database's one connection do. Isolation levels and access modes
 * belong to the outer transaction: asking for one in a block is refused.
 */
import { sql, type Kysely, type Transaction } from 'kysely';

/** A joined transaction whose outer transaction may be replaced between blocks (a checkpoint). */
export interface JoinedTransaction<DB> {
  /** The `Kysely` operations run on: statements and blocks go to the current outer transaction. */
  readonly db: Kysely<DB>;
  /** Blocks started (queued or running) and not yet ended: while any is, the outer transaction must not change. */
  blocksOpen(): number;
}

export function joinedTransaction<DB>(outer: Transaction<DB>): Kysely<DB> {
  return joinTransaction(() => outer).db;
}

/**
 * joinedTransaction over `current()`, read at every statement and at the start of every block: the
 * Idempotency-Key handling commits the outer transaction at a card-network call and goes on in a
 * new one (src/api/idempotency.ts, "checkpoint at the network"), which it may do only while
 * `blocksOpen()` is 0.
 */
export function joinTransaction<DB>(current: () => Transaction<DB>): JoinedTransaction<DB> {
  let savepoints = 0;
  let open = 0;
  let previous: Promise<unknown> = Promise.resolve();
  const execute = async <T>(body: (trx: Transaction<DB>) => Promise<T>): Promise<T> => {
    open += 1;
    const turn = previous.then(async () => {
      const outer = current();
      const name = `kessai_sp_${(savepoints += 1)}`;
      await sql.raw(`SAVEPOINT ${name}`).execute(outer);
      let result: T;
      try {
        result = await body(outer);
      } catch (error) {
        await sql.raw(`ROLLBACK TO SAVEPOINT ${name}`).execute(outer);
        throw error;
      }
      await sql.raw(`RELEASE SAVEPOINT ${name}`).execute(outer);
      return result;
    });
    const ended = turn.finally(() => {
      open -= 1;
    });
    previous = ended.catch(() => undefined);
    return ended;
  };
  const refuse = (what: string) => () => {
    throw new Error(`${what} is the joined outer transaction's; a block inside it cannot set its own`);
  };
  const builder = { execute, setIsolationLevel: refuse('the isolation level'), setAccessMode: refuse('the access mode') };
  // The target is a placeholder: every property is read from the current outer transaction.
  const db = new Proxy({}, {
    get(_placeholder, property) {
      if (property === 'transaction') return () => builder;
      const target = current();
      const value: unknown = Reflect.get(target, property, target);
      // Kysely's classes keep their state in private fields: methods run on the target itself.
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  }) as unknown as Kysely<DB>;
  return { db, blocksOpen: () => open };
}

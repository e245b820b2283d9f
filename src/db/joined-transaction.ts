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

export function joinedTransaction<DB>(outer: Transaction<DB>): Kysely<DB> {
  let savepoints = 0;
  let previous: Promise<unknown> = Promise.resolve();
  const execute = async <T>(body: (trx: Transaction<DB>) => Promise<T>): Promise<T> => {
    const turn = previous.then(async () => {
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
    previous = turn.catch(() => undefined);
    return turn;
  };
  const refuse = (what: string) => () => {
    throw new Error(`${what} is the joined outer transaction's; a block inside it cannot set its own`);
  };
  const builder = { execute, setIsolationLevel: refuse('the isolation level'), setAccessMode: refuse('the access mode') };
  return new Proxy(outer, {
    get(target, property) {
      if (property === 'transaction') return () => builder;
      const value: unknown = Reflect.get(target, property, target);
      // Kysely's classes keep their state in private fields: methods run on the target itself.
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  }) as unknown as Kysely<DB>;
}

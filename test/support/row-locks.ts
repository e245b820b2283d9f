/**
 * The "no row lock over the card network" probe (ARCHITECTURE.md: network I/O never happens while
 * rows are locked): from another connection, `SELECT … FOR UPDATE NOWAIT` on one row, in a
 * transaction of its own that is rolled back. PostgreSQL only: PGlite is one session.
 *
 * The probe answers only about a row that exists (a probe of no row would read as "free" and
 * prove nothing), and `whileLocked` lets each test file show first that the probe says "locked"
 * when a row is held, so that its "free" means something.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../src/db/schema';

/** A row to probe: its table and the columns that name it (the account's id among them). */
export interface ProbedRow {
  readonly table: keyof Database & string;
  readonly key: Readonly<Record<string, string | boolean>>;
}

export interface RowLockProbe {
  /** `free`: the probe got the lock; `locked`: 55P03 lock_not_available, another transaction holds it. */
  readonly lock: 'free' | 'locked';
  /** The row as committed at that moment (only when the probe got the lock). */
  readonly row: Record<string, unknown> | undefined;
}

class NoRowToProbe extends Error {}

/** 55P03 lock_not_available. */
const LOCK_NOT_AVAILABLE = '55P03';

function where(row: ProbedRow) {
  return sql.join(
    Object.entries(row.key).map(([column, value]) => sql`${sql.ref(column)} = ${value}`),
    sql` AND `,
  );
}

/** From `prober` (another connection than the code under test): can the row be locked right now? Throws when the row does not exist. */
export async function probeRowLock(prober: Kysely<Database>, row: ProbedRow): Promise<RowLockProbe> {
  try {
    return await prober.transaction().execute(async (trx) => {
      const { rows } = await sql<Record<string, unknown>>`SELECT * FROM ${sql.table(row.table)} WHERE ${where(row)} FOR UPDATE NOWAIT`.execute(trx);
      if (rows.length !== 1) throw new NoRowToProbe(`${rows.length} rows of ${row.table} where ${JSON.stringify(row.key)}: the probe needs exactly one`);
      return { lock: 'free' as const, row: rows[0] };
    });
  } catch (error) {
    if ((error as { code?: unknown }).code === LOCK_NOT_AVAILABLE) return { lock: 'locked', row: undefined };
    throw error;
  }
}

/** Runs `work` while `holder` (another connection than the prober) holds the row FOR UPDATE: the probe's control. */
export async function whileLocked<T>(holder: Kysely<Database>, row: ProbedRow, work: () => Promise<T>): Promise<T> {
  return holder.transaction().execute(async (trx) => {
    const { rows } = await sql`SELECT 1 FROM ${sql.table(row.table)} WHERE ${where(row)} FOR UPDATE`.execute(trx);
    if (rows.length !== 1) throw new NoRowToProbe(`${rows.length} rows of ${row.table} where ${JSON.stringify(row.key)}: the control needs exactly one`);
    return work();
  });
}

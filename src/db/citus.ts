/**
 * kessai on Citus (distributed PostgreSQL): every table of account data is distributed by
 * account_id, colocated with `accounts`, so one account's rows of every table live on one shard;
 * the engine-wide tables (the run ledger, the schedule, the migration log) stay local on the
 * coordinator. The list of account tables is read from the catalogue (every base table with an
 * account_id column), so tables that later migrations add are distributed by the next
 * `kessai migrate --citus` without anyone listing them.
 */
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { redactUrl, type Store } from './connect';
import type { Database } from './schema';

/** Arbitrary, fixed: the advisory lock key that serialises distributors (migrate.ts uses another). */
const DISTRIBUTE_LOCK_KEY = 7_305_102;

export class CitusError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'CitusError';
  }
}

export interface DistributeResult {
  /** Tables distributed by this call, `accounts` first. */
  readonly distributed: readonly string[];
  /** Account tables that were distributed already. */
  readonly alreadyDistributed: number;
  /** Tables left local on the coordinator (no account_id column). */
  readonly local: readonly string[];
}

/** Whether the database has the citus extension (a Citus coordinator's database). */
export async function hasCitus(store: Store): Promise<boolean> {
  return store.kind === 'postgres' && (await citusInstalled(store.db));
}

/** Whether the database has the citus extension. */
export async function citusInstalled(db: Kysely<Database>): Promise<boolean> {
  const result = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_extension WHERE extname = 'citus'`.execute(db);
  return result.rows[0]!.n > 0;
}

/** Refuses a database without the citus extension, saying what to do. */
export async function assertCitus(store: Store): Promise<void> {
  if (await hasCitus(store)) return;
  throw new CitusError(
    `--citus: the citus extension is not installed in ${store.location}; on the coordinator run CREATE EXTENSION citus and add the workers (citus_add_node) first`,
  );
}

/**
 * Distributes every account table not yet distributed (`accounts` first, then the others
 * colocated with it). Each create_distributed_table runs in its own transaction, after the
 * migrations have committed (Citus refuses to distribute a table written earlier in the same
 * transaction), under an advisory lock so that concurrent migrators do it once.
 */
export async function distributeAccountTables(store: Store): Promise<DistributeResult> {
  await assertCitus(store);
  return store.db.connection().execute(async (session) => {
    await sql`SELECT pg_advisory_lock(${DISTRIBUTE_LOCK_KEY})`.execute(session);
    try {
      const tables = await sql<{ table_name: string; account_data: boolean; distributed: boolean }>`
        SELECT t.table_name,
          EXISTS (SELECT 1 FROM information_schema.columns c WHERE c.table_schema = t.table_schema AND c.table_name = t.table_name AND c.column_name = 'account_id') AS account_data,
          EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = format('%I.%I', t.table_schema, t.table_name)::regclass) AS distributed
        FROM information_schema.tables t
        WHERE t.table_schema = 'public' AND t.table_type = 'BASE TABLE'
        ORDER BY t.table_name <> 'accounts', t.table_name`.execute(session);
      const accountTables = tables.rows.filter((t) => t.account_data);
      if (!accountTables.some((t) => t.table_name === 'accounts')) throw new CitusError('--citus: no accounts table: run the migrations first');
      const distributed: string[] = [];
      for (const { table_name: table, distributed: done } of accountTables) {
        if (done) continue;
        try {
          if (table === 'accounts') await sql`SELECT create_distributed_table('accounts', 'account_id')`.execute(session);
          else await sql`SELECT create_distributed_table(${table}::regclass, 'account_id', colocate_with => 'accounts')`.execute(session);
        } catch (error) {
          throw new CitusError(`--citus: distributing ${table} failed: ${(error as Error).message}`, { cause: error });
        }
        distributed.push(table);
      }
      return {
        distributed,
        alreadyDistributed: accountTables.length - distributed.length,
        local: [...tables.rows.filter((t) => !t.account_data).map((t) => t.table_name)],
      };
    } finally {
      await sql`SELECT pg_advisory_unlock(${DISTRIBUTE_LOCK_KEY})`.execute(session);
    }
  });
}

/** A node of the Citus cluster, as the coordinator's metadata names it. */
interface CitusNode {
  readonly nodename: string;
  readonly nodeport: number;
  readonly coordinator: boolean;
}

/** The nodes of the cluster whose coordinator `client` is connected to; none when that database has no citus. */
export async function citusNodes(client: pg.Client): Promise<CitusNode[]> {
  const has = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_extension WHERE extname = 'citus'`);
  if (has.rows[0]!.n === 0) return [];
  const nodes = await client.query<CitusNode>(
    `SELECT nodename, nodeport, groupid = 0 AS coordinator FROM pg_dist_node WHERE noderole = 'primary' AND isactive ORDER BY groupid, nodeid`,
  );
  return nodes.rows;
}

/**
 * Makes a database just created on a Citus coordinator (with citus.enable_create_database_propagation,
 * so the workers have it too) a Citus database with the same nodes: the extension on every node,
 * the coordinator's address and the workers registered. `url` names the new database; other nodes
 * are reached with its user and password at their own host and port.
 */
export async function joinCitusCluster(url: string, nodes: readonly CitusNode[]): Promise<void> {
  const nodeUrl = (node: CitusNode) => {
    const target = new URL(url);
    target.hostname = node.nodename;
    target.port = String(node.nodeport);
    return target.toString();
  };
  const run = async (connectionString: string, statements: readonly [string, unknown[]?][]) => {
    const client = new pg.Client({ connectionString });
    await client.connect().catch((error: unknown) => {
      throw new CitusError(`cannot connect to the Citus node ${redactUrl(connectionString)}: ${(error as Error).message}`, { cause: error });
    });
    try {
      for (const [text, values] of statements) await client.query(text, values);
    } finally {
      await client.end();
    }
  };
  const workers = nodes.filter((node) => !node.coordinator);
  // The extension must exist in the worker's copy of the database before the worker is added.
  for (const worker of workers) await run(nodeUrl(worker), [['CREATE EXTENSION IF NOT EXISTS citus']]);
  const coordinator = nodes.find((node) => node.coordinator);
  await run(url, [
    ['CREATE EXTENSION IF NOT EXISTS citus'],
    ...(coordinator ? [['SELECT citus_set_coordinator_host($1, $2)', [coordinator.nodename, coordinator.nodeport]] as [string, unknown[]]] : []),
    ...workers.map((worker) => ['SELECT citus_add_node($1, $2)', [worker.nodename, worker.nodeport]] as [string, unknown[]]),
  ]);
}

/**
 * The shard of each account (of `accounts`, with which every account table is colocated) when
 * the database is a Citus coordinator's, else null (plain PostgreSQL: one server holds them all).
 * Evaluated on the coordinator from its metadata; reads no account data.
 */
export async function accountShards(db: Kysely<Database>, accountIds: readonly string[]): Promise<Map<string, string> | null> {
  if (!(await citusInstalled(db))) return null;
  const result = await sql<{ account_id: string; shard: string }>`
    SELECT x AS account_id, get_shard_id_for_distribution_column('accounts', x)::text AS shard FROM unnest(${accountIds}::text[]) AS x`.execute(db);
  return new Map(result.rows.map((row) => [row.account_id, row.shard]));
}

/**
 * The known accounts by the worker node that holds their shard, when the database is a Citus
 * coordinator's, else null. Read on the coordinator only (its local `api_key_directory`, where every
 * account has its keys, and the shard metadata), so it answers while a worker node is down.
 */
export async function accountsByNode(db: Kysely<Database>): Promise<string[][] | null> {
  if (!(await citusInstalled(db))) return null;
  const result = await sql<{ accounts: string[] }>`
    SELECT array_agg(k.account ORDER BY k.account) AS accounts
    FROM (SELECT DISTINCT account FROM api_key_directory) k
    JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column('accounts', k.account)
    JOIN pg_dist_node n ON n.groupid = p.groupid
    GROUP BY n.nodename, n.nodeport ORDER BY n.nodename, n.nodeport`.execute(db);
  return result.rows.map((row) => row.accounts);
}

/**
 * Drops a scratch database this process created (a simulation's, a benchmark's), on a Citus
 * coordinator (`citus` true) with the DROP propagated to the workers. There the workers' sessions
 * of a just-closed pool end a moment after it closes, and the DROP Citus sends them can find one
 * still there (object_in_use, 55006): tried again, up to ten times half a second apart.
 */
export async function dropScratchDatabase(client: pg.Client, name: string, citus: boolean): Promise<void> {
  if (citus) await client.query('SET citus.enable_create_database_propagation = on');
  for (let attempt = 1; ; attempt += 1) {
    try {
      await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      return;
    } catch (error) {
      if (!citus || attempt === 10 || (error as { code?: string }).code !== '55006') throw error;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

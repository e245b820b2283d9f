/**
 * Whether a store's database is a Citus coordinator's, as the statements that write several
 * tables at once choose their shape by it (docs/decisions/citus.md, "One-phase commits"): on Citus
 * a request's or a batch's writes must each be routed whole to the account's node, so they go as
 * separate statements (an `INSERT` in a common table expression is copied through the coordinator
 * and commits in two phases); on a single PostgreSQL the same writes are one set-based statement,
 * one round trip. `openStore` marks a PostgreSQL store whose database has the citus extension; the
 * mark is a Kysely plugin, so every transaction and connection of the store carries it.
 */
import type { Kysely, KyselyPlugin, PluginTransformQueryArgs, PluginTransformResultArgs, QueryResult, RootOperationNode, UnknownRow } from 'kysely';

/** The mark of a store on a Citus coordinator: changes no query. */
export class CitusStore implements KyselyPlugin {
  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    return args.node;
  }

  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return args.result;
  }
}

/**
 * Whether writes through `executor` must be routed whole statement by statement (a Citus
 * coordinator's store) rather than combined into one statement (a single PostgreSQL or PGlite).
 * The one place that choice is made.
 */
export function routedWhole<DB>(executor: Kysely<DB>): boolean {
  return executor.getExecutor().plugins.some((plugin) => plugin instanceof CitusStore);
}

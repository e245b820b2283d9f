/**
 * Statements on account data name one account (`account_id = $1`, a bound constant): on Citus,
 * where account tables are distributed by account_id, such a statement is routed whole to the one
 * shard holding that account, so any SQL runs there (row locks, LATERAL … LIMIT/OFFSET probes).
 * A statement over rows of several accounts is split by account first. The jobs' batches and the
 * API's requests hold one account each, so this is one statement in practice.
 */

/** The items grouped by account, in order of first appearance; each group keeps the items' order. */
export function groupByAccount<T>(items: readonly T[], accountOf: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const accountId = accountOf(item);
    const group = groups.get(accountId);
    if (group === undefined) groups.set(accountId, [item]);
    else group.push(item);
  }
  return groups;
}

/** Runs `query` once per account of `items` (one after the other, on the caller's session) and concatenates the rows. */
export async function perAccount<T, R>(items: readonly T[], accountOf: (item: T) => string, query: (accountId: string, items: readonly T[]) => Promise<readonly R[]>): Promise<R[]> {
  const rows: R[] = [];
  for (const [accountId, group] of groupByAccount(items, accountOf)) rows.push(...(await query(accountId, group)));
  return rows;
}

/** The one account of `items` (at least one), for a statement that binds it; more than one is a programming error. */
export function onlyAccount<T>(items: readonly T[], accountOf: (item: T) => string): string {
  const accountId = accountOf(items[0]!);
  if (items.some((item) => accountOf(item) !== accountId)) throw new Error(`rows of several accounts in one account-scoped statement (${accountId} and others)`);
  return accountId;
}

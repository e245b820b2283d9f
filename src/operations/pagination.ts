/**
 * v1 pagination (§4.1) and the list object (§2.8), shared by every v1 list operation.
 */
import { sql, type SelectQueryBuilder } from 'kysely';
import { fromUnixSeconds } from '../domain/time';
import { optionalInteger, type Params } from './params';

export const PAGINATION_PARAMS = ['limit', 'offset', 'since', 'until'] as const;

export const DEFAULT_LIMIT = 10;
export const MAX_LIMIT = 100;

/** One page of a list, read from `limit`, `offset`, `since`, `until`. */
export interface Page {
  readonly limit: number;
  readonly offset: number;
  /** Objects created at or after this instant. */
  readonly createdFrom: Date | undefined;
  /**
   * Objects created strictly before this instant: `until` is inclusive in whole seconds ("created
   * at or before"), and stored instants carry milliseconds, so `until=T` admits all of second T.
   */
  readonly createdBefore: Date | undefined;
}

/** The default page of a child list inside its parent (v1 §2.8: limit 10, offset 0). */
export const CHILD_LIST_PAGE: Page = { limit: DEFAULT_LIMIT, offset: 0, createdFrom: undefined, createdBefore: undefined };

/**
 * Reads the pagination parameters. `limit` outside 1..100 or a negative `offset` is
 * `invalid_querystring` (list parameters travel in the query string, and the catalogue has no more
 * specific code); `since`/`until` that are not UNIX seconds are `invalid_timestamp`.
 */
export function readPage(params: Params): Page {
  const limit = optionalInteger(params, 'limit', { min: 1, max: MAX_LIMIT, code: 'invalid_querystring' }) ?? DEFAULT_LIMIT;
  const offset = optionalInteger(params, 'offset', { min: 0, code: 'invalid_querystring' }) ?? 0;
  const since = optionalInteger(params, 'since', { min: 0, code: 'invalid_timestamp' });
  const until = optionalInteger(params, 'until', { min: 0, code: 'invalid_timestamp' });
  return {
    limit,
    offset,
    createdFrom: since === undefined ? undefined : fromUnixSeconds(since),
    createdBefore: until === undefined ? undefined : fromUnixSeconds(until + 1),
  };
}

export interface ListObject<T> {
  readonly object: 'list';
  readonly count: number;
  readonly data: readonly T[];
  readonly has_more: boolean;
  readonly url: string;
}

/**
 * The list object from rows fetched with `limit + 1`: the extra row only says there is more
 * (`has_more`) and is not returned.
 */
export function listObject<T>(fetched: readonly T[], page: Pick<Page, 'limit'>, url: string): ListObject<T> {
  const data = fetched.slice(0, page.limit);
  return { object: 'list', count: data.length, data, has_more: fetched.length > page.limit, url };
}

/**
 * Applies a page to a list query of one resource table: the `since`/`until` window on
 * `created_at`, newest first with the id (descending) breaking ties, the offset, and one row past
 * the limit so that `listObject` can tell `has_more`. Use with `.$call(inPage(page, 'plan_id'))`.
 */
export function inPage(page: Page, idColumn: string) {
  return <DB, TB extends keyof DB, O>(query: SelectQueryBuilder<DB, TB, O>): SelectQueryBuilder<DB, TB, O> =>
    query
      .$if(page.createdFrom !== undefined, (q) => q.where(sql.ref('created_at'), '>=', page.createdFrom!))
      .$if(page.createdBefore !== undefined, (q) => q.where(sql.ref('created_at'), '<', page.createdBefore!))
      .orderBy(sql.ref('created_at'), 'desc')
      .orderBy(sql.ref(idColumn), 'desc')
      .offset(page.offset)
      .limit(page.limit + 1);
}

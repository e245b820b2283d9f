/**
 * v2 cursor lists (service rules §3; official-sdks.md §1 "Lists"): `{ object: "list", url,
 * has_more, data }`, `limit` 1..100 (default 10), `starting_after` / `ending_before` naming an
 * object of the list. Shared by every v2 list operation, as pagination.ts is by the v1 ones.
 */
import { sql, type SelectQueryBuilder } from 'kysely';
import { reject } from '../domain/errors';
import { optionalInteger, optionalString, type Params } from './params';

export const V2_PAGINATION_PARAMS = ['limit', 'starting_after', 'ending_before'] as const;
export const V2_DEFAULT_LIMIT = 10;
export const V2_MAX_LIMIT = 100;

/** The v2 list object. */
export interface V2List<T> {
  readonly object: 'list';
  readonly url: string;
  readonly has_more: boolean;
  readonly data: readonly T[];
}

export interface V2Page {
  readonly limit: number;
  /** The cursor id and the parameter that named it; undefined for the first page. */
  readonly cursor: { readonly id: string; readonly param: 'starting_after' | 'ending_before' } | undefined;
}

/** Reads `limit`, `starting_after`, `ending_before` (not both: `invalid_querystring` on `ending_before`). */
export function readV2Page(params: Params): V2Page {
  const limit = optionalInteger(params, 'limit', { min: 1, max: V2_MAX_LIMIT, code: 'invalid_querystring' }) ?? V2_DEFAULT_LIMIT;
  const after = optionalString(params, 'starting_after', { code: 'invalid_querystring' });
  const before = optionalString(params, 'ending_before', { code: 'invalid_querystring' });
  if (after !== undefined && before !== undefined) reject('invalid_querystring', 'ending_before', 'give starting_after or ending_before, not both');
  if (after !== undefined) return { limit, cursor: { id: after, param: 'starting_after' } };
  if (before !== undefined) return { limit, cursor: { id: before, param: 'ending_before' } };
  return { limit, cursor: undefined };
}

/** Where the cursor object sits in the order: found by the list's own finder (an unknown id is its `invalid_id` on the cursor's parameter). */
export interface CursorRow {
  readonly created_at: Date;
  /** The tie-break column's value: the object id, or an insertion sequence (events). */
  readonly id: string | number;
}

/**
 * Applies a page to a list query of one resource table: newest first (`created_at`, then the id,
 * descending), the rows after (or, for `ending_before`, before) the cursor, one row past the limit
 * so that `v2ListObject` can tell `has_more`. Use with `.$call(inV2Page(page, cursor, 'product_id'))`.
 */
export function inV2Page(page: V2Page, cursor: CursorRow | undefined, idColumn: string) {
  const ascending = page.cursor?.param === 'ending_before';
  return <DB, TB extends keyof DB, O>(query: SelectQueryBuilder<DB, TB, O>): SelectQueryBuilder<DB, TB, O> =>
    query
      .$if(cursor !== undefined, (q) =>
        q.where(sql<boolean>`(${sql.ref('created_at')}, ${sql.ref(idColumn)}) ${sql.raw(ascending ? '>' : '<')} (${cursor!.created_at}, ${cursor!.id})`),
      )
      .orderBy(sql.ref('created_at'), ascending ? 'asc' : 'desc')
      .orderBy(sql.ref(idColumn), ascending ? 'asc' : 'desc')
      .limit(page.limit + 1);
}

/** The list object from rows fetched by `inV2Page`: the extra row only says there is more; a backward page is put back newest first. */
export function v2ListObject<R, T>(rows: readonly R[], page: V2Page, url: string, render: (row: R) => T): V2List<T> {
  const kept = rows.slice(0, page.limit);
  if (page.cursor?.param === 'ending_before') kept.reverse();
  return { object: 'list', url, has_more: rows.length > page.limit, data: kept.map(render) };
}

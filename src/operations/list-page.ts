/**
 * A list's page in either API's paging: v1 offsets and `since`/`until` (pagination.ts) or v2
 * cursors (v2-pagination.ts). A resource's list execution takes a ListPage, so the v1 and v2 codecs
 * share one query (filters, scope) and differ only in paging and in the list object they answer.
 */
import type { SelectQueryBuilder } from 'kysely';
import { inPage, type Page } from './pagination';
import { inV2Page, type CursorRow, type V2Page } from './v2-pagination';

export type ListPage = Page | V2Page;

export function isV2Page(page: ListPage): page is V2Page {
  return 'cursor' in page;
}

/**
 * Where a v2 page's cursor object sits in the order, found by the list's own finder (an unknown id
 * is its `invalid_id` on the cursor's parameter); undefined on a v1 page or a first v2 page.
 */
export async function cursorOf<R>(page: ListPage, find: (id: string, param: string) => Promise<R>, place: (row: R) => CursorRow): Promise<CursorRow | undefined> {
  if (!isV2Page(page) || page.cursor === undefined) return undefined;
  return place(await find(page.cursor.id, page.cursor.param));
}

/** inPage or inV2Page, as the page is; `idColumn` breaks ties of `created_at` in both. */
export function inListPage(page: ListPage, cursor: CursorRow | undefined, idColumn: string) {
  return <DB, TB extends keyof DB, O>(query: SelectQueryBuilder<DB, TB, O>): SelectQueryBuilder<DB, TB, O> =>
    isV2Page(page) ? query.$call(inV2Page(page, cursor, idColumn)) : query.$call(inPage(page, idColumn));
}

/**
 * Settlement terms (service rules §4 "Term", `tm_`): opening them where captures and refunds need
 * them, rendering them, and reading them for `terms.retrieve|list` (v1 codec: src/api/v1/terms.ts;
 * the v2 list: src/api/v2/settlement.ts). A term is stored with its real end (the close job's due instant);
 * the API shows `end_at` null while the term is open.
 */
import { sql, type Kysely, type RawBuilder, type Selectable, type SqlBool } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database, TermsTable } from '../db/schema';
import { reject } from '../domain/errors';
import type { IdGenerator } from '../domain/ids';
import { termContaining, type TermBounds, type TermCycle } from '../domain/terms';
import { JST_OFFSET_MS, MS_PER_DAY, toUnixSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { inBothApis } from './v2-settlement-objects';
import { recordEvents, type EventInput, type EventRecorder } from '../events/outbox';
import { cursorOf, inListPage, type ListPage } from '../operations/list-page';
import { bulkColumns, compositeKey, ROW_KEYS } from '../db/bulk-rows';
import { accountsOf, inAccounts, joinAccounts } from '../db/account-scope';

export const TERMS_URL = '/v1/terms';

export type TermRow = Selectable<TermsTable>;

export type TermObject = {
  readonly id: string;
  readonly object: 'term';
  readonly livemode: boolean;
  readonly created: number;
  readonly start_at: number;
  /** null while the term is open (service rules §4). */
  readonly end_at: number | null;
  readonly closed: boolean;
  readonly charge_count: number;
  readonly refund_count: number;
  readonly dispute_count: number;
};

/** Live counts of an open term, stored counts once closed. */
export function renderTerm(row: TermRow, counts?: TermCounts): TermObject {
  return {
    id: row.term_id,
    object: 'term',
    livemode: row.livemode,
    created: toUnixSeconds(row.created_at),
    start_at: toUnixSeconds(row.start_at),
    end_at: row.closed ? toUnixSeconds(row.end_at) : null,
    closed: row.closed,
    charge_count: row.closed || counts === undefined ? row.charge_count : counts.charges,
    refund_count: row.closed || counts === undefined ? row.refund_count : counts.refunds,
    dispute_count: row.closed || counts === undefined ? row.dispute_count : counts.disputes,
  };
}

/** What an open term has so far: its captures, refunds and disputes. */
export interface TermCounts {
  readonly charges: number;
  readonly refunds: number;
  readonly disputes: number;
}

/** A term somebody needs: the one of `cycle` containing `at` for (account, mode). */
export interface TermWant {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly cycle: TermCycle;
  readonly at: Date;
  /** The book: the test clock whose objects need the term (bookOf in clock-scope.ts), null for the account's own. */
  readonly testClockId: string | null;
}

/**
 * termContaining, memoised per JST calendar day: every instant of one JST day lies in one term
 * (terms change at 00:00 JST), and a batch of thousands of captures spans a few days at most.
 */
function termBoundsCache(): (cycle: TermCycle, at: Date) => TermBounds {
  const cache = new Map<string, TermBounds>();
  return (cycle, at) => {
    const day = `${cycle}:${Math.floor((at.getTime() + JST_OFFSET_MS) / MS_PER_DAY)}`;
    let bounds = cache.get(day);
    if (bounds === undefined) {
      bounds = termContaining(cycle, at);
      cache.set(day, bounds);
    }
    return bounds;
  };
}

/** A term to open (openTerms): its bounds, the earliest instant that wanted it, its id once drawn. */
interface NewTerm {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly cycle: TermCycle;
  readonly start: Date;
  readonly end: Date;
  readonly testClockId: string | null;
  at: Date;
  id: string;
}
const NEW_TERM_COLUMNS = bulkColumns<NewTerm>()({
  a: ['text', 'accountId'],
  l: ['boolean', 'livemode'],
  id: ['text', 'id'],
  c: ['text', 'cycle'],
  s: ['instant', 'start'],
  e: ['instant', 'end'],
  t: ['instant', 'at'],
  k: ['text', 'testClockId'],
});

/** The open term at or after an instant (openTermIds), numbered. */
interface TermLookup {
  readonly index: number;
  readonly accountId: string;
  readonly livemode: boolean;
  readonly at: Date;
  readonly testClockId: string | null;
}
const TERM_LOOKUP_COLUMNS = bulkColumns<TermLookup>()({ i: ['int', 'index'], a: ['text', 'accountId'], l: ['boolean', 'livemode'], t: ['instant', 'at'], k: ['text', 'testClockId'] });

/**
 * The terms `t` of the books the rows name (their test_clock_id in `clock`): `IS NULL` when every
 * row wants the account's own books (the live book keeps its index probe), else by equality.
 */
function inBooks(rows: readonly { readonly testClockId: string | null }[], clock: RawBuilder<unknown>): RawBuilder<SqlBool> {
  if (rows.every((row) => row.testClockId === null)) return sql<SqlBool>`t.test_clock_id IS NULL`;
  return sql<SqlBool>`t.test_clock_id IS NOT DISTINCT FROM ${clock}`;
}

/**
 * Opens (idempotently, on the (account, mode, start) key) the terms containing the wanted instants
 * and writes `term.created` for those that are new, at the wanted instant (the capture, refund or
 * close that needed the term). Returns nothing: callers look the term up with openTermIds.
 */
export async function openTerms(
  trx: Kysely<Database>,
  ids: IdGenerator,
  wants: readonly TermWant[],
  record: EventRecorder = (events) => recordEvents(trx, ids, events),
): Promise<void> {
  if (wants.length === 0) return;
  const byKey = new Map<string, NewTerm>();
  const boundsOf = termBoundsCache();
  for (const want of wants) {
    const bounds = boundsOf(want.cycle, want.at);
    const key = compositeKey(want.accountId, want.livemode, want.testClockId ?? '', bounds.start.getTime());
    const current = byKey.get(key);
    if (current === undefined) byKey.set(key, { accountId: want.accountId, livemode: want.livemode, cycle: want.cycle, start: bounds.start, end: bounds.end, testClockId: want.testClockId, at: want.at, id: '' });
    else if (want.at.getTime() < current.at.getTime()) current.at = want.at;
  }
  // Skip the ones that exist already, so ids are drawn only for new terms (deterministic sequences).
  const candidates = [...byKey.values()];
  const k = NEW_TERM_COLUMNS.table('k', candidates);
  const existing = await sql<{ account_id: string; livemode: boolean; test_clock_id: string | null; start_at: Date }>`
    SELECT t.account_id, t.livemode, t.test_clock_id, t.start_at FROM ${k.from}
    JOIN terms t ON ${inAccounts('t.account_id', accountsOf(candidates, (c) => c.accountId))} AND t.account_id = ${k.col('a')} AND t.livemode = ${k.col('l')}
      AND ${inBooks(candidates, k.col('k'))} AND t.start_at = ${k.col('s')}`.execute(trx);
  const have = new Set(existing.rows.map((row) => compositeKey(row.account_id, row.livemode, row.test_clock_id ?? '', row.start_at.getTime())));
  const fresh = candidates.filter((c) => !have.has(compositeKey(c.accountId, c.livemode, c.testClockId ?? '', c.start.getTime())));
  if (fresh.length === 0) return;
  for (const term of fresh) term.id = ids.next('term');
  const x = NEW_TERM_COLUMNS.table('k', fresh);
  const inserted = await sql<TermRow>`
    INSERT INTO terms (account_id, livemode, term_id, cycle, start_at, end_at, created_at, test_clock_id)
    SELECT a.account_id, ${x.cols('l', 'id', 'c', 's', 'e', 't', 'k')}
    FROM ${x.from} ${joinAccounts('a', x.col('a'), accountsOf(fresh, (term) => term.accountId))}
    ON CONFLICT (account_id, livemode, test_clock_id, start_at) DO NOTHING
    RETURNING *`.execute(trx);
  const events: EventInput[] = inserted.rows
    .sort((x, y) => x.start_at.getTime() - y.start_at.getTime() || (x.account_id < y.account_id ? -1 : x.account_id > y.account_id ? 1 : 0))
    .map((row) => ({ accountId: row.account_id, livemode: row.livemode, type: 'term.created', data: renderTerm(row, { charges: 0, refunds: 0, disputes: 0 }), at: row.created_at }));
  await record(inBothApis(events));
}

/** The distinct containing terms of wanted instants (termLookups), and which one each want has. */
interface TermLookups {
  readonly group: readonly TermLookup[];
  /** Per want, in input order: the index of its containing term in `group`. */
  readonly indexOf: readonly number[];
}

/** The containing term of each want, once per distinct (account, mode, term start). */
function termLookups(wants: readonly TermWant[]): TermLookups {
  const boundsOf = termBoundsCache();
  const distinct = new Map<string, TermLookup>();
  const indexOf = wants.map((want) => {
    const start = boundsOf(want.cycle, want.at).start;
    const key = compositeKey(want.accountId, want.livemode, want.testClockId ?? '', start.getTime());
    let lookup = distinct.get(key);
    // The containing term's start stands for every instant in it: no term boundary lies between.
    if (lookup === undefined) {
      lookup = { index: distinct.size, accountId: want.accountId, livemode: want.livemode, at: start, testClockId: want.testClockId };
      distinct.set(key, lookup);
    }
    return lookup.index;
  });
  return { group: [...distinct.values()], indexOf };
}

/**
 * One statement: for each distinct containing term of `lookups`, the first open term that ends
 * after its start, read FOR SHARE (a close of that term waits for this transaction), with its
 * start, by the lookup's index.
 */
async function firstOpenTerms(trx: Kysely<Database>, group: readonly TermLookup[]): Promise<Map<number, { term_id: string; start_at: Date }>> {
  // One statement naming the accounts (account-scope.ts): Citus routes it, LATERAL … LIMIT and
  // all, to their shard; across shards it cannot push a LIMIT below a lateral reference.
  const accountIds = accountsOf(group, (d) => d.accountId);
  const k = TERM_LOOKUP_COLUMNS.table('k', group);
  const { rows } = await sql<{ i: number; term_id: string; start_at: Date }>`
    SELECT ${k.col('i')} AS i, x.term_id, x.start_at FROM ${k.from}
    CROSS JOIN LATERAL (
      SELECT t.term_id, t.start_at FROM terms t
      WHERE ${inAccounts('t.account_id', accountIds)} AND t.account_id = ${k.col('a')} AND t.livemode = ${k.col('l')} AND ${inBooks(group, k.col('k'))}
        AND NOT t.closed AND t.end_at > ${k.col('t')}
      ORDER BY t.start_at LIMIT 1 FOR SHARE
    ) x`.execute(trx);
  return new Map(rows.map((row) => [row.i, { term_id: row.term_id, start_at: row.start_at }]));
}

/**
 * For each wanted instant, the open term it is settled in, read FOR SHARE (a close of that term
 * waits for this transaction, so nothing is settled into a term that has just closed): the term
 * containing the instant, or — if that one has already closed (a capture recorded after its term
 * was closed) — the first open term after it. Call openTerms first. Looked up once per distinct
 * containing term (a renewal batch of thousands of charges usually needs one per account).
 */
async function openTermIds(trx: Kysely<Database>, wants: readonly TermWant[]): Promise<string[]> {
  if (wants.length === 0) return [];
  const { group, indexOf } = termLookups(wants);
  let found = await firstOpenTerms(trx, group);
  // A term close that held the term we waited for has committed: the term is closed now and its
  // successor was inserted after this statement's snapshot. A new statement sees the successor.
  for (let retry = 0; retry < 3 && found.size < group.length; retry += 1) found = await firstOpenTerms(trx, group);
  return indexOf.map((index, n) => {
    const term = found.get(index);
    if (term === undefined) throw new Error(`no open term for ${wants[n]!.accountId} at ${wants[n]!.at.toISOString()}; openTerms must run first`);
    return term.term_id;
  });
}

/**
 * openTerms then openTermIds, in one statement when every containing term exists and is open
 * (the common case: a term opens once a month or half-month): the first open term found for
 * each is then the containing one, which openTerms would have left alone and openTermIds would
 * have returned. Otherwise (a term to open, or a closed one) the two run as before; the lookup's
 * FOR SHARE locks are the ones openTermIds takes anyway.
 */
export async function openTermIdsOpening(trx: Kysely<Database>, ids: IdGenerator, wants: readonly TermWant[], record?: EventRecorder): Promise<string[]> {
  if (wants.length === 0) return [];
  const { group, indexOf } = termLookups(wants);
  const found = await firstOpenTerms(trx, group);
  if (group.every((lookup) => found.get(lookup.index)?.start_at.getTime() === lookup.at.getTime())) return indexOf.map((index) => found.get(index)!.term_id);
  await openTerms(trx, ids, wants, record);
  return openTermIds(trx, wants);
}

/** Live charge, refund and dispute counts of open terms, by term id. */
export async function openTermCounts(executor: Kysely<Database>, terms: readonly TermRow[]): Promise<Map<string, TermCounts>> {
  const open = terms.filter((t) => !t.closed);
  const counts = new Map<string, TermCounts>();
  if (open.length === 0) return counts;
  // One statement naming the terms' accounts (account-scope.ts): Citus routes the correlated counts to their shard.
  const accountIds = accountsOf(open, (t) => t.account_id);
  const k = ROW_KEYS.table('k', open.map((t) => ({ accountId: t.account_id, livemode: t.livemode, id: t.term_id })));
  const { rows } = await sql<{ t: string } & TermCounts>`
    SELECT ${k.col('id')} AS t,
      (SELECT count(*)::int FROM charges c WHERE ${inAccounts('c.account_id', accountIds)} AND c.account_id = ${k.col('a')} AND c.livemode = ${k.col('l')} AND c.term_id = ${k.col('id')}) AS charges,
      (SELECT count(*)::int FROM refunds r WHERE ${inAccounts('r.account_id', accountIds)} AND r.account_id = ${k.col('a')} AND r.livemode = ${k.col('l')} AND r.term_id = ${k.col('id')}) AS refunds,
      (SELECT count(*)::int FROM disputes d WHERE ${inAccounts('d.account_id', accountIds)} AND d.account_id = ${k.col('a')} AND d.livemode = ${k.col('l')} AND d.term_id = ${k.col('id')}) AS disputes
    FROM ${k.from}`.execute(executor);
  for (const row of rows) counts.set(row.t, { charges: row.charges, refunds: row.refunds, disputes: row.disputes });
  return counts;
}

export async function findTerm(executor: Kysely<Database>, caller: Pick<Caller, 'accountId' | 'livemode'>, termId: string, param: string): Promise<TermRow> {
  const row = await executor
    .selectFrom('terms')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('term_id', '=', termId)
    .executeTakeFirst();
  if (!row) return reject('invalid_id', param, `No such term: ${termId}`);
  return row;
}

/** A term with the live counts of an open term (openTermCounts): what renderTermRecord shows. */
export interface TermRecord {
  readonly row: TermRow;
  readonly counts: TermCounts | undefined;
}

export function renderTermRecord(record: TermRecord): TermObject {
  return renderTerm(record.row, record.counts);
}

export async function retrieveTerm(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<TermRecord> {
  const row = await findTerm(ctx.db, caller, command.id, 'id');
  return { row, counts: (await openTermCounts(ctx.db, [row])).get(row.term_id) };
}

/**
 * One page of terms (v1 offsets or v2 cursors) on the term's creation instant, newest first, one
 * past the limit, each with its live counts while open.
 */
export async function listTerms(ctx: Context, caller: Caller, page: ListPage): Promise<TermRecord[]> {
  const cursor = await cursorOf(page, (id, param) => findTerm(ctx.db, caller, id, param), (row) => ({ created_at: row.created_at, id: row.term_id }));
  const rows = await ctx.db
    .selectFrom('terms')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$call(inListPage(page, cursor, 'term_id'))
    .execute();
  const counts = await openTermCounts(ctx.db, rows);
  return rows.map((row) => ({ row, counts: counts.get(row.term_id) }));
}

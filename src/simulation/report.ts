/**
 * What a simulation leaves behind: `report.json` (every step, job run, subscription, charge,
 * refund, term, statement, balance and event, API-shaped), the monthly summary, CSV exports and a
 * chart. Everything is read back from the simulated database in a fixed order (instant, then id),
 * so the same world gives the same bytes; large sections are written piece by piece, never held as
 * one string.
 */
import { once } from 'node:events';
import { createWriteStream, mkdirSync, writeFileSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { cardKey, chargeCardsOf } from '../charges/charge-record';
import { CHARGE_OBJECT_COLUMNS, chargeText, type ChargeRow } from '../charges/charges';
import { renderCard } from '../customers/card-object';
import type { Database } from '../db/schema';
import { formatJst, fromUnixSeconds, JST_OFFSET_MS, MS_PER_DAY, parseInstant, toIsoSeconds, toJstIso } from '../domain/time';
import { emptyMonthEnd, jstSql, monthEndFigures } from './business-figures';
import { renderCharts } from './report-charts';
import { renderReportHtml } from './report-html';
import { subscriberCells, yen } from './report-cells';
import type { SimulatedWorld } from './simulate';
import { webhookReport } from './webhooks';
import { REPORT_DETAILS, type ReportDetail } from './report-detail';
import type { DayPoint, DiffRow, MonthSummary, Summary } from './report-summary';

export type { DayPoint, DiffRow, MonthMoney, MonthSummary, Summary } from './report-summary';
import { EVENT_TEXT_SQL } from '../events/outbox';
import { findOperation, runOperation } from '../api/operations';
import { subscriptionObjects } from '../subscriptions/subscription-record';
import type { SubscriptionRow } from '../subscriptions/subscription-object';
import { renderAdjustment } from '../settlement/adjustments';

const PAGE = 1_000;

/**
 * How many cards the charges section keeps rendered (chargePages): every card of a book of
 * ~200,000 subscribers, ~220 MB at ~890 bytes a card (its text, key and entry); a larger book
 * reads its cards again past that. Keeping every card of a 1,000,000-subscriber book was ~1 GB:
 * its peak RSS went from ~0.9 GB in the simulation to 1.9 GB in the report.
 */
export const REPORT_CARDS_KEPT = 250_000;

export interface ReportHeader {
  readonly scenario: string | null;
  readonly from: Date;
  readonly to: Date;
  readonly seed: number;
  /** A forecast: the source it copied and what it assumed. */
  readonly source?: { readonly name: string; readonly snapshot_instant: Date; readonly assumptions: Readonly<Record<string, unknown>> };
}

/** `YYYY-MM-DD` of JST calendar days, by day number: a report asks for a few hundred days, each hundreds of times. */
const jstDays = new Map<number, string>();

function jstDay(at: Date): string {
  const shifted = at.getTime() + JST_OFFSET_MS;
  const number = Math.floor(shifted / MS_PER_DAY);
  let day = jstDays.get(number);
  if (day === undefined) {
    day = new Date(number * MS_PER_DAY).toISOString().slice(0, 10);
    jstDays.set(number, day);
  }
  return day;
}

/** `YYYY-MM` of an instant in JST. */
export function jstMonth(at: Date): string {
  return jstDay(at).slice(0, 7);
}

function emptyMonth(month: string): MonthSummary {
  return {
    month,
    charges: 0,
    captured_charges: 0,
    captured_yen: 0,
    failed_charges: 0,
    failed_renewals: 0,
    refunds: 0,
    refunded_yen: 0,
    fees_yen: 0,
    platform_fees_yen: 0,
    service_fees_yen: 0,
    adjustments_yen: 0,
    failed_renewals_by_reason: {},
    paid_out_by_owner: {},
    ...emptyMonthEnd(),
  };
}

/** Adds `amount` to `key` of a record of sums. */
function addTo(record: Record<string, number>, key: string, amount: number): void {
  record[key] = (record[key] ?? 0) + amount;
}

/** An element already serialised (as JSON.stringify would have it), written as it is. */
class JsonText {
  constructor(readonly text: string) {}
}

/** Writes a JSON document section by section; arrays one element per line. */
class JsonSections {
  #first = true;
  constructor(private readonly out: WriteStream) {
    // The first write into a new stream never waits for 'drain'.
    void this.#write('{');
  }

  #write(text: string | Buffer): void | Promise<void> {
    if (!this.out.write(text)) return once(this.out, 'drain').then(() => undefined);
  }

  #key(key: string): string {
    const head = `${this.#first ? '\n' : ',\n'}  ${JSON.stringify(key)}: `;
    this.#first = false;
    return head;
  }

  async value(key: string, value: unknown): Promise<void> {
    await this.#write(this.#key(key) + JSON.stringify(value));
  }

  async array<T>(key: string, pages: Pages<T>, render: (item: T) => unknown = (item) => item): Promise<void> {
    await this.#write(`${this.#key(key)}[`);
    let count = 0;
    await pages(async (page) => {
      // One write a page: a write per element cost more than rendering it.
      const texts: string[] = [];
      for (const item of page) {
        const rendered = render(item);
        texts.push(`${count === 0 ? '\n    ' : ',\n    '}${rendered instanceof JsonText ? rendered.text : JSON.stringify(rendered)}`);
        count += 1;
      }
      await this.#write(texts.join(''));
    });
    await this.#write(count === 0 ? ']' : '\n  ]');
  }

  /**
   * An array whose elements come as ready-made lines from `lines`: each element indented by four
   * spaces, every one but the last followed by a comma, each line ended by a line break.
   */
  async arrayOfLines(key: string, lines: Lines): Promise<void> {
    await this.#write(`${this.#key(key)}[`);
    let empty = true;
    await lines(async (chunk) => {
      if (empty && chunk.length > 0) {
        empty = false;
        await this.#write('\n');
      }
      await this.#write(chunk);
    });
    await this.#write(empty ? ']' : '  ]');
  }

  async end(): Promise<void> {
    await this.#write('\n}\n');
    this.out.end();
    await once(this.out, 'finish');
  }
}

/** Hands an array section's ready-made lines (see JsonSections.arrayOfLines) to `write`, chunk by chunk. */
type Lines = (write: (chunk: Buffer) => void | Promise<void>) => Promise<void>;

/** A section's items, handed page by page to `emit` (which writes them before it resolves). */
type Pages<T> = (emit: (page: readonly T[]) => Promise<void>) => Promise<void>;

/**
 * Items held in memory (or made as they are read), handed on a page (PAGE items) at a time: a
 * section is written one page's text at a time, and the steps of a large book (three a generated
 * subscriber) as one text would pass the longest string JavaScript can hold (about 2^29
 * characters: some 2.7 million steps).
 */
function inPages<T>(items: Iterable<T>): Pages<T> {
  return async (emit) => {
    let page: T[] = [];
    for (const item of items) {
      page.push(item);
      if (page.length < PAGE) continue;
      await emit(page);
      page = [];
    }
    if (page.length > 0) await emit(page);
  };
}

const REPORT_CHARGE_COLUMNS = [...CHARGE_OBJECT_COLUMNS, 'account_id', 'card_id', 'amount_captured', 'fee'] as const;

/**
 * The CSV exports open in a spreadsheet in Japan: UTF-8 with a byte order mark (Excel on Japanese
 * Windows reads a file without one as Shift_JIS and shows the titles as mojibake), instants in
 * JST with their offset, as the months of the summary are.
 */
const CSV_BOM = '\uFEFF';
type ReportCharge = Pick<ChargeRow, (typeof REPORT_CHARGE_COLUMNS)[number]>;

/**
 * Charges in (account, created, id) order with their cards, a page at a time, read through one
 * cursor: no index has that order, so keyset pages each sorted the rest of the table (most of the
 * report's time, docs/decisions/performance.md); the cursor sorts once. A card is read once for
 * many charges, not once per charge: a subscriber's card appears in every renewal (on PGlite,
 * where every field read costs JavaScript work, reading them per page was most of the section).
 * The cards kept are bounded (`cardsKept`, REPORT_CARDS_KEPT by default): when the next page's
 * would pass the bound, those kept so far are let go and read again as needed, so the memory of
 * the section does not grow with the book.
 */
export function chargePages(db: Kysely<Database>, cardsKept = REPORT_CARDS_KEPT): Pages<{ row: ReportCharge; cardText: string | null; brand: string | null }> {
  return (emit) =>
    db.transaction().execute(async (trx) => {
      // The columns the charge object and the summary read, not every column of the table (on
      // PGlite each field read is JavaScript work; the hold and flow bookkeeping is never shown).
      await sql`
        DECLARE report_charges NO SCROLL CURSOR FOR
        SELECT ${sql.join(REPORT_CHARGE_COLUMNS.map((column) => sql.ref(column)))} FROM charges ORDER BY account_id, created_at, charge_id`.execute(trx);
      // Stored cards, else the card of the token a charge was made with (v1 charges by token,
      // checkout and payment flows); a payment flow paid without a card (PayPay) has none (null).
      // Each card's object is printed once (JSON text): a subscriber's card is in every renewal.
      const cards = new Map<string, { text: string; brand: string } | null>();
      const fetchPage = async () => {
        const rows = (await sql<ReportCharge>`FETCH ${sql.raw(String(PAGE))} FROM report_charges`.execute(trx)).rows;
        const unseenOf = () => {
          const unseen = new Map<string, ReportCharge>();
          for (const row of rows) {
            const key = cardKey(row.account_id, row.livemode, row.card_id);
            if (!cards.has(key)) unseen.set(key, row);
          }
          return unseen;
        };
        let unseen = unseenOf();
        if (cards.size + unseen.size > cardsKept) {
          cards.clear();
          unseen = unseenOf();
        }
        if (unseen.size > 0) {
          const found = await chargeCardsOf(trx, [...unseen.values()]);
          for (const key of unseen.keys()) {
            const card = found.get(key);
            const object = card === undefined ? undefined : renderCard(card);
            cards.set(key, object === undefined ? null : { text: JSON.stringify(object), brand: object.brand });
          }
        }
        return rows.map((row) => {
          const card = cards.get(cardKey(row.account_id, row.livemode, row.card_id)) ?? null;
          return { row, cardText: card?.text ?? null, brand: card?.brand ?? null };
        });
      };
      await prefetching(fetchPage, (page) => page.length === 0, emit);
    });
}

/** The rows of `query`, a page at a time through one cursor (in its own transaction). */
function cursorPages<R>(db: Kysely<Database>, query: RawBuilder<unknown>): Pages<R> {
  return (emit) => db.transaction().execute((trx) => readCursor<R>(trx, query, emit));
}

/** Reads `query` through a cursor of the caller's transaction, a page at a time, and closes it. */
async function readCursor<R>(trx: Kysely<Database>, query: RawBuilder<unknown>, emit: (page: readonly R[]) => Promise<void>): Promise<void> {
  await sql`DECLARE report_rows NO SCROLL CURSOR FOR ${query}`.execute(trx);
  const fetchPage = async () => (await sql<R>`FETCH ${sql.raw(String(PAGE))} FROM report_rows`.execute(trx)).rows;
  await prefetching(fetchPage, (page) => page.length === 0, emit);
  await sql`CLOSE report_rows`.execute(trx);
}

/**
 * Every subscription of the accounts as it stands at the end (deleted ones too, marked), account
 * by account, test mode first, oldest first: the API's objects, a page at a time (their plans read
 * in the cursor's transaction: the embedded database has one connection).
 */
function subscriptionPages(db: Kysely<Database>, accounts: readonly string[]): Pages<Record<string, unknown>> {
  return (emit) =>
    db.transaction().execute(async (trx) => {
      for (const accountId of accounts) {
        for (const livemode of [false, true]) {
          const query = sql`SELECT * FROM subscriptions WHERE account_id = ${accountId} AND livemode = ${livemode} ORDER BY created_at, subscription_id`;
          await readCursor<SubscriptionRow>(trx, query, async (page) => {
            const objects = await subscriptionObjects(trx, { accountId, livemode, kind: 'secret' }, page);
            await emit(objects.map((object, i) => ({ ...object, deleted: page[i]!.deleted_at !== null })));
          });
        }
      }
    });
}

/**
 * Hands pages to `emit` until `last` says a page is the end, asking for the next page before
 * emitting the current one: the database reads page k+1 while this process renders and writes
 * page k.
 */
async function prefetching<P>(fetchPage: () => Promise<P>, last: (page: P) => boolean, emit: (page: P) => Promise<void>): Promise<void> {
  let pending = fetchPage();
  for (;;) {
    const page = await pending;
    if (last(page)) return;
    pending = fetchPage();
    // A failed prefetch is reported by the await above on the next turn, not as an unhandled rejection.
    pending.catch(() => undefined);
    try {
      await emit(page);
    } catch (error) {
      // Let the read in flight finish before the caller gives its transaction (and connection) back.
      await pending.catch(() => undefined);
      throw error;
    }
  }
}

/**
 * Events in (account, instant, insertion) order, a page at a time through one cursor along the
 * events_by_created index, each printed by PostgreSQL as the API's event object (EVENT_TEXT_SQL)
 * with its stored document inside, compacted: nothing per event is parsed or built in this process
 * (~250,000 events at 10,000 simulated subscriptions). The embedded database's way; on a server,
 * eventLines.
 */
function eventPages(db: Kysely<Database>): Pages<JsonText> {
  return (emit) =>
    db.transaction().execute(async (trx) => {
      await sql`DECLARE report_events NO SCROLL CURSOR FOR SELECT ${EVENT_TEXT_SQL} AS text FROM events e ${EVENT_ORDER}`.execute(trx);
      const fetchPage = async () => {
        const rows = (await sql<{ text: string }>`FETCH ${sql.raw(String(PAGE))} FROM report_events`.execute(trx)).rows;
        return rows.map((row) => new JsonText(row.text));
      };
      await prefetching(fetchPage, (page) => page.length === 0, emit);
    });
}

const EVENT_ORDER = sql`ORDER BY e.account_id, e.created_at, e.seq`;

/**
 * On a PostgreSQL server, the events section's lines as PostgreSQL prints them (see
 * JsonSections.arrayOfLines), streamed by COPY as raw bytes straight into the report: ~250,000
 * events at 10,000 simulated subscriptions, 200 MB that this process neither decodes nor encodes.
 * CSV with a delimiter and a quote that JSON text never holds unescaped (control characters) and
 * lines without line breaks (the printed text is compact): every value is written as it is.
 */
function eventLines(world: SimulatedWorld): Lines | undefined {
  const { store, db } = world.ctx;
  const copyOut = store.copyOut?.bind(store);
  if (!copyOut) return undefined;
  const printed = sql`SELECT '    ' || ${EVENT_TEXT_SQL} || CASE WHEN lead(true) OVER (${EVENT_ORDER}) IS NULL THEN '' ELSE ',' END
    FROM events e ${EVENT_ORDER}`.compile(db);
  // COPY takes no parameters; the printed query has none.
  if (printed.parameters.length > 0) throw new Error('the events query of the report must not take parameters');
  return (write) => copyOut(`COPY (${printed.sql}) TO STDOUT WITH (FORMAT csv, DELIMITER E'\\x02', QUOTE E'\\x01')`, write);
}

/** Every object a list operation returns, for every account (empty when the operation does not exist yet). */
async function listAll(world: SimulatedWorld, op: string, params: Record<string, unknown> = {}): Promise<Record<string, unknown>[]> {
  if (!findOperation(op)) return [];
  const all: Record<string, unknown>[] = [];
  for (const accountId of world.accounts) {
    for (const livemode of [false, true]) {
      const caller: Caller = { accountId, livemode, kind: 'secret' };
      for (let offset = 0; ; offset += 100) {
        const page = (await runOperation(world.ctx, caller, op, { ...params, limit: 100, offset })) as { data: Record<string, unknown>[]; has_more: boolean };
        all.push(...page.data);
        if (!page.has_more) break;
      }
    }
  }
  // Lists come newest first; the report reads oldest first, ties by id.
  const created = (item: Record<string, unknown>) => Number(item.created ?? item.start_at ?? 0);
  return all.sort((a, b) => created(a) - created(b) || String(a.id).localeCompare(String(b.id)));
}

/**
 * The money of each JST month and the daily series, summed by the database: charges by the month
 * they were made (failures, failed renewals by reason in the order their first charge comes in
 * the report) and by the month captured (captures, fees), refunds by the month made (their fee
 * offsets off the fees). A forecast's copied history (before --from) is not summed. `month` and
 * `day` give the entry of a `YYYY-MM` or `YYYY-MM-DD` key to add to.
 */
async function paymentFigures(db: Kysely<Database>, header: ReportHeader, month: (key: string) => MonthSummary, day: (key: string) => DayPoint): Promise<void> {
  const since = (column: string) => (header.source === undefined ? sql`true` : sql`${sql.ref(column)} >= ${header.from}`);
  const made = await sql<{ key: string; charges: number; failed: number; failed_renewals: number }>`
    SELECT ${jstSql(sql.ref('created_at'), 'month')} AS key, count(*) AS charges, count(*) FILTER (WHERE NOT paid) AS failed,
      count(*) FILTER (WHERE NOT paid AND subscription_id IS NOT NULL) AS failed_renewals
    FROM charges WHERE ${since('created_at')} GROUP BY 1`.execute(db);
  for (const row of made.rows) {
    const entry = month(row.key);
    entry.charges += row.charges;
    entry.failed_charges += row.failed;
    entry.failed_renewals += row.failed_renewals;
  }
  const reasons = await sql<{ key: string; reason: string; n: number }>`
    SELECT key, reason, count(*) AS n FROM (
      SELECT ${jstSql(sql.ref('created_at'), 'month')} AS key, coalesce(failure_code, 'unknown') AS reason,
        row_number() OVER (ORDER BY account_id, created_at, charge_id) AS place
      FROM charges WHERE NOT paid AND subscription_id IS NOT NULL AND ${since('created_at')}
    ) failed GROUP BY key, reason ORDER BY key, min(place)`.execute(db);
  for (const row of reasons.rows) addTo(month(row.key).failed_renewals_by_reason, row.reason, row.n);
  const captured = await sql<{ key: string; captured: number; yen: number; fees: number | null; platform_fees: number | null }>`
    SELECT ${jstSql(sql.ref('captured_at'), 'month')} AS key, count(amount_captured) AS captured, coalesce(sum(amount_captured), 0)::bigint AS yen,
      sum(fee)::bigint AS fees, sum(platform_fee)::bigint AS platform_fees
    FROM charges WHERE captured_at IS NOT NULL AND (amount_captured IS NOT NULL OR fee IS NOT NULL OR platform_fee IS NOT NULL) AND ${since('captured_at')}
    GROUP BY 1`.execute(db);
  for (const row of captured.rows) {
    const entry = month(row.key);
    entry.captured_charges += row.captured;
    entry.captured_yen += row.yen;
    entry.fees_yen += row.fees ?? 0;
    entry.platform_fees_yen += row.platform_fees ?? 0;
  }
  const refunded = await sql<{ key: string; refunds: number; yen: number; fee_offsets: number | null }>`
    SELECT ${jstSql(sql.ref('created_at'), 'month')} AS key, count(*) AS refunds, sum(amount)::bigint AS yen, sum(refund_fee_offset)::bigint AS fee_offsets
    FROM refunds WHERE ${since('created_at')} GROUP BY 1`.execute(db);
  for (const row of refunded.rows) {
    const entry = month(row.key);
    entry.refunds += row.refunds;
    entry.refunded_yen += row.yen;
    entry.fees_yen -= row.fee_offsets ?? 0;
  }
  const days = await sql<{ key: string; yen: number; failures: number }>`
    SELECT key, sum(yen)::bigint AS yen, sum(failures)::bigint AS failures FROM (
      SELECT ${jstSql(sql.ref('created_at'), 'day')} AS key, 0 AS yen, 1 AS failures FROM charges WHERE NOT paid AND ${since('created_at')}
      UNION ALL
      SELECT ${jstSql(sql.ref('captured_at'), 'day')}, amount_captured, 0 FROM charges WHERE captured_at IS NOT NULL AND amount_captured IS NOT NULL AND ${since('captured_at')}
    ) figure GROUP BY key`.execute(db);
  for (const row of days.rows) {
    const entry = day(row.key);
    entry.captured_yen += row.yen;
    entry.failures += row.failures;
  }
}

export interface WrittenReport {
  readonly summary: Summary;
  readonly days: DayPoint[];
}

/**
 * Writes report.json, charges.csv and statements.csv into `dir` and returns the summary and the
 * daily series (for summary.json, the chart and a what-if diff).
 */
export async function writeReport(world: SimulatedWorld, header: ReportHeader, dir: string, detail: ReportDetail = 'full'): Promise<WrittenReport> {
  mkdirSync(dir, { recursive: true });
  const lists = (level: ReportDetail) => REPORT_DETAILS.indexOf(detail) >= REPORT_DETAILS.indexOf(level);
  const { db } = world.ctx;
  const months = new Map<string, MonthSummary>();
  // A forecast's copied history (before --from) is listed in report.json but not summed: the
  // months, totals and chart are what happens in the forecast range.
  const history = (at: Date) => header.source !== undefined && at.getTime() < header.from.getTime();
  const monthOf = (key: string) => {
    let entry = months.get(key);
    if (!entry) months.set(key, (entry = emptyMonth(key)));
    return entry;
  };
  const month = (at: Date) => (history(at) ? emptyMonth(jstMonth(at)) : monthOf(jstMonth(at)));
  const days = new Map<string, DayPoint>();
  const dayOf = (key: string) => {
    let entry = days.get(key);
    if (!entry) days.set(key, (entry = { day: key, captured_yen: 0, failures: 0 }));
    return entry;
  };

  const json = new JsonSections(createWriteStream(join(dir, 'report.json')));
  await json.value('report', 'kessai simulation');
  await json.value('version', 1);
  await json.value('scenario', header.scenario);
  await json.value('from', toIsoSeconds(header.from));
  await json.value('to', toIsoSeconds(header.to));
  await json.value('seed', header.seed);
  if (header.source) await json.value('source', { ...header.source, snapshot_instant: toIsoSeconds(header.source.snapshot_instant) });
  await json.value('accounts', world.accounts);
  await json.array('steps', inPages(world.outcomes), (step) => ({ entry: step.entry, at: toIsoSeconds(step.at), op: step.op, ref: step.ref, account: step.account, result: step.result, error: step.error }));
  await json.array('job_runs', inPages(world.jobRuns), (run) => ({ job: run.job, slot: toIsoSeconds(run.slot), counts: run.counts }));

  // Subscriptions as they stand at the end (deleted ones too), then every state change; both a
  // page at a time, never the whole book in memory.
  if (lists('charges')) await json.array('subscriptions', subscriptionPages(db, world.accounts));
  if (lists('charges')) await json.array('subscription_changes', cursorPages<{ account_id: string; created_at: Date; type: string; resource_id: string; status: string | null }>(
    db,
    sql`SELECT account_id, created_at, type, resource_id, data->>'status' AS status FROM events WHERE type LIKE 'subscription.%' ORDER BY account_id, seq`,
  ), (change) => ({
    at: toIsoSeconds(change.created_at),
    account: change.account_id,
    subscription: change.resource_id,
    type: change.type,
    status: change.status,
  }));

  // The money of the months and the daily series are summed by the database (paymentFigures);
  // the charges and refunds are read only to be listed.
  await paymentFigures(db, header, monthOf, dayOf);
  const chargesCsv = lists('charges') ? createWriteStream(join(dir, 'charges.csv')) : undefined;
  chargesCsv?.write(`${CSV_BOM}id,account,created_at,customer,subscription,amount,paid,captured,captured_at,amount_captured,amount_refunded,refunded,failure_code,card_brand,fee_rate,fee,platform_fee,tenant,term_id\n`);
  // Lines are written a page at a time.
  const csvLines: string[] = [];
  const listCharge = ({ row, cardText, brand }: { row: ReportCharge; cardText: string | null; brand: string | null }) => {
    const object = new JsonText(chargeText(row, cardText));
    csvLines.push(
      [
        row.charge_id,
        row.account_id,
        toJstIso(row.created_at),
        row.customer_id ?? '',
        row.subscription_id ?? '',
        row.amount,
        row.paid,
        row.captured,
        row.captured_at ? toJstIso(row.captured_at) : '',
        row.amount_captured ?? '',
        row.amount_refunded,
        row.refunded,
        row.failure_code ?? '',
        brand ?? '',
        row.fee_rate,
        row.fee ?? '',
        row.platform_fee ?? '',
        row.tenant_id ?? '',
        row.term_id ?? '',
      ].join(',') + '\n',
    );
    if (csvLines.length >= PAGE) chargesCsv?.write(csvLines.splice(0).join(''));
    return object;
  };
  if (lists('charges')) await json.array('charges', chargePages(db), listCharge);
  chargesCsv?.write(csvLines.join(''));
  // Listen before ending: 'finish' may come before the later awaits are done.
  const chargesWritten = chargesCsv ? once(chargesCsv, 'finish') : Promise.resolve();
  chargesCsv?.end();

  if (lists('charges')) await json.array('refunds', cursorPages<{ refund_id: string; livemode: boolean; account_id: string; charge_id: string; amount: number; reason: string | null; created_at: Date }>(
    db,
    sql`SELECT refund_id, livemode, account_id, charge_id, amount, reason, created_at FROM refunds ORDER BY account_id, created_at, refund_id`,
  ), (refund) => ({ id: refund.refund_id, object: 'refund', livemode: refund.livemode, account: refund.account_id, charge: refund.charge_id, amount: refund.amount, reason: refund.reason, created: Math.floor(refund.created_at.getTime() / 1000) }));

  // The statements that do not come from payments: plan fees by the month they bill, adjustments by the month booked.
  const serviceFees = await db.selectFrom('service_fee_charges').selectAll().orderBy('account_id').orderBy('livemode').orderBy('period_start').execute();
  await json.array('service_fees', inPages(serviceFees), (fee) => {
    month(fee.period_start).service_fees_yen += fee.amount;
    return { account: fee.account_id, livemode: fee.livemode, month: jstMonth(fee.period_start), subject: fee.subject, amount: fee.amount, term_id: fee.term_id };
  });
  const adjustments = await db.selectFrom('adjustments').selectAll().orderBy('account_id').orderBy('created_at').orderBy('adjustment_id').execute();
  await json.array('adjustments', inPages(adjustments), (row) => {
    month(row.created_at).adjustments_yen += row.amount;
    return { ...renderAdjustment(row), account: row.account_id };
  });

  const terms = await listAll(world, 'terms.list');
  await json.array('terms', inPages(terms));
  const statements = await listAll(world, 'statements.list');
  const statementsCsv = createWriteStream(join(dir, 'statements.csv'));
  statementsCsv.write(`${CSV_BOM}statement,term,term_start,term_end,owner,tenant,type,title,subject,name,amount,net,balance,balance_state,balance_closed_date,balance_payout_date\n`);
  const balances = await listAll(world, 'balances.list');
  const ownerOfBalance = new Map(balances.map((balance) => [String(balance.id), balance]));
  const ownerOf = (record: Record<string, unknown>): string => {
    if (typeof record.tenant_id === 'string') return record.tenant_id;
    const balance = typeof record.balance_id === 'string' ? ownerOfBalance.get(record.balance_id) : record;
    return balance?.owner === 'platform' ? 'platform' : 'merchant';
  };
  const csvCell = (value: unknown) => {
    const text = value === null || value === undefined ? '' : String(value);
    return /[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  };
  // The term's instants in JST (end exclusive); the balance's dates are JST calendar dates already.
  const instant = (seconds: unknown) => (typeof seconds === 'number' ? toJstIso(fromUnixSeconds(seconds)) : '');
  for (const statement of statements) {
    const term = statement.term as { id?: string; start_at?: number; end_at?: number } | undefined;
    const balance = typeof statement.balance_id === 'string' ? ownerOfBalance.get(statement.balance_id) : undefined;
    for (const item of (statement.items as Record<string, unknown>[] | undefined) ?? []) {
      statementsCsv.write(
        [
          statement.id,
          term?.id ?? statement.term_id,
          instant(term?.start_at),
          instant(term?.end_at),
          ownerOf(statement),
          statement.tenant_id,
          statement.type,
          statement.title,
          item.subject,
          item.name,
          item.amount,
          statement.net,
          statement.balance_id,
          balance?.state,
          balance?.closed_date,
          balance?.due_date,
        ]
          .map(csvCell)
          .join(',') + '\n',
      );
    }
  }
  for (const balance of balances) {
    // A balance closed without a payout date was forfeited (business-figures.ts counts it).
    if (balance.closed !== true || typeof balance.closed_date !== 'string' || typeof balance.net !== 'number' || balance.due_date === null) continue;
    addTo(month(parseInstant(balance.closed_date)).paid_out_by_owner, ownerOf(balance), balance.net);
  }
  const monthEnds = await monthEndFigures(db, header, statements, balances, ownerOf);
  // Every month of the range is the forecast's, the first one included when --from is inside it
  // (its 1st, before --from, would read as copied history and drop the figures).
  for (const [key, figures] of monthEnds) Object.assign(monthOf(key), figures);
  const statementsWritten = once(statementsCsv, 'finish');
  statementsCsv.end();
  await json.array('statements', inPages(statements));
  await json.array('balances', inPages(balances));
  if (lists('full')) {
    const events = eventLines(world);
    if (events) await json.arrayOfLines('events', events);
    else await json.array('events', eventPages(db));
  }
  const webhooks = lists('full') ? await webhookReport(db) : undefined;
  if (webhooks) {
    await json.array('webhook_endpoints', inPages(webhooks.endpoints));
    await json.array('webhook_deliveries', inPages(webhooks.deliveries));
  }
  await json.end();
  await Promise.all([chargesWritten, statementsWritten]);

  const ordered = [...months.values()].sort((a, b) => a.month.localeCompare(b.month));
  // Totals: the money summed over the months; what stands at a month's end, at the last one's.
  const totals = { ...emptyMonth('total'), ...(ordered.length > 0 ? monthEndStates(ordered.at(-1)!) : {}) };
  for (const m of ordered) {
    for (const key of FLOW_FIGURES) totals[key] += m[key];
    for (const key of ['failed_renewals_by_reason', 'paid_out_by_owner', 'forfeited_by_owner'] as const) {
      for (const [name, amount] of Object.entries(m[key])) addTo(totals[key], name, amount);
    }
    for (const key of ['authorized', 'captured', 'released_at_expiry', 'reauthorized', 'debited_yen', 'debit_refunded_yen'] as const) totals.holds[key] += m.holds[key];
  }
  const { month: _total, ...totalFields } = totals;
  const summary: Summary = {
    scenario: header.scenario,
    from: toIsoSeconds(header.from),
    to: toIsoSeconds(header.to),
    seed: header.seed,
    steps: world.stats.steps,
    failed_steps: world.stats.failedSteps,
    job_runs: world.stats.jobRuns,
    months: ordered,
    totals: totalFields,
  };
  return { summary, days: [...days.values()].sort((a, b) => a.day.localeCompare(b.day)) };
}

/** Figures of a month that are sums of its events, summed again for the totals. */
const FLOW_FIGURES = [
  'charges',
  'captured_charges',
  'captured_yen',
  'failed_charges',
  'failed_renewals',
  'refunds',
  'refunded_yen',
  'fees_yen',
  'platform_fees_yen',
  'service_fees_yen',
  'adjustments_yen',
  'new_subscriptions',
  'churned_subscriptions',
  'recovered_subscriptions',
] as const;

/** What stands at a month's end: the totals take the last month's. */
function monthEndStates(m: MonthSummary): Pick<MonthSummary, 'mrr_yen' | 'subscriptions' | 'carried_by_owner'> {
  return { mrr_yen: m.mrr_yen, subscriptions: { ...m.subscriptions }, carried_by_owner: { ...m.carried_by_owner } };
}

const METRICS = ['mrr_yen', 'charges', 'captured_yen', 'failed_renewals', 'refunded_yen', 'fees_yen', 'platform_fees_yen', 'service_fees_yen', 'adjustments_yen', 'new_subscriptions', 'churned_subscriptions', 'recovered_subscriptions'] as const;

/** Month by month, metric by metric: baseline, variant, delta (variant − baseline). */
export function diffSummaries(baseline: Summary, variant: Summary): DiffRow[] {
  const monthsOf = new Set([...baseline.months, ...variant.months].map((m) => m.month));
  const rows: DiffRow[] = [];
  for (const month of [...monthsOf].sort()) {
    const a = baseline.months.find((m) => m.month === month) ?? emptyMonth(month);
    const b = variant.months.find((m) => m.month === month) ?? emptyMonth(month);
    for (const metric of METRICS) rows.push({ month, metric, baseline: a[metric], variant: b[metric], delta: b[metric] - a[metric] });
    for (const status of ['active', 'trial', 'paused', 'canceled'] as const) {
      const [x, y] = [a.subscriptions[status], b.subscriptions[status]];
      rows.push({ month, metric: `subscriptions:${status}`, baseline: x, variant: y, delta: y - x });
    }
    for (const key of ['paid_out_by_owner', 'carried_by_owner', 'forfeited_by_owner'] as const) {
      const owners = new Set([...Object.keys(a[key]), ...Object.keys(b[key])]);
      for (const owner of [...owners].sort()) {
        const x = a[key][owner] ?? 0;
        const y = b[key][owner] ?? 0;
        rows.push({ month, metric: `${key.replace('_by_owner', '')}:${owner}`, baseline: x, variant: y, delta: y - x });
      }
    }
  }
  return rows;
}

/** Rows as a text table: the first and last columns left-aligned, the others right-aligned. */
function textTable(head: readonly string[], rows: readonly string[][]): string[] {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => (i === 0 || i === cells.length - 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ').trimEnd();
  return [line(head), ...rows.map(line)];
}

const byName = (record: Record<string, number>) =>
  Object.entries(record)
    .map(([name, n]) => `${name} ${yen(n)}`)
    .join('; ') || '-';

/** The summary as tables for a terminal: the money of each month, then what stood at its end. */
export function formatSummary(summary: Summary, title = 'Simulation'): string {
  const all = [...summary.months, { ...summary.totals, month: 'total' }];
  const money = textTable(
    ['month', 'charges', 'captured ¥', 'failed renewals', 'refunds', 'refunded ¥', 'fees ¥', 'platform fees ¥', 'plan fees ¥', 'adjustments ¥', 'paid out by owner ¥'],
    all.map((m) => [
      m.month,
      yen(m.charges),
      yen(m.captured_yen),
      yen(m.failed_renewals),
      yen(m.refunds),
      yen(m.refunded_yen),
      yen(m.fees_yen),
      yen(m.platform_fees_yen),
      yen(m.service_fees_yen),
      yen(m.adjustments_yen),
      byName(m.paid_out_by_owner),
    ]),
  );
  const business = textTable(
    ['month', 'MRR ¥', 'active', 'trial', 'paused', 'canceled', 'new', 'churned', 'recovered', 'holds auth/capt/released/reauth', 'failed renewals by reason'],
    all.map((m) => [
      m.month,
      ...subscriberCells(m),
      `${m.holds.authorized}/${m.holds.captured}/${m.holds.released_at_expiry}/${m.holds.reauthorized}`,
      byName(m.failed_renewals_by_reason),
    ]),
  );
  const owners = [...new Set(all.flatMap((m) => [...Object.keys(m.carried_by_owner), ...Object.keys(m.forfeited_by_owner), ...Object.keys(m.paid_out_by_owner)]))].sort();
  const balances =
    owners.length === 0
      ? []
      : [
          '',
          'Balances by owner (¥): carried at month end / paid out / forfeited',
          ...textTable(
            ['month', ...owners],
            all.map((m) => [m.month, ...owners.map((o) => `${yen(m.carried_by_owner[o] ?? 0)} / ${yen(m.paid_out_by_owner[o] ?? 0)} / ${yen(m.forfeited_by_owner[o] ?? 0)}`)]),
          ),
        ];
  return [
    `${title}: ${summary.scenario ?? '(unnamed scenario)'}, ${formatJst(new Date(summary.from))} → ${formatJst(new Date(summary.to))} (exclusive), seed ${summary.seed}`,
    `${yen(summary.steps)} steps (${yen(summary.failed_steps)} failed), ${yen(summary.job_runs)} job runs; month-end figures in the total row are those at the end of the range`,
    '',
    ...money,
    '',
    ...business,
    ...balances,
  ].join('\n');
}

/** The changed months and metrics of a what-if, titled with the overlay's own name. */
export function formatDiff(rows: readonly DiffRow[], overlay: string): string {
  const changed = rows.filter((row) => row.delta !== 0);
  if (changed.length === 0) return `What-if "${overlay}": no difference from the baseline.`;
  const lines = changed.map((row) => `${row.month}  ${row.metric.padEnd(24)} ${yen(row.baseline).padStart(14)} → ${yen(row.variant).padStart(14)}  (${row.delta > 0 ? '+' : ''}${yen(row.delta)})`);
  return [`What-if "${overlay}" against the baseline (changed months and metrics):`, ...lines].join('\n');
}

export interface SummaryFiles {
  /** What summary.json holds: the summary, or for a what-if the baseline, variant and diff. */
  readonly json: unknown;
  readonly summary: Summary;
  readonly days: readonly DayPoint[];
  readonly title: string;
  readonly range: { readonly from: Date; readonly to: Date };
  readonly whatIf?: { readonly overlay: string; readonly variant: Summary; readonly diff: readonly DiffRow[] };
}

/**
 * Writes summary.json, report.html and the charts as SVG files under charts/ (the static export
 * for documents; report.html inlines the same SVGs).
 */
export async function writeSummaryFiles(dir: string, files: SummaryFiles): Promise<void> {
  mkdirSync(join(dir, 'charts'), { recursive: true });
  writeFileSync(join(dir, 'summary.json'), `${JSON.stringify(files.json, null, 2)}\n`);
  const charts = await renderCharts(files.summary, files.days, files.range, files.whatIf);
  for (const chart of charts) writeFileSync(join(dir, 'charts', `${chart.name}.svg`), chart.svg);
  writeFileSync(join(dir, 'report.html'), renderReportHtml({ title: files.title, summary: files.summary, charts, ...(files.whatIf ? { whatIf: files.whatIf } : {}) }));
}

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
import { sql, type Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { cardKey, chargeCardsOf } from '../charges/charge-record';
import { CHARGE_OBJECT_COLUMNS, chargeText, type ChargeRow } from '../charges/charges';
import { renderCard } from '../customers/card-object';
import type { Database } from '../db/schema';
import { parseInstant, toIsoSeconds } from '../domain/time';
import type { SimulatedWorld } from './simulate';
import { webhookReport } from './webhooks';
import { EVENT_TEXT_SQL } from '../events/outbox';
import { findOperation, runOperation } from '../operations/registry';
import { subscriptionObjects } from '../subscriptions/subscription-record';

const PAGE = 5_000;

/** The money of one JST month, from the simulated rows. */
export interface MonthSummary {
  month: string;
  charges: number;
  captured_charges: number;
  captured_yen: number;
  failed_charges: number;
  failed_renewals: number;
  refunds: number;
  refunded_yen: number;
  fees_yen: number;
  /**
   * Money that left for each owner (merchant account, tenant, platform) in balances closed in
   * the month, by their closing date: transfers positive, collected claims negative.
   */
  paid_out_by_owner: Record<string, number>;
}

export interface Summary {
  scenario: string | null;
  from: string;
  to: string;
  seed: number;
  steps: number;
  failed_steps: number;
  job_runs: number;
  months: MonthSummary[];
  totals: Omit<MonthSummary, 'month'>;
}

export interface DayPoint {
  readonly day: string;
  captured_yen: number;
  failures: number;
}

export interface ReportHeader {
  readonly scenario: string | null;
  readonly from: Date;
  readonly to: Date;
  readonly seed: number;
  /** A forecast (issue 19): the source it copied and what it assumed. */
  readonly source?: { readonly name: string; readonly snapshot_instant: Date; readonly assumptions: Readonly<Record<string, unknown>> };
}

/** `YYYY-MM-DD` of JST calendar days, by day number: a report asks for a few hundred days, each hundreds of times. */
const jstDays = new Map<number, string>();

function jstDay(at: Date): string {
  const shifted = at.getTime() + 9 * 3_600_000;
  const number = Math.floor(shifted / 86_400_000);
  let day = jstDays.get(number);
  if (day === undefined) {
    day = new Date(number * 86_400_000).toISOString().slice(0, 10);
    jstDays.set(number, day);
  }
  return day;
}

/** `YYYY-MM` of an instant in JST. */
export function jstMonth(at: Date): string {
  return jstDay(at).slice(0, 7);
}

function emptyMonth(month: string): MonthSummary {
  return { month, charges: 0, captured_charges: 0, captured_yen: 0, failed_charges: 0, failed_renewals: 0, refunds: 0, refunded_yen: 0, fees_yen: 0, paid_out_by_owner: {} };
}

/** An element already serialised (as JSON.stringify would have it), written as it is. */
class JsonText {
  constructor(readonly text: string) {}
}

/** Writes a JSON document section by section; arrays one element per line. */
class JsonSections {
  #first = true;
  constructor(private readonly out: WriteStream) {
    this.#write('{');
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

function single<T>(items: readonly T[]): Pages<T> {
  return (emit) => emit(items);
}

const REPORT_CHARGE_COLUMNS = [...CHARGE_OBJECT_COLUMNS, 'account_id', 'card_id', 'amount_captured', 'fee'] as const;
type ReportCharge = Pick<ChargeRow, (typeof REPORT_CHARGE_COLUMNS)[number]>;

/**
 * Charges in (account, created, id) order with their cards, a page at a time, read through one
 * cursor: no index has that order, so keyset pages each sorted the rest of the table (3.3 s of the
 * report at 10,000 simulated subscriptions); the cursor sorts once. Each card is read once for the
 * whole report, not once per charge: a subscriber's card appears in every renewal (on PGlite,
 * where every field read costs JavaScript work, reading them per page was most of the section).
 */
function chargePages(db: Kysely<Database>): Pages<{ row: ReportCharge; cardText: string | null }> {
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
      const cards = new Map<string, string | null>();
      const fetchPage = async () => {
        const rows = (await sql<ReportCharge>`FETCH ${sql.raw(String(PAGE))} FROM report_charges`.execute(trx)).rows;
        const unseen = new Map<string, ReportCharge>();
        for (const row of rows) {
          const key = cardKey(row.account_id, row.livemode, row.card_id);
          if (!cards.has(key)) unseen.set(key, row);
        }
        if (unseen.size > 0) {
          const found = await chargeCardsOf(trx, [...unseen.values()]);
          for (const key of unseen.keys()) {
            const card = found.get(key);
            cards.set(key, card === undefined ? null : JSON.stringify(renderCard(card)));
          }
        }
        return rows.map((row) => ({ row, cardText: cards.get(cardKey(row.account_id, row.livemode, row.card_id)) ?? null }));
      };
      await prefetching(fetchPage, (page) => page.length === 0, emit);
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

export interface WrittenReport {
  readonly summary: Summary;
  readonly days: DayPoint[];
}

/**
 * Writes report.json, charges.csv and statements.csv into `dir` and returns the summary and the
 * daily series (for summary.json, the chart and a what-if diff).
 */
export async function writeReport(world: SimulatedWorld, header: ReportHeader, dir: string): Promise<WrittenReport> {
  mkdirSync(dir, { recursive: true });
  const { db } = world.ctx;
  const months = new Map<string, MonthSummary>();
  // A forecast's copied history (before --from) is listed in report.json but not summed: the
  // months, totals and chart are what happens in the forecast range.
  const history = (at: Date) => header.source !== undefined && at.getTime() < header.from.getTime();
  const month = (at: Date) => {
    const key = jstMonth(at);
    if (history(at)) return emptyMonth(key);
    let entry = months.get(key);
    if (!entry) months.set(key, (entry = emptyMonth(key)));
    return entry;
  };
  const days = new Map<string, DayPoint>();
  const day = (at: Date) => {
    const key = jstDay(at);
    if (history(at)) return { day: key, captured_yen: 0, failures: 0 };
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
  await json.array('steps', single(world.outcomes), (step) => ({ ...step, at: toIsoSeconds(step.at) }));
  await json.array('job_runs', single(world.jobRuns), (run) => ({ job: run.job, slot: toIsoSeconds(run.slot), counts: run.counts }));

  // Subscriptions as they stand at the end (deleted ones too), then every state change.
  const subscriptions: Record<string, unknown>[] = [];
  for (const accountId of world.accounts) {
    for (const livemode of [false, true]) {
      const rows = await db.selectFrom('subscriptions').selectAll().where('account_id', '=', accountId).where('livemode', '=', livemode).orderBy('created_at').orderBy('subscription_id').execute();
      const objects = await subscriptionObjects(db, { accountId, livemode, kind: 'secret' }, rows);
      objects.forEach((object, i) => subscriptions.push({ ...object, deleted: rows[i]!.deleted_at !== null }));
    }
  }
  await json.array('subscriptions', single(subscriptions));
  const changes = await db
    .selectFrom('events')
    .select(['account_id', 'created_at', 'type', 'resource_id'])
    .select(sql<string | null>`data->>'status'`.as('status'))
    .where('type', 'like', 'subscription.%')
    .orderBy('account_id')
    .orderBy('seq')
    .execute();
  await json.array('subscription_changes', single(changes), (change) => ({
    at: toIsoSeconds(change.created_at),
    account: change.account_id,
    subscription: change.resource_id,
    type: change.type,
    status: change.status,
  }));

  const chargesCsv = createWriteStream(join(dir, 'charges.csv'));
  chargesCsv.write('id,account,created_at,customer,subscription,amount,paid,captured,captured_at,amount_captured,amount_refunded,refunded,failure_code,fee_rate,term_id\n');
  // Lines are written a page at a time.
  const csvLines: string[] = [];
  await json.array('charges', chargePages(db), ({ row, cardText }) => {
    const object = new JsonText(chargeText(row, cardText));
    const created = month(row.created_at);
    created.charges += 1;
    if (!row.paid) {
      created.failed_charges += 1;
      if (row.subscription_id !== null) created.failed_renewals += 1;
      day(row.created_at).failures += 1;
    }
    if (row.captured_at !== null && row.amount_captured !== null) {
      const captured = month(row.captured_at);
      captured.captured_charges += 1;
      captured.captured_yen += row.amount_captured;
      day(row.captured_at).captured_yen += row.amount_captured;
    }
    if (row.captured_at !== null && row.fee !== null) month(row.captured_at).fees_yen += row.fee;
    csvLines.push(
      [
        row.charge_id,
        row.account_id,
        toIsoSeconds(row.created_at),
        row.customer_id ?? '',
        row.subscription_id ?? '',
        row.amount,
        row.paid,
        row.captured,
        row.captured_at ? toIsoSeconds(row.captured_at) : '',
        row.amount_captured ?? '',
        row.amount_refunded,
        row.refunded,
        row.failure_code ?? '',
        row.fee_rate,
        row.term_id ?? '',
      ].join(',') + '\n',
    );
    if (csvLines.length >= PAGE) chargesCsv.write(csvLines.splice(0).join(''));
    return object;
  });
  chargesCsv.write(csvLines.join(''));
  // Listen before ending: 'finish' may come before the later awaits are done.
  const chargesWritten = once(chargesCsv, 'finish');
  chargesCsv.end();

  const refunds = await db.selectFrom('refunds').selectAll().orderBy('account_id').orderBy('created_at').orderBy('refund_id').execute();
  await json.array('refunds', single(refunds), (refund) => {
    const m = month(refund.created_at);
    m.refunds += 1;
    m.refunded_yen += refund.amount;
    const offset = (refund as { refund_fee_offset?: number | null }).refund_fee_offset;
    if (typeof offset === 'number') m.fees_yen -= offset;
    return { id: refund.refund_id, object: 'refund', livemode: refund.livemode, account: refund.account_id, charge: refund.charge_id, amount: refund.amount, reason: refund.reason, created: Math.floor(refund.created_at.getTime() / 1000) };
  });

  const terms = await listAll(world, 'terms.list');
  await json.array('terms', single(terms));
  const statements = await listAll(world, 'statements.list');
  const statementsCsv = createWriteStream(join(dir, 'statements.csv'));
  statementsCsv.write('statement,term,owner,tenant,type,title,subject,name,amount,net\n');
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
  for (const statement of statements) {
    const term = (statement.term as { id?: string } | undefined)?.id ?? statement.term_id;
    for (const item of (statement.items as Record<string, unknown>[] | undefined) ?? []) {
      statementsCsv.write(
        [statement.id, term, ownerOf(statement), statement.tenant_id, statement.type, statement.title, item.subject, item.name, item.amount, statement.net].map(csvCell).join(',') + '\n',
      );
    }
  }
  for (const balance of balances) {
    if (balance.closed !== true || typeof balance.closed_date !== 'string' || typeof balance.net !== 'number') continue;
    const m = month(parseInstant(balance.closed_date));
    const owner = ownerOf(balance);
    m.paid_out_by_owner[owner] = (m.paid_out_by_owner[owner] ?? 0) + balance.net;
  }
  const statementsWritten = once(statementsCsv, 'finish');
  statementsCsv.end();
  await json.array('statements', single(statements));
  await json.array('balances', single(balances));
  const events = eventLines(world);
  if (events) await json.arrayOfLines('events', events);
  else await json.array('events', eventPages(db));
  const webhooks = await webhookReport(db);
  if (webhooks) {
    await json.array('webhook_endpoints', single(webhooks.endpoints));
    await json.array('webhook_deliveries', single(webhooks.deliveries));
  }
  await json.end();
  await Promise.all([chargesWritten, statementsWritten]);

  const ordered = [...months.values()].sort((a, b) => a.month.localeCompare(b.month));
  const totals = emptyMonth('total');
  for (const m of ordered) {
    for (const key of ['charges', 'captured_charges', 'captured_yen', 'failed_charges', 'failed_renewals', 'refunds', 'refunded_yen', 'fees_yen'] as const) totals[key] += m[key];
    for (const [owner, net] of Object.entries(m.paid_out_by_owner)) totals.paid_out_by_owner[owner] = (totals.paid_out_by_owner[owner] ?? 0) + net;
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

const METRICS = ['charges', 'captured_yen', 'failed_renewals', 'refunded_yen', 'fees_yen'] as const;

export interface DiffRow {
  readonly month: string;
  readonly metric: string;
  readonly baseline: number;
  readonly variant: number;
  readonly delta: number;
}

/** Month by month, metric by metric: baseline, variant, delta (variant − baseline). */
export function diffSummaries(baseline: Summary, variant: Summary): DiffRow[] {
  const monthsOf = new Set([...baseline.months, ...variant.months].map((m) => m.month));
  const rows: DiffRow[] = [];
  for (const month of [...monthsOf].sort()) {
    const a = baseline.months.find((m) => m.month === month) ?? emptyMonth(month);
    const b = variant.months.find((m) => m.month === month) ?? emptyMonth(month);
    for (const metric of METRICS) rows.push({ month, metric, baseline: a[metric], variant: b[metric], delta: b[metric] - a[metric] });
    const owners = new Set([...Object.keys(a.paid_out_by_owner), ...Object.keys(b.paid_out_by_owner)]);
    for (const owner of [...owners].sort()) {
      const x = a.paid_out_by_owner[owner] ?? 0;
      const y = b.paid_out_by_owner[owner] ?? 0;
      rows.push({ month, metric: `paid_out:${owner}`, baseline: x, variant: y, delta: y - x });
    }
  }
  return rows;
}

const yen = (n: number) => n.toLocaleString('en-US');

/** The summary as a table for a terminal. */
export function formatSummary(summary: Summary, title = 'Simulation'): string {
  const head = ['month', 'charges', 'captured ¥', 'failed renewals', 'refunds', 'refunded ¥', 'fees ¥', 'paid out by owner'];
  const rows = [...summary.months, { ...summary.totals, month: 'total' }].map((m) => [
    m.month,
    yen(m.charges),
    yen(m.captured_yen),
    yen(m.failed_renewals),
    yen(m.refunds),
    yen(m.refunded_yen),
    yen(m.fees_yen),
    Object.entries(m.paid_out_by_owner)
      .map(([owner, net]) => `${owner} ${yen(net)}`)
      .join('; ') || '-',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 || i === cells.length - 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ').trimEnd();
  return [
    `${title}: ${summary.scenario ?? '(unnamed scenario)'}, ${summary.from} → ${summary.to} (exclusive), seed ${summary.seed}`,
    `${yen(summary.steps)} steps (${yen(summary.failed_steps)} failed), ${yen(summary.job_runs)} job runs`,
    '',
    line(head),
    ...rows.map(line),
  ].join('\n');
}

export function formatDiff(rows: readonly DiffRow[]): string {
  const changed = rows.filter((row) => row.delta !== 0);
  if (changed.length === 0) return 'What-if: no difference from the baseline.';
  const lines = changed.map((row) => `${row.month}  ${row.metric.padEnd(18)} ${yen(row.baseline).padStart(14)} → ${yen(row.variant).padStart(14)}  (${row.delta > 0 ? '+' : ''}${yen(row.delta)})`);
  return ['What-if against the baseline (changed months and metrics):', ...lines].join('\n');
}

/** Daily captured yen (bars) and failed charges (red line) as a standalone SVG. */
export function renderChart(days: readonly DayPoint[], title: string): string {
  const width = 960;
  const height = 320;
  const pad = { left: 70, right: 50, top: 30, bottom: 40 };
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const maxYen = Math.max(1, ...days.map((d) => d.captured_yen));
  const maxFail = Math.max(1, ...days.map((d) => d.failures));
  const step = days.length > 0 ? plotW / days.length : plotW;
  const esc = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const bars = days
    .map((d, i) => {
      const h = (d.captured_yen / maxYen) * plotH;
      return `<rect x="${(pad.left + i * step).toFixed(2)}" y="${(pad.top + plotH - h).toFixed(2)}" width="${Math.max(step - 0.5, 0.5).toFixed(2)}" height="${h.toFixed(2)}" fill="#4477aa"><title>${d.day}: ¥${yen(d.captured_yen)} captured, ${d.failures} failed</title></rect>`;
    })
    .join('\n');
  const line = days.map((d, i) => `${(pad.left + i * step + step / 2).toFixed(2)},${(pad.top + plotH - (d.failures / maxFail) * plotH).toFixed(2)}`).join(' ');
  const first = days[0]?.day ?? '';
  const last = days.at(-1)?.day ?? '';
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">
<title>${esc(title)}</title>
<rect width="${width}" height="${height}" fill="white"/>
<text x="${pad.left}" y="18">${esc(title)}: daily captured yen (bars, left axis) and failed charges (red, right axis)</text>
<line x1="${pad.left}" y1="${pad.top + plotH}" x2="${pad.left + plotW}" y2="${pad.top + plotH}" stroke="#333"/>
<line x1="${pad.left}" y1="${pad.top}" x2="${pad.left}" y2="${pad.top + plotH}" stroke="#333"/>
<text x="${pad.left - 6}" y="${pad.top + 4}" text-anchor="end">¥${yen(maxYen)}</text>
<text x="${pad.left - 6}" y="${pad.top + plotH}" text-anchor="end">0</text>
<text x="${pad.left + plotW + 6}" y="${pad.top + 4}" fill="#cc3311">${maxFail}</text>
<text x="${pad.left}" y="${height - 12}">${first}</text>
<text x="${pad.left + plotW}" y="${height - 12}" text-anchor="end">${last}</text>
${bars}
${days.length > 0 ? `<polyline points="${line}" fill="none" stroke="#cc3311" stroke-width="1.5"/>` : ''}
</svg>
`;
}

export function writeSummaryFiles(dir: string, summary: unknown, days: readonly DayPoint[], title: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'summary.json'), `${JSON.stringify(summary, null, 2)}\n`);
  writeFileSync(join(dir, 'chart.svg'), renderChart(days, title));
}

/**
 * The event outbox (service rules §5): every state change writes its event in the same
 * transaction as the change, so an event exists exactly when the change it reports does.
 * Each event's webhook deliveries are written with it (src/webhooks); nothing here talks to the network.
 */
import { sql, type Kysely, type RawBuilder, type Selectable } from 'kysely';
import type { Database, EventsTable } from '../db/schema';
import { utf8Text } from '../db/utf8-param';
import { bulkColumns, type BulkDocument, type ColumnsOf } from '../db/bulk-rows';
import { ID_PREFIX, type IdGenerator } from '../domain/ids';
import { toIsoSeconds, toUnixSeconds } from '../domain/time';
import { instantFromEpochMs } from '../db/epoch-ms';
import { accountsOf, inAccounts } from '../db/account-scope';

export type ApiVersion = 'v1' | 'v2';

/** The resource an event reports: an API-shaped object with its id and object type. */
export interface EventResource {
  readonly id: string;
  readonly object: string;
  readonly [field: string]: unknown;
}

export interface EventInput {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly type: string;
  readonly data: EventResource;
  /** The business instant of the change (a renewal's due instant, not when the job woke up). */
  readonly at: Date;
  readonly apiVersion?: ApiVersion;
}

export interface StoredEvent {
  readonly accountId: string;
  readonly id: string;
  readonly livemode: boolean;
  readonly apiVersion: ApiVersion;
  readonly type: string;
  readonly data: EventResource;
  readonly createdAt: Date;
  readonly pendingWebhooks: number;
}

/**
 * Writes events in one statement, however many: jobs record thousands per batch. Ids are drawn in
 * input order, so a seeded generator gives the same ids for the same batch.
 * Must run on the executor (transaction) that makes the state change.
 */
export async function recordEvents(executor: Kysely<Database>, ids: IdGenerator, events: readonly EventInput[]): Promise<string[]> {
  return recordPreparedEvents(executor, ids, prepareEvents(events));
}

/** Every column of an event's INSERT but the id and the document (zipped with those by position). */
const EVENT_COLUMNS = bulkColumns<EventInput>()({
  a: ['text', 'accountId'],
  l: ['boolean', 'livemode'],
  v: ['text', (e) => e.apiVersion ?? 'v1'],
  t: ['text', 'type'],
  o: ['text', (e) => e.data.object],
  r: ['text', (e) => e.data.id],
  c: ['instant', 'at'],
});

/** Events serialised for their INSERT, ids not yet drawn (see prepareEvents). */
export interface PreparedEvents {
  readonly kinds: readonly ('eventV1' | 'eventV2')[];
  /** Every column but the id and the document, as one JSON array of rows. */
  readonly columns: BulkDocument<ColumnsOf<typeof EVENT_COLUMNS>>;
  /** The documents, newline-separated (JSON.stringify never emits a raw newline). */
  readonly documents: string;
  /** The events' accounts (account-scope.ts): the statement writing them reads only those accounts' endpoints. */
  readonly accountIds: readonly string[];
}

/**
 * Serialises events for recordPreparedEvents, without drawing their ids: a caller can do this
 * while an earlier statement of its transaction runs, and draw the ids (in order) when it records.
 */
export function prepareEvents(events: readonly EventInput[]): PreparedEvents {
  return {
    kinds: events.map((event) => ((event.apiVersion ?? 'v1') === 'v1' ? 'eventV1' : 'eventV2')),
    columns: EVENT_COLUMNS.document(events),
    documents: events.map((e) => JSON.stringify(e.data)).join('\n'),
    accountIds: events.length === 0 ? [] : accountsOf(events, (e) => e.accountId),
  };
}

/** Draws the ids of prepared events, in order, and writes them in one statement; see recordEvents. */
export async function recordPreparedEvents(executor: Kysely<Database>, ids: IdGenerator, prepared: PreparedEvents): Promise<string[]> {
  const eventIds = prepared.kinds.map((kind) => ids.next(kind));
  await writeEvents(executor, prepared, eventIds);
  return eventIds;
}

/**
 * The ids of events to be written later (recordEventsWithIds), drawn now: a caller that writes
 * events of several steps in one statement, in an order other than the one it draws in.
 */
export function drawEventIds(ids: IdGenerator, events: readonly Pick<EventInput, 'apiVersion'>[]): string[] {
  return events.map((event) => ids.next((event.apiVersion ?? 'v1') === 'v1' ? 'eventV1' : 'eventV2'));
}

/**
 * Where a step deep in a transaction sends the events it makes: by default recordEvents writes them
 * at once; heldEvents keeps them, ids drawn, for a caller that writes the events of many steps in
 * its own order.
 */
export type EventRecorder = (events: readonly EventInput[]) => Promise<unknown>;

/** Events held with their ids (drawn when they are made, as recordEvents would), to write later with recordEventsWithIds. */
export function heldEvents(ids: IdGenerator): { readonly record: EventRecorder; readonly held: { readonly event: EventInput; readonly id: string }[] } {
  const held: { event: EventInput; id: string }[] = [];
  return {
    held,
    record: async (events) => {
      const eventIds = drawEventIds(ids, events);
      events.forEach((event, k) => held.push({ event, id: eventIds[k]! }));
    },
  };
}

/** Writes events whose ids were drawn already (drawEventIds, one per event, in the same order); see recordEvents. */
export async function recordEventsWithIds(executor: Kysely<Database>, events: readonly EventInput[], eventIds: readonly string[]): Promise<string[]> {
  if (eventIds.length !== events.length) throw new Error(`${events.length} events given ${eventIds.length} ids`);
  await writeEvents(executor, prepareEvents(events), eventIds);
  return [...eventIds];
}

async function writeEvents(executor: Kysely<Database>, prepared: PreparedEvents, eventIds: readonly string[]): Promise<void> {
  if (prepared.kinds.length === 0) return;
  // Three text values zipped by position (ROWS FROM): the columns as a JSON array of rows, the
  // documents and the ids newline-separated, split server-side, each document parsed once as json.
  // A jsonb array parameter cost BIND time parsing one giant jsonb and as long again extracting
  // its elements; typed array parameters were escaped element by element here and parsed again by
  // the server (figures: docs/decisions/performance.md, "Measured figures moved out of comments").
  await withWebhookDeliveries(sql`
    INSERT INTO events (account_id, event_id, livemode, api_version, type, object_type, resource_id, data, created_at, pending_webhooks)
    WITH x AS MATERIALIZED (
      SELECT * FROM ROWS FROM (
        ${EVENT_COLUMNS.recordset(prepared.columns)} AS (${EVENT_COLUMNS.definition}),
        string_to_table(${eventIds.join('\n')}, E'\\n'),
        string_to_table(${utf8Text(prepared.documents)}, E'\\n')
      ) WITH ORDINALITY AS x(a, l, v, t, o, r, c, id, d, n)),
    p AS (${pendingWebhooksSql('x', 'x.a', 'x.l', 'x.v', 'x.t', prepared.accountIds)})
    SELECT x.a, x.id, x.l, x.v, x.t, x.o, x.r, x.d::json, ${instantFromEpochMs('x.c')}, coalesce(p.pending, 0)
    FROM x LEFT JOIN p ON p.n = x.n
    ORDER BY x.n`, prepared.accountIds).execute(executor);
}

/**
 * Whether the endpoint row `w` receives an event of the given account, mode, API version and type
 * (SQL expressions). `accountIds`: the events' accounts, bound as parameters too (account-scope.ts:
 * on Citus the statement is routed to their shard, not sent to every node).
 */
function endpointReceives(account: string, livemode: string, version: string, type: string, accountIds: readonly string[]): RawBuilder<boolean> {
  const [a, l, v, t] = [account, livemode, version, type].map((column) => sql.raw(column));
  return sql<boolean>`${inAccounts('w.account_id', accountIds)} AND w.account_id = ${a} AND w.livemode = ${l} AND w.status = 'enabled'
    AND (w.api_version IS NULL OR w.api_version = ${v}) AND (w.event_types IS NULL OR ${t} = ANY(w.event_types))`;
}

/**
 * The `pending_webhooks` of new events: the number of enabled endpoints that receive
 * each, each of which gets a delivery row (withWebhookDeliveries). A query giving `n, pending` for
 * the rows of the CTE `rows` (numbered by a column `n`) that have at least one: the caller LEFT
 * JOINs it on `n` (coalesce to 0) and inserts ORDER BY n, so the event rows keep their order (and
 * their sequence numbers). An aggregate joined by row, not a correlated subquery: Citus refuses
 * those when FROM holds a set-returning function (ROWS FROM, unnest).
 */
export function pendingWebhooksSql(rows: string, account: string, livemode: string, version: string, type: string, accountIds: readonly string[]): RawBuilder<{ n: number; pending: number }> {
  return sql`SELECT ${sql.raw(rows)}.n, count(*)::int AS pending
    FROM ${sql.raw(rows)} JOIN webhook_endpoints w ON ${endpointReceives(account, livemode, version, type, accountIds)}
    GROUP BY ${sql.raw(rows)}.n`;
}

/**
 * Every INSERT INTO events goes through this: in the same statement (and so the same snapshot of
 * the endpoints as pendingWebhooksSql), one webhook delivery row per written event and endpoint
 * that receives it, due at the event's instant. Written in the event's own transaction, the
 * deliveries exist exactly when their event does: no reader of the outbox can miss one (an
 * outbox cursor could skip an event whose transaction commits after a later one's).
 */
export function withWebhookDeliveries(insertEvents: RawBuilder<unknown>, accountIds: readonly string[], around?: AroundEvents): RawBuilder<unknown> {
  const written = sql`written AS (${insertEvents} RETURNING account_id, event_id, livemode, api_version, type, created_at, object_type, resource_id, data)`;
  // A delivery is on the test clock of its event's customer (src/test-clocks/clock-scope.ts): the
  // customer the event's object names (v1 `customer`, v2 `customer_id`, or a dispute's charge's
  // customer: a dispute names its charge only), or the customer itself; a clock's own events are on it, and
  // so are those of its books (a test-mode term, statement or balance carrying the clock).
  const book = (table: string, id: string) =>
    sql`SELECT b.test_clock_id FROM ${sql.table(table)} b WHERE ${inAccounts('b.account_id', accountIds)} AND b.account_id = e.account_id AND NOT b.livemode AND ${sql.ref(`b.${id}`)} = e.resource_id`;
  const deliveries = sql`INSERT INTO webhook_deliveries (account_id, endpoint_id, event_id, next_attempt_at, created_at, test_clock_id)
    SELECT e.account_id, w.endpoint_id, e.event_id, e.created_at, e.created_at, coalesce(k.test_clock_id, CASE WHEN e.object_type = 'test_clock' THEN e.resource_id END,
      CASE WHEN NOT e.livemode AND (${sql.join([ID_PREFIX.term, ID_PREFIX.statement, ID_PREFIX.balance].map((prefix) => sql`starts_with(e.resource_id, ${prefix})`), sql` OR `)}) THEN (${book('terms', 'term_id')} UNION ALL ${book('statements', 'statement_id')} UNION ALL ${book('balances', 'balance_id')} LIMIT 1) END)
    FROM written e JOIN webhook_endpoints w ON ${endpointReceives('e.account_id', 'e.livemode', 'e.api_version', 'e.type', accountIds)}
    LEFT JOIN customers k ON NOT e.livemode AND ${inAccounts('k.account_id', accountIds)} AND k.account_id = e.account_id AND k.livemode = e.livemode
      AND k.customer_id = CASE WHEN e.object_type = 'customer' THEN e.resource_id ELSE coalesce(e.data->>'customer', e.data->>'customer_id',
        (SELECT h.customer_id FROM charges h WHERE ${inAccounts('h.account_id', accountIds)} AND h.account_id = e.account_id AND NOT h.livemode AND h.charge_id = e.data->>'charge_id')) END
      AND k.test_clock_id IS NOT NULL`;
  if (around === undefined) return sql`WITH ${written} ${deliveries}`;
  return sql`WITH ${around.before}, ${written}, deliveries AS (${deliveries}) ${around.select}`;
}

/**
 * The INSERT of v1 events whose rows a statement builds in SQL (the charge objects of
 * CHARGE_OBJECT_SQL, src/charges/charge-record.ts), written like recordEvents' own: each row's
 * `pending_webhooks` counted by pendingWebhooksSql, the rows in their order. `x`: a common table
 * expression of the statement, one row per event, with the columns account_id, eid (the event id,
 * drawn in the caller's order), livemode, t (the type), the resource's id column, data, at and n
 * (the order). Pass the result to withWebhookDeliveries, after `WITH x AS (…),` (or with `x`
 * among AroundEvents' `before`).
 */
export function insertBuiltEvents(objectType: 'charge', idColumn: 'charge_id', accountIds: readonly string[]): RawBuilder<unknown> {
  return sql`p AS (${pendingWebhooksSql('x', 'x.account_id', 'x.livemode', "'v1'", 'x.t', accountIds)})
    INSERT INTO events (account_id, event_id, livemode, api_version, type, object_type, resource_id, data, created_at, pending_webhooks)
    SELECT x.account_id, x.eid, x.livemode, 'v1', x.t, ${sql.lit(objectType)}, x.${sql.raw(idColumn)}, x.data, x.at, coalesce(p.pending, 0) FROM x LEFT JOIN p ON p.n = x.n
    ORDER BY x.n`;
}

/**
 * What a statement that writes events also does (withWebhookDeliveries): `before`, common table
 * expressions ahead of the events' (the state change itself, say `c AS (INSERT … RETURNING *)`,
 * which the events' INSERT may read), and `select`, the statement's result (`SELECT * FROM c`).
 * One round trip for the change, its events and their deliveries.
 */
export interface AroundEvents {
  readonly before: RawBuilder<unknown>;
  readonly select: RawBuilder<unknown>;
}

/** Writes one event; see recordEvents. */
export async function recordEvent(executor: Kysely<Database>, ids: IdGenerator, event: EventInput): Promise<string> {
  const [id] = await recordEvents(executor, ids, [event]);
  return id!;
}

/** Events of an account in the order they were written (oldest first). */
export async function listEvents(
  executor: Kysely<Database>,
  accountId: string,
  filter: { readonly type?: string; readonly resourceId?: string } = {},
): Promise<StoredEvent[]> {
  let query = executor.selectFrom('events').selectAll().where('account_id', '=', accountId);
  if (filter.type !== undefined) query = query.where('type', '=', filter.type);
  if (filter.resourceId !== undefined) query = query.where('resource_id', '=', filter.resourceId);
  const rows = await query.orderBy('created_at').orderBy('seq').execute();
  return rows.map(storedEvent);
}

/** An `events` row as the outbox's StoredEvent. */
export function storedEvent(row: Selectable<EventsTable>): StoredEvent {
  return {
    accountId: row.account_id,
    id: row.event_id,
    livemode: row.livemode,
    apiVersion: row.api_version,
    type: row.type,
    data: row.data as EventResource,
    createdAt: row.created_at,
    pendingWebhooks: row.pending_webhooks,
  };
}

/**
 * A string (kept: group 1) or a run of whitespace outside strings (dropped), and the replacement
 * that keeps group 1: escape-string literals, whatever the server's standard_conforming_strings.
 */
const JSON_STRING_OR_WHITESPACE = String.raw`E'("(?:[^"\\\\]|\\\\.)*")|[ \\t\\n\\r]+'`;
const GROUP_1 = String.raw`E'\\1'`;

/**
 * The SQL expression that prints a JSON text as JSON.stringify prints it parsed: without
 * whitespace outside strings, keys in their stored order. A text without any blank, tab or line
 * break (most documents this process writes) passes as it is after four byte searches (a regular
 * expression test, `~ '[ \t\n\r]'`, was most of the printing time of a large batch: see
 * docs/decisions/performance.md, "Measured figures moved out of comments"); any other (a blank inside a
 * string, json_build_object's `"a" : 1`, jsonb's `{"a": 1}`, pretty printers' line breaks) goes through a regular expression that keeps every
 * string whole and drops the whitespace between them. `text` is repeated: pass an expression that
 * is cheap to evaluate again (a column, a cast of one).
 */
export function compactJsonSql(text: RawBuilder<string>): RawBuilder<string> {
  return sql<string>`CASE
    WHEN strpos(${text}, ' ') > 0 OR strpos(${text}, E'\\n') > 0 OR strpos(${text}, E'\\t') > 0 OR strpos(${text}, E'\\r') > 0
    THEN regexp_replace(${text}, ${sql.raw(JSON_STRING_OR_WHITESPACE)}, ${sql.raw(GROUP_1)}, 'g')
    ELSE ${text} END`;
}

/**
 * One field of an event object: its name, how JS computes it from the stored event, and the SQL
 * that prints its JSON text from an `events` row `e` (or `json`, a constant JSON text). The one
 * source of truth of the event object: renderEvent and EVENT_TEXT_SQL are derived from these lists.
 */
export interface EventField {
  readonly name: string;
  readonly js: (event: StoredEvent) => unknown;
  readonly sql: RawBuilder<string> | { readonly json: string };
}

const ISO_SECONDS_SQL = sql<string>`'"' || to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || '"'`;
const EVENT_HEAD: readonly EventField[] = [
  { name: 'id', js: (e) => e.id, sql: sql`to_json(e.event_id)::text` },
  { name: 'object', js: () => 'event', sql: { json: '"event"' } },
  { name: 'livemode', js: (e) => e.livemode, sql: sql`e.livemode::text` },
];
const EVENT_TAIL: readonly EventField[] = [
  { name: 'type', js: (e) => e.type, sql: sql`to_json(e.type)::text` },
  { name: 'pending_webhooks', js: (e) => e.pendingWebhooks, sql: sql`e.pending_webhooks::text` },
  { name: 'data', js: (e) => e.data, sql: compactJsonSql(sql`e.data::text`) },
];
/** The v1 event: `created` in UNIX seconds. */
export const EVENT_V1_FIELDS: readonly EventField[] = [
  ...EVENT_HEAD,
  { name: 'created', js: (e) => toUnixSeconds(e.createdAt), sql: sql`floor(extract(epoch FROM e.created_at))::bigint::text` },
  ...EVENT_TAIL,
];
/** The v2 event: ISO instants. */
export const EVENT_V2_FIELDS: readonly EventField[] = [
  ...EVENT_HEAD,
  { name: 'created_at', js: (e) => toIsoSeconds(e.createdAt), sql: ISO_SECONDS_SQL },
  { name: 'updated_at', js: (e) => toIsoSeconds(e.createdAt), sql: ISO_SECONDS_SQL },
  ...EVENT_TAIL,
];

/** The renderer of an event field list: the object, fields in the list's order. */
export function eventRenderer(fields: readonly EventField[]): (event: StoredEvent) => Record<string, unknown> {
  return (event) => {
    const object: Record<string, unknown> = {};
    for (const field of fields) object[field.name] = field.js(event);
    return object;
  };
}

/** The SQL printing an event field list as JSON.stringify prints its object; constant pieces are joined into one literal. */
export function eventTextSql(fields: readonly EventField[]): RawBuilder<string> {
  const parts: (string | RawBuilder<string>)[] = [];
  const text = (t: string) => {
    const last = parts.at(-1);
    if (typeof last === 'string') parts[parts.length - 1] = last + t;
    else parts.push(t);
  };
  fields.forEach((field, i) => {
    text(`${i === 0 ? '{' : ','}${JSON.stringify(field.name)}:`);
    if ('json' in field.sql) text(field.sql.json);
    else parts.push(field.sql);
  });
  text('}');
  return sql<string>`${sql.join(parts.map((p) => (typeof p === 'string' ? sql.lit(p) : p)), sql` || `)}`;
}

/**
 * The SQL expression that prints an `events` row (alias `e`) as renderEvent's object, exactly as
 * JSON.stringify prints it, with the stored document in `data` as stored but compacted: for a
 * reader that copies many events (the simulation report) without parsing a document or building
 * an object per event. Derived from the same field lists as renderEvent.
 */
export const EVENT_TEXT_SQL = sql<string>`CASE WHEN e.api_version = 'v1'
  THEN ${eventTextSql(EVENT_V1_FIELDS)}
  ELSE ${eventTextSql(EVENT_V2_FIELDS)}
  END`;

const renderV1Event = eventRenderer(EVENT_V1_FIELDS);
const renderV2Event = eventRenderer(EVENT_V2_FIELDS);

/** The event as the API shows it: v1 with `created` in UNIX seconds, v2 with ISO instants. */
export function renderEvent(event: StoredEvent): Record<string, unknown> {
  return event.apiVersion === 'v1' ? renderV1Event(event) : renderV2Event(event);
}

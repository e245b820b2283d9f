/**
 * The event outbox (service rules §5): every state change writes its event in the same
 * transaction as the change, so an event exists exactly when the change it reports does.
 * Each event's webhook deliveries are written with it (src/webhooks); nothing here talks to the network.
 */
import { CompiledQuery, sql, type Kysely, type RawBuilder, type Selectable } from 'kysely';
import type { Database, EventsTable } from '../db/schema';
import { ID_PREFIX, type IdGenerator } from '../domain/ids';
import { toIsoSeconds, toUnixSeconds } from '../domain/time';
import { accountsOf, inAccounts } from '../db/account-scope';
import { routedWhole } from '../db/citus-shape';
import { instantFromEpochMs } from '../db/epoch-ms';
import { utf8Text } from '../db/utf8-param';

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

/** One event's row as INSERTed, but for its id and `pending_webhooks`. */
export interface EventRow {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly apiVersion: ApiVersion;
  readonly type: string;
  readonly objectType: string;
  readonly resourceId: string;
  /** The document as stored (JSON text). */
  readonly data: string;
  readonly at: Date;
}

/** Events serialised for their INSERT, ids not yet drawn (see prepareEvents). */
export interface PreparedEvents {
  readonly kinds: readonly ('eventV1' | 'eventV2')[];
  readonly rows: readonly EventRow[];
  /** The events' accounts (account-scope.ts): the statements writing them read only those accounts' endpoints. */
  readonly accountIds: readonly string[];
}

/**
 * Serialises events for recordPreparedEvents, without drawing their ids: a caller can do this
 * while an earlier statement of its transaction runs, and draw the ids (in order) when it records.
 */
export function prepareEvents(events: readonly EventInput[]): PreparedEvents {
  return {
    kinds: events.map((event) => ((event.apiVersion ?? 'v1') === 'v1' ? 'eventV1' : 'eventV2')),
    rows: events.map((e) => ({
      accountId: e.accountId,
      livemode: e.livemode,
      apiVersion: e.apiVersion ?? 'v1',
      type: e.type,
      objectType: e.data.object,
      resourceId: e.data.id,
      data: JSON.stringify(e.data),
      at: e.at,
    })),
    accountIds: events.length === 0 ? [] : accountsOf(events, (e) => e.accountId),
  };
}

/** Draws the ids of prepared events, in order, and writes them in one statement; see recordEvents. */
export async function recordPreparedEvents(executor: Kysely<Database>, ids: IdGenerator, prepared: PreparedEvents): Promise<string[]> {
  const eventIds = prepared.kinds.map((kind) => ids.next(kind));
  await writeEventRows(executor, prepared.rows, eventIds);
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
  await writeEventRows(executor, prepareEvents(events).rows, eventIds);
  return [...eventIds];
}

/** An enabled webhook endpoint as the outbox matches events to it. */
interface ReceivingEndpoint {
  readonly account_id: string;
  readonly endpoint_id: string;
  readonly livemode: boolean;
  readonly api_version: string | null;
  readonly event_types: string[] | null;
}

/** Whether the endpoint receives the event: same account and mode, its API version (or any), one of its types (or any). */
function receives(w: ReceivingEndpoint, e: EventRow): boolean {
  return w.account_id === e.accountId && w.livemode === e.livemode && (w.api_version === null || w.api_version === e.apiVersion) && (w.event_types === null || w.event_types.includes(e.type));
}

/** PostgreSQL's limit on the parameters of one statement is 65,535; an INSERT takes rows up to this many. */
const MAX_PARAMETERS = 60_000;

/**
 * Writes events with their ids, their `pending_webhooks` and their webhook deliveries, every
 * statement naming the events' accounts (account-scope.ts). The shape is the store's
 * (routedWhole, src/db/citus-shape.ts):
 *
 * - a single PostgreSQL (or PGlite): one statement (eventsWithDeliveries): the rows as a set built
 *   from three text parameters (eventRowsSet), the events and their deliveries inserted from them,
 *   each event's count and delivery rows from the same snapshot of the endpoints;
 * - a Citus coordinator: statements each routed whole to the account's node
 *   (docs/decisions/citus.md, "One-phase commits"): (1) the accounts' enabled endpoints, read once;
 *   which endpoints receive each event is decided here, so the count of each event
 *   (`pending_webhooks`) and its delivery rows come from the same read and always agree; (2) the
 *   events, a multi-row `INSERT … VALUES` in input order, split under the parameter limit (not
 *   `INSERT … SELECT`: Citus copies such rows through the coordinator into a table with an
 *   identity column, and that copy commits in two phases); (3) per account with deliveries, one
 *   `INSERT … SELECT` of the (event, endpoint) pairs joined to the events just written.
 *
 * Either way the events are inserted in input order (their sequence numbers follow it). On Citus a
 * parameter of equal value in one column is sent once (the account, the mode, the type of most
 * rows), so a statement holds more rows.
 */
export async function writeEventRows(executor: Kysely<Database>, rows: readonly EventRow[], eventIds: readonly string[]): Promise<void> {
  if (rows.length === 0) return;
  if (eventIds.length !== rows.length) throw new Error(`${rows.length} events given ${eventIds.length} ids`);
  const accountIds = accountsOf(rows, (row) => row.accountId);
  if (!routedWhole(executor)) {
    await eventsWithDeliveries(sql`x (account_id, event_id, livemode, api_version, type, object_type, resource_id, data, created_at, n) AS MATERIALIZED (${eventRowsSet(rows, eventIds)})`, accountIds).execute(executor);
    return;
  }
  const endpoints = (
    await sql<ReceivingEndpoint>`SELECT w.account_id, w.endpoint_id, w.livemode, w.api_version, w.event_types FROM webhook_endpoints w
      WHERE ${inAccounts('w.account_id', accountIds)} AND w.status = 'enabled'`.execute(executor)
  ).rows;
  const pending = rows.map(() => 0);
  const pairs = new Map<string, { e: string; w: string }[]>();
  rows.forEach((row, i) => {
    for (const endpoint of endpoints) {
      if (!receives(endpoint, row)) continue;
      pending[i]! += 1;
      const list = pairs.get(row.accountId) ?? [];
      list.push({ e: eventIds[i]!, w: endpoint.endpoint_id });
      pairs.set(row.accountId, list);
    }
  });
  const values = rows.map((row, i) => [row.accountId, eventIds[i]!, row.livemode, row.apiVersion, row.type, row.objectType, row.resourceId, row.data, row.at, pending[i]!] as const);
  for (const statement of valuesStatements({ before: EVENT_INSERT, after: '', parameters: [] }, values)) await executor.executeQuery(statement);
  for (const [accountId, list] of pairs) await deliveryRows(accountId, list).execute(executor);
}

const EVENT_INSERT = 'INSERT INTO events (account_id, event_id, livemode, api_version, type, object_type, resource_id, data, created_at, pending_webhooks) VALUES ';

/** Separates the documents of eventRowsSet: a record separator, which no JSON text holds unescaped. */
const DOCUMENT_SEPARATOR = '\u001e';

/**
 * On a single PostgreSQL (and PGlite), the rows as a set in input order (columns account_id,
 * event_id, livemode, api_version, type, object_type, resource_id, data, created_at, n) from three
 * text parameters zipped by position (ROWS FROM): the short columns as a JSON array of rows
 * (instants as epoch milliseconds), the ids and the documents each joined by a separator, split by
 * the server; each document parsed once as json. About 1.6× cheaper per event than the multi-row
 * VALUES Citus needs (scripts/bench/HISTORY.md, "the simulation's regression since ae9e2ad"), and
 * one statement however many rows (no parameter limit to split under).
 */
function eventRowsSet(rows: readonly EventRow[], eventIds: readonly string[]): RawBuilder<unknown> {
  const { columns, documents } = encodedEventRows(rows);
  return sql`SELECT r.a, r.id, r.l, r.v, r.t, r.o, r.r, r.d::json, ${instantFromEpochMs('r.c')}, r.n FROM ROWS FROM (
      json_to_recordset(${utf8Text(columns)}::json) AS (a text, l boolean, v text, t text, o text, r text, c bigint),
      string_to_table(${eventIds.join('\n')}, E'\\n'),
      string_to_table(${utf8Text(documents)}, E'\\x1e')
    ) WITH ORDINALITY AS r(a, l, v, t, o, r, c, id, d, n)`;
}

/** eventRowsSet's parameters but the ids: the short columns as a JSON array and the documents joined, each as UTF-8 bytes. */
interface EncodedEventRows {
  readonly columns: Buffer;
  readonly documents: Buffer;
}

/** Rows encoded ahead of their statement (encodePreparedEvents), by their array. */
const encodedAhead = new WeakMap<readonly EventRow[], EncodedEventRows>();

function encodedEventRows(rows: readonly EventRow[]): EncodedEventRows {
  const ahead = encodedAhead.get(rows);
  if (ahead !== undefined) return ahead;
  const columns = JSON.stringify(rows.map((row) => ({ a: row.accountId, l: row.livemode, v: row.apiVersion, t: row.type, o: row.objectType, r: row.resourceId, c: row.at.getTime() })));
  return { columns: Buffer.from(columns, 'utf8'), documents: Buffer.from(rows.map((row) => row.data).join(DOCUMENT_SEPARATOR), 'utf8') };
}

/**
 * Encodes prepared events for their statement now, as far as it does not depend on their ids
 * (on a single PostgreSQL or PGlite: eventRowsSet's columns and documents): for a caller that can
 * do this while another statement of its transaction runs, so that recordPreparedEvents only adds
 * the ids. Nothing to do on a Citus coordinator, whose statements take the rows one by one.
 */
export function encodePreparedEvents(executor: Kysely<Database>, prepared: PreparedEvents): void {
  if (prepared.rows.length > 0 && !routedWhole(executor) && !encodedAhead.has(prepared.rows)) encodedAhead.set(prepared.rows, encodedEventRows(prepared.rows));
}

/** A statement around rows of VALUES: its text before and after them and its own parameters ($1…), the rows' numbered after. */
interface ValuesTemplate {
  readonly before: string;
  readonly after: string;
  readonly parameters: readonly unknown[];
}

/**
 * The template's statement with the rows as `($n, $n+1, …), …` in order, as few statements as the
 * parameter limit allows; a value repeated in a column is one parameter.
 */
function valuesStatements(template: ValuesTemplate, rows: readonly (readonly unknown[])[]): CompiledQuery[] {
  const statements: CompiledQuery[] = [];
  let parameters: unknown[] = [...template.parameters];
  let tuples: string[] = [];
  let seen = new Map<string, number>();
  const flush = () => {
    if (tuples.length > 0) statements.push(CompiledQuery.raw(template.before + tuples.join(', ') + template.after, parameters));
    parameters = [...template.parameters];
    tuples = [];
    seen = new Map();
  };
  for (const row of rows) {
    if (parameters.length + row.length > MAX_PARAMETERS) flush();
    const places = row.map((value, column) => {
      const key = `${column}\u0000${typeof value}\u0000${value instanceof Date ? value.getTime() : String(value)}`;
      let n = seen.get(key);
      if (n === undefined) {
        parameters.push(value);
        n = parameters.length;
        seen.set(key, n);
      }
      return `$${n}`;
    });
    tuples.push(`(${places.join(', ')})`);
  }
  flush();
  return statements;
}

/**
 * On a single PostgreSQL, one statement: the events of the rows of the common table expression
 * `x` (given with any before it; columns account_id, event_id, livemode, api_version, type,
 * object_type, resource_id, data, created_at and n, the input order), each with the count of the
 * enabled endpoints that receive it (`pending_webhooks`, endpointReceives) and one delivery row per
 * such endpoint (deliveryTestClock), counted and written from the one snapshot of the endpoints;
 * then `select` (default: nothing). The events are inserted in order of `n`.
 */
export function eventsWithDeliveries(x: RawBuilder<unknown>, accountIds: readonly string[], select: RawBuilder<unknown> = sql`SELECT 1 WHERE false`): RawBuilder<unknown> {
  const clock = deliveryTestClock(accountIds);
  return sql`WITH ${x},
    p AS (SELECT x.n, count(*)::int AS pending FROM webhook_endpoints w JOIN x ON ${endpointReceives('x', accountIds)} GROUP BY x.n),
    e AS (INSERT INTO events (account_id, event_id, livemode, api_version, type, object_type, resource_id, data, created_at, pending_webhooks)
      SELECT x.account_id, x.event_id, x.livemode, x.api_version, x.type, x.object_type, x.resource_id, x.data, x.created_at, coalesce(p.pending, 0)
      FROM x LEFT JOIN p ON p.n = x.n ORDER BY x.n
      RETURNING account_id, event_id, livemode, api_version, type, object_type, resource_id, data, created_at),
    deliveries AS (INSERT INTO webhook_deliveries (account_id, endpoint_id, event_id, next_attempt_at, created_at, test_clock_id)
      SELECT e.account_id, w.endpoint_id, e.event_id, e.created_at, e.created_at, ${clock.column}
      FROM e JOIN webhook_endpoints w ON ${endpointReceives('e', accountIds)} ${clock.join})
    ${select}`;
}

/**
 * Whether the endpoint row `w` receives the event of `event` (an alias with account_id, livemode,
 * api_version and type): the SQL of \`receives\`, for the single-PostgreSQL statement.
 */
function endpointReceives(event: string, accountIds: readonly string[]): RawBuilder<boolean> {
  const e = (column: string) => sql.ref(`${event}.${column}`);
  return sql<boolean>`${inAccounts('w.account_id', accountIds)} AND w.account_id = ${e('account_id')} AND w.livemode = ${e('livemode')} AND w.status = 'enabled'
    AND (w.api_version IS NULL OR w.api_version = ${e('api_version')}) AND (w.event_types IS NULL OR ${e('type')} = ANY(w.event_types))`;
}

/**
 * The test clock of a delivery of the event row \`e\` (account_id, livemode, object_type,
 * resource_id, data): the clock of its event's customer (src/test-clocks/clock-scope.ts): the
 * customer the event's object names (v1 \`customer\`, v2 \`customer_id\`, or a dispute's charge's
 * customer: a dispute names its charge only), or the customer itself; a clock's own events are on
 * it, and so are those of its books (a test-mode term, statement or balance carrying the clock).
 * \`column\` is the value, \`join\` the LEFT JOIN of the customer (alias k) it reads.
 */
function deliveryTestClock(accountIds: readonly string[]): { readonly column: RawBuilder<unknown>; readonly join: RawBuilder<unknown> } {
  const book = (table: string, id: string) =>
    sql`SELECT b.test_clock_id FROM ${sql.table(table)} b WHERE ${inAccounts('b.account_id', accountIds)} AND b.account_id = e.account_id AND NOT b.livemode AND ${sql.ref(`b.${id}`)} = e.resource_id`;
  return {
    column: sql`coalesce(k.test_clock_id, CASE WHEN e.object_type = 'test_clock' THEN e.resource_id END,
      CASE WHEN NOT e.livemode AND (${sql.join([ID_PREFIX.term, ID_PREFIX.statement, ID_PREFIX.balance].map((prefix) => sql`starts_with(e.resource_id, ${prefix})`), sql` OR `)}) THEN (${book('terms', 'term_id')} UNION ALL ${book('statements', 'statement_id')} UNION ALL ${book('balances', 'balance_id')} LIMIT 1) END)`,
    join: sql`LEFT JOIN customers k ON NOT e.livemode AND ${inAccounts('k.account_id', accountIds)} AND k.account_id = e.account_id AND k.livemode = e.livemode
      AND k.customer_id = CASE WHEN e.object_type = 'customer' THEN e.resource_id ELSE coalesce(e.data->>'customer', e.data->>'customer_id',
        (SELECT h.customer_id FROM charges h WHERE ${inAccounts('h.account_id', accountIds)} AND h.account_id = e.account_id AND NOT h.livemode AND h.charge_id = e.data->>'charge_id')) END
      AND k.test_clock_id IS NOT NULL`,
  };
}

/**
 * On Citus, the webhook deliveries of one account's new events: one row per (event, endpoint)
 * pair, due at the event's instant, on its test clock (deliveryTestClock). One account per
 * statement: Citus routes it whole only under an equality on the account.
 */
function deliveryRows(accountId: string, pairs: readonly { e: string; w: string }[]): RawBuilder<unknown> {
  const clock = deliveryTestClock([accountId]);
  return sql`INSERT INTO webhook_deliveries (account_id, endpoint_id, event_id, next_attempt_at, created_at, test_clock_id)
    SELECT e.account_id, x.w, e.event_id, e.created_at, e.created_at, ${clock.column}
    FROM json_to_recordset(${JSON.stringify(pairs)}::json) AS x(e text, w text)
    JOIN events e ON e.account_id = ${accountId} AND e.event_id = x.e
    ${clock.join}`;
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

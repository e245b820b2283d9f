/**
 * Finding, rendering and writing v1 charge rows for the charge operations and the hold jobs: the
 * card a charge embeds (a customer's stored card, or the card of the token it was made with), and
 * the `charge.*` events of many charges rendered server-side in one statement.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database } from '../db/schema';
import { reject } from '../domain/errors';
import type { IdGenerator } from '../domain/ids';
import { CHARGE_FIELDS, chargeObjectSqlText, renderCharge, type ChargeCard, type ChargeObject, type ChargeRow } from './charges';
import { accountsOf, inAccounts } from '../db/account-scope';
import { instantFromEpochMs } from '../db/epoch-ms';
import { compositeKey } from '../db/bulk-rows';
import { fixedStatement } from '../db/fixed-statement';
import { prepared } from '../db/prepared';
import { networkClaimDeletion, type NetworkClaim } from '../engine/network-claims';
import { eventsWithDeliveries, writeEventRows } from '../events/outbox';
import { routedWhole } from '../db/citus-shape';

/** The charge of the caller's account and mode, locked FOR UPDATE when asked; `invalid_id` on `id` otherwise. */
export async function findCharge(executor: Kysely<Database>, caller: Caller, chargeId: string, lock = false): Promise<ChargeRow> {
  let query = executor
    .selectFrom('charges')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('charge_id', '=', chargeId)
    // The captures of v2 payment flows are charge rows for settlement, not v1 charges.
    .where('payment_flow_id', 'is', null);
  if (lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) return reject('invalid_id', 'id', `No such charge: ${chargeId}`);
  return row;
}

/**
 * The v1 object of the caller's charge (account, mode, id), rendered by PostgreSQL in one prepared
 * statement: the charge with the card it embeds (the stored card, deleted ones too, else the card
 * of the token it was made with), as CHARGE_OBJECT_SQL builds it for the charge's events — the
 * object renderCharge gives (test/unit/charge-fields.test.ts, and v1-charges.test.ts compares a
 * retrieve with the list for every kind of card). The retrieve's path: one round trip, one column
 * to parse, nothing to render.
 */
export async function findChargeObject(executor: Kysely<Database>, caller: Caller, chargeId: string): Promise<ChargeObject> {
  const found = (await chargeObjectRead(executor, null, { accountId: caller.accountId, livemode: caller.livemode, chargeId })).rows[0];
  if (!found) return reject('invalid_id', 'id', `No such charge: ${chargeId}`);
  return found.object;
}

/** findChargeObject's statement: built once (fixedStatement), prepared once per connection. */
const chargeObjectRead = fixedStatement((db, _shape: null, v: { readonly accountId: string; readonly livemode: boolean; readonly chargeId: string }) =>
  sql<{ object: ChargeObject }>`${prepared('charges.retrieve')}
    SELECT ${CHARGE_OBJECT_SQL} AS object
    FROM charges c ${chargeCardJoins([v.accountId])}
    WHERE c.account_id = ${v.accountId} AND c.livemode = ${v.livemode} AND c.charge_id = ${v.chargeId}
      -- The captures of v2 payment flows are charge rows for settlement, not v1 charges.
      AND c.payment_flow_id IS NULL`.compile(db),
);

/** The key of chargeCardsOf's map: a charge's (account, mode, card id). */
export const cardKey = (accountId: string, livemode: boolean, cardId: string): string => compositeKey(accountId, livemode, cardId);

/**
 * The cards the charges embed, by (account, mode, card id): stored cards (deleted ones too: a
 * charge keeps showing the card it was made with), else the card of the token the charge used.
 * Two queries whatever the number of charges.
 */
export async function chargeCardsOf(executor: Kysely<Database>, rows: readonly Pick<ChargeRow, 'account_id' | 'livemode' | 'card_id'>[]): Promise<Map<string, ChargeCard>> {
  const found = new Map<string, ChargeCard>();
  if (rows.length === 0) return found;
  // Index probes forced by LATERAL … OFFSET 0: as a plain join the planner hashed the whole cards
  // table for every batch of held charges (see loadDefaultCards in the renewal job). Each statement
  // names the rows' accounts (account-scope.ts): Citus runs the probes on their shard.
  const cards = await cardsByKey(executor, 'cards', rows);
  for (const card of cards) found.set(cardKey(card.account_id, card.livemode, card.card_id), card);
  const missing = rows.filter((r) => !found.has(cardKey(r.account_id, r.livemode, r.card_id)));
  if (missing.length === 0) return found;
  const tokens = await cardsByKey(executor, 'tokens', missing);
  for (const token of tokens) found.set(cardKey(token.account_id, token.livemode, token.card_id), { ...token, customer_id: null });
  return found;
}

/** The rows of `table` (cards or tokens) with the (account, mode, card id) of `rows`, one index probe each. */
async function cardsByKey(executor: Kysely<Database>, table: 'cards' | 'tokens', rows: readonly Pick<ChargeRow, 'account_id' | 'livemode' | 'card_id'>[]): Promise<(ChargeCard & { account_id: string })[]> {
  const result = await sql<ChargeCard & { account_id: string }>`
    SELECT c.* FROM unnest(${rows.map((r) => r.account_id)}::text[], ${rows.map((r) => r.livemode)}::boolean[], ${rows.map((r) => r.card_id)}::text[]) AS k(a, l, id)
    CROSS JOIN LATERAL (SELECT * FROM ${sql.table(table)} c WHERE ${inAccounts('c.account_id', accountsOf(rows, (r) => r.account_id))} AND c.account_id = k.a AND c.livemode = k.l AND c.card_id = k.id OFFSET 0) c`.execute(executor);
  return result.rows;
}

/** A charge with the card it embeds: what the charge operations return (the v1 codec renders it with renderChargeRecord). */
export interface ChargeRecord {
  readonly row: ChargeRow;
  readonly card: ChargeCard;
}

/** The records of charge rows, in order, with their cards read in two queries. */
export async function chargeRecords(executor: Kysely<Database>, rows: readonly ChargeRow[]): Promise<ChargeRecord[]> {
  const cards = await chargeCardsOf(executor, rows);
  return rows.map((row) => {
    const card = cards.get(cardKey(row.account_id, row.livemode, row.card_id));
    // Charges are only ever written with a stored card or a token's card, and neither is hard-deleted.
    if (card === undefined) throw new Error(`charge ${row.charge_id} names card ${row.card_id}, which does not exist`);
    return { row, card };
  });
}

export async function oneChargeRecord(executor: Kysely<Database>, row: ChargeRow): Promise<ChargeRecord> {
  const [record] = await chargeRecords(executor, [row]);
  return record!;
}

/** The v1 charge object of a record (renderCharge). */
export function renderChargeRecord(record: ChargeRecord): ChargeObject {
  return renderCharge(record.row, record.card);
}

/** One charge event to write: which charge, which type, at which business instant. */
export interface ChargeEventKey {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly chargeId: string;
  readonly type: string;
  readonly at: Date;
}

/** The card's v1 object over `charges c` with its saved card `cd` or its token `tk` (renderCard's fields). */
const CARD_OBJECT_SQL = `json_build_object(
  'id', c.card_id, 'object', 'card', 'livemode', c.livemode, 'created', floor(extract(epoch from coalesce(cd.created_at, tk.created_at)))::bigint,
  'customer', cd.customer_id, 'brand', coalesce(cd.brand, tk.brand), 'last4', coalesce(cd.last4, tk.last4),
  'exp_month', coalesce(cd.exp_month, tk.exp_month), 'exp_year', coalesce(cd.exp_year, tk.exp_year),
  'fingerprint', coalesce(cd.fingerprint, tk.fingerprint), 'name', CASE WHEN cd.card_id IS NULL THEN tk.name ELSE cd.name END,
  'country', CASE WHEN cd.card_id IS NULL THEN tk.country ELSE cd.country END,
  'address_zip', cd.address_zip, 'address_state', cd.address_state, 'address_city', cd.address_city,
  'address_line1', cd.address_line1, 'address_line2', cd.address_line2, 'address_zip_check', 'unchecked',
  'cvc_check', coalesce(cd.cvc_check, tk.cvc_check), 'three_d_secure_status', cd.three_d_secure_status, 'email', cd.email, 'phone', cd.phone,
  'metadata', coalesce(cd.metadata, '{}'::jsonb))`;

/** The charge's v1 object in SQL, derived from CHARGE_FIELDS (the same object renderCharge gives). */
const CHARGE_OBJECT_SQL = sql.raw(chargeObjectSqlText(CHARGE_FIELDS, CARD_OBJECT_SQL));

/** The saved card `cd` or else the token `tk` of the charges `c` (CARD_OBJECT_SQL's aliases), on the accounts' shard. */
function chargeCardJoins(accountIds: readonly string[]): RawBuilder<unknown> {
  return sql`LEFT JOIN cards cd ON ${inAccounts('cd.account_id', accountIds)} AND cd.account_id = c.account_id AND cd.livemode = c.livemode AND cd.card_id = c.card_id
    LEFT JOIN tokens tk ON cd.card_id IS NULL AND ${inAccounts('tk.account_id', accountIds)} AND tk.account_id = c.account_id AND tk.livemode = c.livemode AND tk.card_id = c.card_id`;
}

/**
 * charges.create's record step (create-intents.ts): the charge row and its `charge.*` event (with
 * the event's webhook deliveries) are written only if the create intent is still this request's
 * and is dropped (`intent`: the DELETE of networkClaimDeletion, src/engine/network-claims.ts) and the term the row is
 * settled into, if any, is still open — read FOR SHARE, so a close of it waits for this commit and
 * then counts the charge. PostgreSQL builds the charge object from the stored row and its card once
 * (CHARGE_OBJECT_SQL, as recordChargeEvents and a retrieve build it, jsonb's key order of the
 * metadata included), for the event and for the answer. Returns that object, or undefined when a
 * guard failed and nothing was written (the caller tells which: createCharge).
 *
 * In the store's shape (routedWhole, src/db/citus-shape.ts): on a single PostgreSQL one statement
 * (createdChargeWrite), so it needs no transaction; on Citus separate statements, each routed whole
 * (a data-modifying common table expression is not: docs/decisions/citus.md), in one transaction
 * on the account's node (the caller's, or one of their own).
 */
export async function insertCreatedCharge(executor: Kysely<Database>, ids: IdGenerator, row: ChargeRow, type: string, intent: NetworkClaim): Promise<ChargeObject | undefined> {
  const stored: StoredChargeRow = { ...row, metadata: JSON.stringify(row.metadata) };
  const columns = (Object.keys(stored) as (keyof ChargeRow)[]).filter((column) => stored[column] !== undefined);
  const { accountId, livemode, resource, resourceId, operation, claimedAt } = intent;
  const values: CreatedChargeValues = { accountId, livemode, resource, resourceId, operation, claimedAt, row: stored, termId: row.term_id ?? null };
  const eventId = ids.next('eventV1');
  if (!routedWhole(executor)) return (await createdChargeWrite(executor, { columns }, { ...values, eventId, type })).rows[0]?.data;
  const write = async (trx: Kysely<Database>) => {
    if ((await createdChargeIntentDrop(trx, null, values)).rows.length === 0) return undefined;
    await createdChargeInsert(trx, { columns }, values);
    const text = (await chargeObjectTextRead(trx, null, { accountId: row.account_id, livemode: row.livemode, chargeId: row.charge_id })).rows[0]!.object;
    await writeEventRows(trx, [{ accountId: row.account_id, livemode: row.livemode, apiVersion: 'v1', type, objectType: 'charge', resourceId: row.charge_id, data: text, at: row.created_at }], [eventId]);
    return JSON.parse(text) as ChargeObject;
  };
  return executor.isTransaction ? write(executor) : executor.transaction().execute(write);
}

/** A charge row as INSERTed: its metadata as JSON text. */
type StoredChargeRow = Omit<ChargeRow, 'metadata'> & { readonly metadata: string };

/** What insertCreatedCharge's statements bind: the intent's claim (its account is the charge's), the charge's row, its term. */
type CreatedChargeValues = NetworkClaim & { readonly row: StoredChargeRow; readonly termId: string | null };

/**
 * insertCreatedCharge's one statement on a single PostgreSQL, built once per column list
 * (fixedStatement) and prepared once per connection: the INSERT … SELECT … FROM intent_dropped
 * writes the row only if the intent was dropped (PostgreSQL types the parameters by the target
 * columns, as for VALUES), and the event with its deliveries is written from the row it returned
 * (eventsWithDeliveries).
 */
const createdChargeWrite = fixedStatement((db, shape: { readonly columns: readonly (keyof ChargeRow)[] }, v: CreatedChargeValues & { readonly eventId: string; readonly type: string }) => {
  const insert = db
    .insertInto('charges')
    .columns(shape.columns)
    .expression(sql`SELECT ${sql.join(shape.columns.map((column) => sql`${v.row[column]}`))} FROM intent_dropped`)
    .returningAll();
  const drop = networkClaimDeletion(db, v).where(createdChargeTermOpen(v)).returning(sql<number>`1`.as('one'));
  const x = sql`intent_dropped AS (${drop}), c AS (${insert}),
    x AS MATERIALIZED (
      SELECT c.account_id, ${v.eventId}::text AS event_id, c.livemode, 'v1'::text AS api_version, ${v.type}::text AS type, 'charge'::text AS object_type,
        c.charge_id AS resource_id, ${CHARGE_OBJECT_SQL} AS data, c.created_at, 1 AS n
      FROM c ${chargeCardJoins([v.accountId])})`;
  return sql<{ data: ChargeObject }>`${prepared('charges.insert_created.one')} ${eventsWithDeliveries(x, [v.accountId], sql`SELECT data FROM x`)}`.compile(db);
});

/** Whether the charge's term, if it has one, is open: read FOR SHARE, so that a close of it waits for the charge's commit. */
function createdChargeTermOpen(v: CreatedChargeValues): RawBuilder<boolean> {
  const { accountId, livemode, termId } = v;
  return sql<boolean>`(${termId}::text IS NULL OR EXISTS (SELECT 1 FROM terms WHERE account_id = ${accountId} AND livemode = ${livemode} AND term_id = ${termId} AND NOT closed FOR SHARE))`;
}

/** The create intent dropped if it is still this request's and the charge's term (if any) is open, locked FOR SHARE. */
const createdChargeIntentDrop = fixedStatement((db, _shape: null, v: CreatedChargeValues) =>
  networkClaimDeletion(db, v)
    .modifyEnd(prepared('charges.insert_created.intent'))
    .where(createdChargeTermOpen(v))
    .returning(sql<number>`1`.as('one'))
    .compile(),
);

/** The charge row, built once per column list (fixedStatement) and prepared once per connection. */
const createdChargeInsert = fixedStatement((db, shape: { readonly columns: readonly (keyof ChargeRow)[] }, v: CreatedChargeValues) =>
  db
    .insertInto('charges')
    .modifyEnd(prepared('charges.insert_created'))
    .columns(shape.columns)
    .expression(sql`VALUES (${sql.join(shape.columns.map((column) => sql`${v.row[column]}`))})`)
    .compile(),
);

/** The charge object as the text PostgreSQL builds (CHARGE_OBJECT_SQL), stored as the event's document. */
const chargeObjectTextRead = fixedStatement((db, _shape: null, v: { readonly accountId: string; readonly livemode: boolean; readonly chargeId: string }) =>
  sql<{ object: string }>`${prepared('charges.insert_created.object')}
    SELECT (${CHARGE_OBJECT_SQL})::text AS object
    FROM charges c ${chargeCardJoins([v.accountId])}
    WHERE c.account_id = ${v.accountId} AND c.livemode = ${v.livemode} AND c.charge_id = ${v.chargeId}`.compile(db),
);

/**
 * Writes `charge.*` events for many charges: the charge objects are built by PostgreSQL from the
 * rows as they are now (call it after the batch's UPDATE) and written as the events' documents,
 * so no charge object is built in Node (on a single PostgreSQL none even passes through it, as in
 * insertCreatedCharge). The object is CHARGE_OBJECT_SQL, derived from the field list renderCharge
 * is (test/integration/hold-jobs.test.ts compares them). Event ids are drawn in input order, as
 * recordEvents does.
 */
export async function recordChargeEvents(executor: Kysely<Database>, ids: IdGenerator, keys: readonly ChargeEventKey[]): Promise<void> {
  if (keys.length === 0) return;
  // Ids drawn in input order; the read names the keys' accounts (account-scope.ts).
  const group = keys.map((key) => ({ key, eventId: ids.next('eventV1') }));
  const accountIds = accountsOf(keys, (k) => k.accountId);
  const documents = sql`
    SELECT c.account_id, k.eid, c.livemode, k.t, c.charge_id, ${CHARGE_OBJECT_SQL} AS data, ${instantFromEpochMs('k.at')} AS at, k.n
    FROM unnest(${group.map((k) => k.key.accountId)}::text[], ${group.map((k) => k.key.livemode)}::boolean[], ${group.map((k) => k.key.chargeId)}::text[],
                ${group.map((k) => k.eventId)}::text[], ${group.map((k) => k.key.type)}::text[], ${group.map((k) => k.key.at.getTime())}::bigint[]) WITH ORDINALITY AS k(a, l, id, eid, t, at, n)
    -- A plain join, not a LATERAL … OFFSET 0 probe: inside such a probe PostgreSQL takes a batch's
    -- \`account_id = ANY(…)\` as the index condition of every probe (a scan of all the batch's
    -- accounts' charges per key); joined, the ANY filters and the keys probe the primary key.
    JOIN charges c ON ${inAccounts('c.account_id', accountIds)} AND c.account_id = k.a AND c.livemode = k.l AND c.charge_id = k.id
    ${chargeCardJoins(accountIds)}`;
  if (!routedWhole(executor)) {
    // On a single PostgreSQL (or PGlite) the documents go from the charges into the events in the
    // server, one statement, without a trip through this process and back.
    await eventsWithDeliveries(
      sql`x (account_id, event_id, livemode, api_version, type, object_type, resource_id, data, created_at, n) AS MATERIALIZED (
        SELECT d.account_id, d.eid, d.livemode, 'v1', d.t, 'charge', d.charge_id, d.data, d.at, d.n FROM (${documents}) d)`,
      accountIds,
    ).execute(executor);
    return;
  }
  const built = await sql<{ account_id: string; eid: string; livemode: boolean; t: string; charge_id: string; data: string; at: Date }>`
    SELECT d.account_id, d.eid, d.livemode, d.t, d.charge_id, d.data::text AS data, d.at FROM (${documents}) d ORDER BY d.n`.execute(executor);
  await writeEventRows(
    executor,
    built.rows.map((r) => ({ accountId: r.account_id, livemode: r.livemode, apiVersion: 'v1' as const, type: r.t, objectType: 'charge', resourceId: r.charge_id, data: r.data, at: r.at })),
    built.rows.map((r) => r.eid),
  );
}

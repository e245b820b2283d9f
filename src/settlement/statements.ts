/**
 * Statements and balances as the API shows them (v1 §2.6, service rules §4 "Balance"), and the
 * operations `statements.retrieve|list` (filters of v1 §4.7) and `balances.retrieve|list`.
 */
import { sql, type Kysely, type Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { BalancesTable, Database, StatementItemsTable, StatementsTable } from '../db/schema';
import { reject } from '../domain/errors';
import { STATEMENT_TYPES, SUBJECT_NAMES, type StatementSubject } from '../domain/sales-statements';
import { toUnixSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { defineOperation } from '../operations/define';
import { inPage, listObject, PAGINATION_PARAMS, readPage, type ListObject } from '../operations/pagination';
import { optionalString, readParams, requireString } from '../operations/params';
import { renderTerm, type TermObject, type TermRow } from './terms';
import { bulkColumns, compositeKey, ROW_KEYS } from '../db/bulk-rows';

export const STATEMENTS_URL = '/v1/statements';
export const BALANCES_URL = '/v1/balances';

export type StatementRow = Selectable<StatementsTable>;
export type StatementItemRow = Selectable<StatementItemsTable>;
export type BalanceRow = Selectable<BalancesTable>;

export type StatementItemObject = {
  readonly subject: string;
  readonly name: string;
  readonly amount: number;
  readonly tax_rate: string;
};

export type StatementObject = {
  readonly id: string;
  readonly object: 'statement';
  readonly livemode: boolean;
  readonly created: number;
  readonly updated: number;
  readonly title: string | null;
  readonly tenant_id: string | null;
  readonly type: string;
  readonly net: number;
  readonly items: readonly StatementItemObject[];
  readonly term: TermObject | null;
  readonly balance_id: string;
};

export type BalanceObject = {
  readonly id: string;
  readonly object: 'balance';
  readonly livemode: boolean;
  readonly created: number;
  readonly updated: number;
  /** `merchant`, `tenant` or `platform` (the platform-fee balance of the account itself). */
  readonly owner: string;
  readonly tenant_id: string | null;
  readonly state: 'collecting' | 'transfer' | 'claim';
  readonly net: number;
  readonly closed: boolean;
  readonly closed_date: string | null;
  readonly due_date: string | null;
  readonly statements: readonly StatementObject[];
};

export function renderStatementItem(item: Pick<StatementItemRow, 'subject' | 'amount' | 'tax_rate'>): StatementItemObject {
  return { subject: item.subject, name: SUBJECT_NAMES[item.subject as StatementSubject] ?? item.subject, amount: item.amount, tax_rate: item.tax_rate };
}

export function renderStatement(row: StatementRow, items: readonly Pick<StatementItemRow, 'subject' | 'amount' | 'tax_rate'>[], term: TermRow | null): StatementObject {
  return {
    id: row.statement_id,
    object: 'statement',
    livemode: row.livemode,
    created: toUnixSeconds(row.created_at),
    updated: toUnixSeconds(row.updated_at),
    title: row.title,
    tenant_id: row.tenant_id,
    type: row.type,
    net: row.net,
    items: items.map(renderStatementItem),
    // Statements are made when a term closes, so their term is shown closed with its counts.
    term: term === null ? null : renderTerm(term),
    balance_id: row.balance_id,
  };
}

export function renderBalance(row: BalanceRow, statements: readonly StatementObject[]): BalanceObject {
  return {
    id: row.balance_id,
    object: 'balance',
    livemode: row.livemode,
    created: toUnixSeconds(row.created_at),
    updated: toUnixSeconds(row.updated_at),
    owner: row.owner,
    tenant_id: row.tenant_id,
    state: row.state,
    net: row.net,
    closed: row.closed,
    closed_date: row.closed_date,
    due_date: row.due_date,
    statements,
  };
}

/** Statements' keys and terms, to read their items and terms (statementObjects). */
const STATEMENT_KEYS = bulkColumns<StatementRow>()({ a: ['text', 'account_id'], l: ['boolean', 'livemode'], s: ['text', 'statement_id'], t: ['text', 'term_id'] });

/** Statement objects of stored rows, with their items and terms in two queries. */
export async function statementObjects(executor: Kysely<Database>, rows: readonly StatementRow[]): Promise<StatementObject[]> {
  if (rows.length === 0) return [];
  const k = STATEMENT_KEYS.table('k', rows);
  const [items, terms] = await Promise.all([
    sql<StatementItemRow>`
      SELECT i.* FROM ${k.from}
      JOIN statement_items i ON i.account_id = ${k.col('a')} AND i.livemode = ${k.col('l')} AND i.statement_id = ${k.col('s')}
      ORDER BY i.statement_id, i.position`.execute(executor),
    sql<TermRow>`
      SELECT DISTINCT t.* FROM ${k.from}
      JOIN terms t ON t.account_id = ${k.col('a')} AND t.livemode = ${k.col('l')} AND t.term_id = ${k.col('t')}`.execute(executor),
  ]);
  const itemsOf = new Map<string, StatementItemRow[]>();
  for (const item of items.rows) {
    const list = itemsOf.get(compositeKey(item.account_id, item.statement_id)) ?? [];
    list.push(item);
    itemsOf.set(compositeKey(item.account_id, item.statement_id), list);
  }
  const termOf = new Map(terms.rows.map((t) => [compositeKey(t.account_id, t.term_id), t]));
  return rows.map((row) =>
    renderStatement(row, itemsOf.get(compositeKey(row.account_id, row.statement_id)) ?? [], row.term_id === null ? null : (termOf.get(compositeKey(row.account_id, row.term_id)) ?? null)),
  );
}

/** Balance objects of stored rows, each with its statements (oldest first). */
export async function balanceObjects(executor: Kysely<Database>, rows: readonly BalanceRow[]): Promise<BalanceObject[]> {
  if (rows.length === 0) return [];
  const k = ROW_KEYS.table('k', rows.map((r) => ({ accountId: r.account_id, livemode: r.livemode, id: r.balance_id })));
  const statements = await sql<StatementRow>`
    SELECT s.* FROM ${k.from}
    JOIN statements s ON s.account_id = ${k.col('a')} AND s.livemode = ${k.col('l')} AND s.balance_id = ${k.col('id')}
    -- A close writes the sales statement before the transfer fee or forfeit it leads to.
    ORDER BY s.created_at, CASE s.type WHEN 'sales' THEN 0 WHEN 'service_fee' THEN 1 WHEN 'misc' THEN 2 ELSE 3 END, s.statement_id`.execute(executor);
  const objects = await statementObjects(executor, statements.rows);
  const byBalance = new Map<string, StatementObject[]>();
  for (const object of objects) {
    const list = byBalance.get(object.balance_id) ?? [];
    list.push(object);
    byBalance.set(object.balance_id, list);
  }
  return rows.map((row) => renderBalance(row, byBalance.get(row.balance_id) ?? []));
}

export async function findStatement(executor: Kysely<Database>, caller: Pick<Caller, 'accountId' | 'livemode'>, statementId: string, param: string): Promise<StatementRow> {
  const row = await executor
    .selectFrom('statements')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('statement_id', '=', statementId)
    .executeTakeFirst();
  // v1 §4.7: "An unknown statement gives a 404 error".
  if (!row) return reject('invalid_id', param, `No such statement: ${statementId}`);
  return row;
}

export async function retrieveStatement(ctx: Context, caller: Caller, input: unknown): Promise<StatementObject> {
  const params = readParams(input, ['id']);
  const row = await findStatement(ctx.db, caller, requireString(params, 'id'), 'id');
  return (await statementObjects(ctx.db, [row]))[0]!;
}

/**
 * `statements.list`: pagination plus `owner` (`merchant`: the account's own statements, including
 * its platform-fee statement; `tenant`: tenants' statements), `tenant`, `term`, `type`, and
 * `source_transfer` (a transfer id: kessai makes no transfers yet, so it matches the balance id
 * whose payout the statements make up).
 */
export async function listStatements(ctx: Context, caller: Caller, input: unknown): Promise<ListObject<StatementObject>> {
  const params = readParams(input, [...PAGINATION_PARAMS, 'owner', 'source_transfer', 'tenant', 'term', 'type']);
  const page = readPage(params);
  const owner = optionalString(params, 'owner', { code: 'invalid_querystring' });
  if (owner !== undefined && owner !== 'merchant' && owner !== 'tenant') reject('invalid_querystring', 'owner', 'owner must be merchant or tenant');
  const type = optionalString(params, 'type', { code: 'invalid_querystring' });
  if (type !== undefined && !(STATEMENT_TYPES as readonly string[]).includes(type)) reject('invalid_querystring', 'type', `type must be one of ${STATEMENT_TYPES.join(', ')}`);
  const tenant = optionalString(params, 'tenant', { code: 'invalid_querystring' });
  const term = optionalString(params, 'term', { code: 'invalid_querystring' });
  const transfer = optionalString(params, 'source_transfer', { code: 'invalid_querystring' });
  const rows = await ctx.db
    .selectFrom('statements')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(owner === 'merchant', (q) => q.where('tenant_id', 'is', null))
    .$if(owner === 'tenant', (q) => q.where('tenant_id', 'is not', null))
    .$if(type !== undefined, (q) => q.where('type', '=', type as StatementRow['type']))
    .$if(tenant !== undefined, (q) => q.where('tenant_id', '=', tenant!))
    .$if(term !== undefined, (q) => q.where('term_id', '=', term!))
    .$if(transfer !== undefined, (q) => q.where('balance_id', '=', transfer!))
    .$call(inPage(page, 'statement_id'))
    .execute();
  return listObject(await statementObjects(ctx.db, rows), page, STATEMENTS_URL);
}

/** A balance of the caller, or `invalid_id` on `param`. */
export async function findBalance(executor: Kysely<Database>, caller: Pick<Caller, 'accountId' | 'livemode'>, balanceId: string, param: string): Promise<BalanceRow> {
  const row = await executor
    .selectFrom('balances')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('balance_id', '=', balanceId)
    .executeTakeFirst();
  if (!row) return reject('invalid_id', param, `No such balance: ${balanceId}`);
  return row;
}

export async function retrieveBalance(ctx: Context, caller: Caller, input: unknown): Promise<BalanceObject> {
  const params = readParams(input, ['id']);
  const row = await findBalance(ctx.db, caller, requireString(params, 'id'), 'id');
  return (await balanceObjects(ctx.db, [row]))[0]!;
}

/** `balances.list`: pagination plus `state`, `owner` and `tenant`. */
export async function listBalances(ctx: Context, caller: Caller, input: unknown): Promise<ListObject<BalanceObject>> {
  const params = readParams(input, [...PAGINATION_PARAMS, 'state', 'owner', 'tenant']);
  const page = readPage(params);
  const state = optionalString(params, 'state', { code: 'invalid_querystring' });
  if (state !== undefined && !['collecting', 'transfer', 'claim'].includes(state)) reject('invalid_querystring', 'state', 'state must be collecting, transfer or claim');
  const owner = optionalString(params, 'owner', { code: 'invalid_querystring' });
  if (owner !== undefined && !['merchant', 'tenant', 'platform'].includes(owner)) reject('invalid_querystring', 'owner', 'owner must be merchant, tenant or platform');
  const tenant = optionalString(params, 'tenant', { code: 'invalid_querystring' });
  const rows = await ctx.db
    .selectFrom('balances')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(state !== undefined, (q) => q.where('state', '=', state as BalanceRow['state']))
    .$if(owner !== undefined, (q) => q.where('owner', '=', owner as BalanceRow['owner']))
    .$if(tenant !== undefined, (q) => q.where('tenant_id', '=', tenant!))
    .$call(inPage(page, 'balance_id'))
    .execute();
  return listObject(await balanceObjects(ctx.db, rows), page, BALANCES_URL);
}

export const STATEMENT_OPERATIONS = [
  defineOperation('statements.retrieve', retrieveStatement),
  defineOperation('statements.list', listStatements),
  defineOperation('balances.retrieve', retrieveBalance),
  defineOperation('balances.list', listBalances),
] as const;

/**
 * Statements and balances as the API shows them (v1 §2.6, service rules §4 "Balance"), and reading
 * them for `statements.retrieve|list` (filters of v1 §4.7) and `balances.retrieve|list`: each an
 * execution that v1 and v2 share (v1 codec: src/api/v1/statements.ts, balances.ts; v2 lists:
 * src/api/v2/settlement.ts).
 */
import { sql, type Kysely, type Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { BalancesTable, Database, StatementItemsTable, StatementsTable } from '../db/schema';
import { reject } from '../domain/errors';
import { SUBJECT_NAMES, type StatementSubject } from '../domain/sales-statements';
import { toUnixSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { cursorOf, inListPage, type ListPage } from '../operations/list-page';
import { renderTerm, type TermObject, type TermRow } from './terms';
import { bulkColumns, compositeKey, ROW_KEYS } from '../db/bulk-rows';
import { accountsOf, inAccounts } from '../db/account-scope';

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

/** Statements' keys and terms, to read their items and terms (statementRecords). */
const STATEMENT_KEYS = bulkColumns<StatementRow>()({ a: ['text', 'account_id'], l: ['boolean', 'livemode'], s: ['text', 'statement_id'], t: ['text', 'term_id'] });

/** A statement with its items (in order) and its term: what renderStatementRecord shows. */
export interface StatementRecord {
  readonly row: StatementRow;
  readonly items: readonly StatementItemRow[];
  readonly term: TermRow | null;
}

export function renderStatementRecord(record: StatementRecord): StatementObject {
  return renderStatement(record.row, record.items, record.term);
}

/** Statement records of stored rows, with their items and terms in two queries. */
export async function statementRecords(executor: Kysely<Database>, rows: readonly StatementRow[]): Promise<StatementRecord[]> {
  if (rows.length === 0) return [];
  const k = STATEMENT_KEYS.table('k', rows);
  const accountIds = accountsOf(rows, (row) => row.account_id);
  const [items, terms] = await Promise.all([
    sql<StatementItemRow>`
      SELECT i.* FROM ${k.from}
      JOIN statement_items i ON ${inAccounts('i.account_id', accountIds)} AND i.account_id = ${k.col('a')} AND i.livemode = ${k.col('l')} AND i.statement_id = ${k.col('s')}
      ORDER BY i.statement_id, i.position`.execute(executor),
    sql<TermRow>`
      SELECT DISTINCT t.* FROM ${k.from}
      JOIN terms t ON ${inAccounts('t.account_id', accountIds)} AND t.account_id = ${k.col('a')} AND t.livemode = ${k.col('l')} AND t.term_id = ${k.col('t')}`.execute(executor),
  ]);
  const itemsOf = new Map<string, StatementItemRow[]>();
  for (const item of items.rows) {
    const list = itemsOf.get(compositeKey(item.account_id, item.statement_id)) ?? [];
    list.push(item);
    itemsOf.set(compositeKey(item.account_id, item.statement_id), list);
  }
  const termOf = new Map(terms.rows.map((t) => [compositeKey(t.account_id, t.term_id), t]));
  return rows.map((row) => ({
    row,
    items: itemsOf.get(compositeKey(row.account_id, row.statement_id)) ?? [],
    term: row.term_id === null ? null : (termOf.get(compositeKey(row.account_id, row.term_id)) ?? null),
  }));
}

/** Statement objects of stored rows (statementRecords, rendered). */
export async function statementObjects(executor: Kysely<Database>, rows: readonly StatementRow[]): Promise<StatementObject[]> {
  return (await statementRecords(executor, rows)).map(renderStatementRecord);
}

/** A balance with its statements (oldest first): what renderBalanceRecord shows. */
export interface BalanceRecord {
  readonly row: BalanceRow;
  readonly statements: readonly StatementRecord[];
}

export function renderBalanceRecord(record: BalanceRecord): BalanceObject {
  return renderBalance(record.row, record.statements.map(renderStatementRecord));
}

/** Balance records of stored rows, each with its statements (oldest first). */
export async function balanceRecords(executor: Kysely<Database>, rows: readonly BalanceRow[]): Promise<BalanceRecord[]> {
  if (rows.length === 0) return [];
  const k = ROW_KEYS.table('k', rows.map((r) => ({ accountId: r.account_id, livemode: r.livemode, id: r.balance_id })));
  const statements = await sql<StatementRow>`
    SELECT s.* FROM ${k.from}
    JOIN statements s ON ${inAccounts('s.account_id', accountsOf(rows, (row) => row.account_id))} AND s.account_id = ${k.col('a')} AND s.livemode = ${k.col('l')} AND s.balance_id = ${k.col('id')}
    -- A close writes the sales statement before the transfer fee or forfeit it leads to.
    ORDER BY s.created_at, CASE s.type WHEN 'sales' THEN 0 WHEN 'service_fee' THEN 1 WHEN 'misc' THEN 2 ELSE 3 END, s.statement_id`.execute(executor);
  const records = await statementRecords(executor, statements.rows);
  const byBalance = new Map<string, StatementRecord[]>();
  for (const record of records) {
    const list = byBalance.get(record.row.balance_id) ?? [];
    list.push(record);
    byBalance.set(record.row.balance_id, list);
  }
  return rows.map((row) => ({ row, statements: byBalance.get(row.balance_id) ?? [] }));
}

/** Balance objects of stored rows (balanceRecords, rendered). */
export async function balanceObjects(executor: Kysely<Database>, rows: readonly BalanceRow[]): Promise<BalanceObject[]> {
  return (await balanceRecords(executor, rows)).map(renderBalanceRecord);
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

export async function retrieveStatement(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<StatementRecord> {
  const row = await findStatement(ctx.db, caller, command.id, 'id');
  return (await statementRecords(ctx.db, [row]))[0]!;
}

/** Whose statements a list shows: `merchant` (the account's own, its platform-fee statement too) or `tenant`. */
export const STATEMENT_OWNERS = ['merchant', 'tenant'] as const;

/** `statements.list` as a command: a page and the filters, each undefined when not sent. */
export interface ListStatementsCommand {
  readonly page: ListPage;
  readonly owner?: (typeof STATEMENT_OWNERS)[number] | undefined;
  readonly type?: StatementRow['type'] | undefined;
  readonly tenant?: string | undefined;
  readonly term?: string | undefined;
  /** A transfer id: kessai makes no transfers, so it matches the balance whose payout the statements make up. */
  readonly sourceTransfer?: string | undefined;
}

/** One page of statements (v1 offsets or v2 cursors), newest first, one past the limit. */
export async function listStatements(ctx: Context, caller: Caller, command: ListStatementsCommand): Promise<StatementRecord[]> {
  const { page, owner, type, tenant, term, sourceTransfer } = command;
  const cursor = await cursorOf(page, (id, param) => findStatement(ctx.db, caller, id, param), (row) => ({ created_at: row.created_at, id: row.statement_id }));
  const rows = await ctx.db
    .selectFrom('statements')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(owner === 'merchant', (q) => q.where('tenant_id', 'is', null))
    .$if(owner === 'tenant', (q) => q.where('tenant_id', 'is not', null))
    .$if(type !== undefined, (q) => q.where('type', '=', type!))
    .$if(tenant !== undefined, (q) => q.where('tenant_id', '=', tenant!))
    .$if(term !== undefined, (q) => q.where('term_id', '=', term!))
    .$if(sourceTransfer !== undefined, (q) => q.where('balance_id', '=', sourceTransfer!))
    .$call(inListPage(page, cursor, 'statement_id'))
    .execute();
  return statementRecords(ctx.db, rows);
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

export async function retrieveBalance(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<BalanceRecord> {
  const row = await findBalance(ctx.db, caller, command.id, 'id');
  return (await balanceRecords(ctx.db, [row]))[0]!;
}

export const BALANCE_STATES = ['collecting', 'transfer', 'claim'] as const satisfies readonly BalanceRow['state'][];
export const BALANCE_OWNERS = ['merchant', 'tenant', 'platform'] as const satisfies readonly BalanceRow['owner'][];

/** `balances.list` as a command: a page and the filters, each undefined when not sent. */
export interface ListBalancesCommand {
  readonly page: ListPage;
  readonly state?: BalanceRow['state'] | undefined;
  readonly owner?: BalanceRow['owner'] | undefined;
  readonly tenant?: string | undefined;
}

/** One page of balances (v1 offsets or v2 cursors), newest first, one past the limit. */
export async function listBalances(ctx: Context, caller: Caller, command: ListBalancesCommand): Promise<BalanceRecord[]> {
  const { page, state, owner, tenant } = command;
  const cursor = await cursorOf(page, (id, param) => findBalance(ctx.db, caller, id, param), (row) => ({ created_at: row.created_at, id: row.balance_id }));
  const rows = await ctx.db
    .selectFrom('balances')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(state !== undefined, (q) => q.where('state', '=', state!))
    .$if(owner !== undefined, (q) => q.where('owner', '=', owner!))
    .$if(tenant !== undefined, (q) => q.where('tenant_id', '=', tenant!))
    .$call(inListPage(page, cursor, 'balance_id'))
    .execute();
  return balanceRecords(ctx.db, rows);
}

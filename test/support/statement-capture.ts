/**
 * Every statement this process sends through the pg driver, each with whether it ran inside a
 * transaction (between the connection's BEGIN and COMMIT/ROLLBACK), and the account-scope rule
 * checked on them (src/db/account-scope.ts): a statement that reads or changes account tables names
 * its accounts as bound parameters, one filter per account table it names, so that on Citus it is
 * routed whole to the shard of those accounts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export interface SentStatement {
  readonly text: string;
  /** Sent between BEGIN and COMMIT/ROLLBACK on its connection: part of a job batch or an operation. */
  readonly inTransaction: boolean;
}

/** Starts recording; the returned function stops it and gives what was sent. */
export function captureStatements(): () => SentStatement[] {
  const sent: SentStatement[] = [];
  const open = new WeakSet<pg.Client>();
  const original = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const config = args[0];
    const text = typeof config === 'string' ? config : config && typeof (config as { text?: unknown }).text === 'string' ? (config as { text: string }).text : undefined;
    if (text !== undefined) {
      const word = text.trim().split(/\s+/, 1)[0]!.toLowerCase();
      if (word === 'begin' || word === 'start') open.add(this);
      else if (word === 'commit' || word === 'rollback') open.delete(this);
      else sent.push({ text, inTransaction: open.has(this) });
    }
    return (original as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof original;
  return () => {
    pg.Client.prototype.query = original;
    return sent;
  };
}

/** `account_id = $3`, `"c"."account_id" = ANY($2::text[])`, `"account_id" in ($1, $2)`: the account, or a batch's accounts, bound as parameters. */
const BOUND_ACCOUNT = /\baccount_id"?\s*(?:=\s*(?:ANY\(\s*)?|in\s*\(\s*)\$\d+/gi;
const LOCKS = /\bFOR\s+(UPDATE|NO KEY UPDATE|SHARE|KEY SHARE)\b/i;

/** The account tables the statement reads or changes (after FROM, JOIN, UPDATE; an INSERT's rows are routed by their own account_id), one entry per mention. */
export function accountTableMentions(text: string, accountTables: ReadonlySet<string>): string[] {
  return [...text.matchAll(/\b(?:FROM|JOIN|UPDATE)\s+"?([a-z_]+)"?/gi)].map((match) => match[1]!.toLowerCase()).filter((table) => accountTables.has(table));
}

/** Account filters bound as parameters. */
export function boundAccounts(text: string): number {
  return [...text.matchAll(BOUND_ACCOUNT)].length;
}

/** The statements of the SQL migrations (run once, by `kessai migrate`, over every account). */
function migrationText(): string {
  const dir = fileURLToPath(new URL('../../sql/', import.meta.url));
  return readdirSync(dir).filter((name) => name.endsWith('.sql')).map((name) => readFileSync(dir + name, 'utf8')).join('\n');
}

/**
 * A job's look for due work, which reads across accounts by design and commits nothing: a
 * lock-free SELECT naming no account, either sent outside any transaction (the accounts with due
 * work, listed before the batches: dueAccounts in src/engine/account-batches.ts) or computing the
 * next instant anything is `due` (a job's nextDueAt, which the simulation also asks inside its
 * bulk sign-ups).
 */
function isDiscovery(text: string, inTransaction: boolean): boolean {
  if (LOCKS.test(text) || !/^\s*select\b/i.test(text) || boundAccounts(text) > 0) return false;
  return !inTransaction || /\bAS\s+"?due"?(\s|,|$)/i.test(text);
}

/**
 * The statements breaking the account-scope rule, distinct: every statement naming account
 * tables names as many bound account filters. Spared: the migrations' own statements, and, when
 * `discovery` is set, the jobs' looks for due work (isDiscovery).
 */
export function unscopedStatements(sent: readonly SentStatement[], accountTables: ReadonlySet<string>, options: { readonly discovery: boolean }): string[] {
  const migrations = migrationText();
  const bad = new Set<string>();
  for (const { text, inTransaction } of sent) {
    const mentions = accountTableMentions(text, accountTables).length;
    if (mentions === 0 || mentions <= boundAccounts(text)) continue;
    if (migrations.includes(text.trim())) continue;
    if (options.discovery && isDiscovery(text, inTransaction)) continue;
    bad.add(text);
  }
  return [...bad];
}

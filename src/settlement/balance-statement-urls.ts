/**
 * `balances.statement_urls` (the `payjp` SDK's `balances.statementUrls`, official-sdks.md §4): a
 * download URL for the statements a balance collects, issued and checked by the one URL mechanism
 * of statement-urls.ts (kind `balance`): valid 1 hour, a newer URL for the same balance and
 * `platformer` value invalidates the older, an expired one is a not-found page (v1 §4.7 applied to
 * balances). The URL serves one CSV: each statement's block (renderStatementCsv) in the balance's
 * order, separated by an empty line.
 */
import type { Caller } from '../accounts/accounts';
import type { Context } from '../engine/context';
import { STATEMENT_URL_TTL_MS } from '../domain/limits';
import { issueUrl, payloadOfToken, renderStatementCsv, statementDownloadBase, type IssuedUrl, type IssueStatementUrlCommand } from './statement-urls';
import { balanceObjects, findBalance, type BalanceObject } from './statements';

/** `platformer` true: the platform-fee version of each statement. */
export async function issueBalanceStatementUrl(ctx: Context, caller: Caller, command: IssueStatementUrlCommand): Promise<IssuedUrl> {
  return issueUrl(ctx, caller, { kind: 'balance', id: command.id, platformer: command.platformer }, { ttlMs: STATEMENT_URL_TTL_MS, base: statementDownloadBase(ctx), exists: (trx) => findBalance(trx, caller, command.id, 'id') });
}

/** The CSV of a balance's statements, one block per statement. */
export function renderBalanceCsv(balance: BalanceObject, platformer: boolean): string {
  return balance.statements.map((statement) => renderStatementCsv(statement, platformer)).join('\r\n');
}

/** The download of a balance URL: checks the token (kind `balance`) and renders the CSV. */
export async function balanceStatementsCsv(ctx: Pick<Context, 'db' | 'clock' | 'config'>, token: string): Promise<string> {
  const payload = await payloadOfToken(ctx, token, 'balance');
  const row = await findBalance(ctx.db, { accountId: payload.a, livemode: payload.l }, payload.s, 'token');
  return renderBalanceCsv((await balanceObjects(ctx.db, [row]))[0]!, payload.p);
}

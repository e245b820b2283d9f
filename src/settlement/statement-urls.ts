/**
 * Statement download URLs (v1 §2.7, §4.7; service rules §4): `statements.statement_urls` issues a
 * URL valid for 1 hour; issuing a new one for the same statement and `platformer` value invalidates
 * the older. The URL carries a signed token (HMAC-SHA256 with the configured secret) naming the
 * statement, the `platformer` flag, a nonce and the expiry; `statementCsv` checks it and renders
 * the CSV the URL serves (the HTTP side comes later). An expired, replaced or forged token is
 * `not_found` (v1 §4.7: "An expired URL leads to a not-found page").
 *
 * The same mechanism (`issueUrl`, `payloadOfToken`) issues and checks every expiring URL kessai
 * serves, told apart by kind: balances' statements (balance-statement-urls.ts) and tenants'
 * application pages (src/tenants/application-urls.ts).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database } from '../db/schema';
import { reject } from '../domain/errors';
import { STATEMENT_URL_TTL_MS } from '../domain/limits';
import type { Context, EngineConfig } from '../engine/context';
import { findStatement, statementObjects, type StatementObject } from './statements';

export const DEFAULT_STATEMENT_DOWNLOAD_BASE = 'https://kessai.invalid/v1/statements/download';

/** The statement URL settings of EngineConfig (set by the composition root). */
export type StatementUrlConfig = Pick<EngineConfig, 'statementUrlSecret' | 'statementDownloadBaseUrl'>;

export type StatementUrlObject = { readonly object: 'statement_url'; readonly url: string; readonly expires: number };

/**
 * What an expiring URL kessai issues gives access to (one mechanism for all of them): a
 * statement's download, the statements of a balance (`balances.statement_urls`), a tenant's
 * application page (`tenants.application_urls`).
 */
export type DownloadKind = 'statement' | 'balance' | 'tenant_application';

export interface TokenPayload {
  readonly a: string;
  readonly l: boolean;
  /** The id of the object of kind `k`. */
  readonly s: string;
  readonly p: boolean;
  readonly n: string;
  /** Expiry, epoch ms. */
  readonly e: number;
  /** The kind; absent on the statement URLs issued before kinds existed. */
  readonly k?: DownloadKind;
}

/** The configured URL secret, or undefined when none (or one too short to sign with) is set. */
function configuredSecret(config: EngineConfig): string | undefined {
  const secret = config.statementUrlSecret;
  return secret === undefined || secret.length < 16 ? undefined : secret;
}

/** The secret to issue URLs with: without one, issuing is a configuration error (a 500; `serve` warns at start-up). */
function secretOf(config: EngineConfig): string {
  const secret = configuredSecret(config);
  if (secret === undefined) throw new Error('statement URLs need config.statementUrlSecret (at least 16 characters)');
  return secret;
}

function sign(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body).digest('base64url');
}

export function statementUrlToken(secret: string, payload: TokenPayload): string {
  const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${body}.${sign(secret, body)}`;
}

/** The object a URL is issued for: its kind, id and `platformer` flag. */
export interface DownloadTarget {
  readonly kind: DownloadKind;
  readonly id: string;
  readonly platformer: boolean;
}

/** An issued URL: the address and the instant it stops working. */
export interface IssuedUrl {
  readonly url: string;
  readonly expires: Date;
}

export interface IssueUrlOptions {
  readonly ttlMs: number;
  /** The address the token is appended to (`?token=…`). */
  readonly base: string;
  /** Checks, inside the transaction, that the caller's object exists; its refusal is the answer. */
  readonly exists: (trx: Kysely<Database>) => Promise<unknown>;
}

/**
 * Issues the URL of `target`, valid `ttlMs` from now. One row per (object, kind, platformer): the
 * new nonce replaces the old, which stops matching, so a newer URL invalidates the older.
 */
export async function issueUrl(ctx: Pick<Context, 'db' | 'clock' | 'ids' | 'config'>, caller: Caller, target: DownloadTarget, options: IssueUrlOptions): Promise<IssuedUrl> {
  const secret = secretOf(ctx.config);
  const now = ctx.clock.now();
  const expires = new Date(now.getTime() + options.ttlMs);
  return ctx.db.transaction().execute(async (trx) => {
    await options.exists(trx);
    const nonce = ctx.ids.next('statement').slice(3);
    await trx
      .insertInto('statement_urls')
      .values({ account_id: caller.accountId, livemode: caller.livemode, kind: target.kind, statement_id: target.id, platformer: target.platformer, nonce, issued_at: now, expires_at: expires })
      .onConflict((oc) => oc.columns(['account_id', 'livemode', 'kind', 'statement_id', 'platformer']).doUpdateSet({ nonce, issued_at: now, expires_at: expires }))
      .execute();
    const payload: TokenPayload = { a: caller.accountId, l: caller.livemode, s: target.id, p: target.platformer, n: nonce, e: expires.getTime(), ...(target.kind === 'statement' ? {} : { k: target.kind }) };
    return { url: `${options.base}?token=${statementUrlToken(secret, payload)}`, expires };
  });
}

/** The base of statement (and balance) download URLs: configured, or the placeholder. */
export function statementDownloadBase(ctx: Pick<Context, 'config'>): string {
  return ctx.config.statementDownloadBaseUrl ?? DEFAULT_STATEMENT_DOWNLOAD_BASE;
}

/** `statements.statement_urls` (and `balances.statement_urls`) as a command. */
export interface IssueStatementUrlCommand {
  /** The statement's (or balance's) id. */
  readonly id: string;
  /** True: the platform-fee version (v1 §4.7 `platformer`). */
  readonly platformer: boolean;
}

/** Issues the download URL of a statement of the caller (`invalid_id` on `id` when there is none). */
export async function issueStatementUrl(ctx: Context, caller: Caller, command: IssueStatementUrlCommand): Promise<IssuedUrl> {
  return issueUrl(ctx, caller, { kind: 'statement', id: command.id, platformer: command.platformer }, { ttlMs: STATEMENT_URL_TTL_MS, base: statementDownloadBase(ctx), exists: (trx) => findStatement(trx, caller, command.id, 'id') });
}

/**
 * The kind a token claims, read without checking it (the download route picks the renderer by it;
 * `payloadOfToken` then checks the token against that kind).
 */
export function claimedKindOf(token: string): DownloadKind {
  try {
    const claimed = (JSON.parse(Buffer.from(token.split('.')[0] ?? '', 'base64url').toString('utf8')) as Partial<TokenPayload> | null)?.k;
    return claimed === 'balance' || claimed === 'tenant_application' ? claimed : 'statement';
  } catch {
    return 'statement';
  }
}

/**
 * Checks a URL token as of the context clock: the signature, the expiry, that no newer URL
 * replaced it, and that it is of kind `kind`. Anything else is `not_found` on `token`.
 */
export async function payloadOfToken(ctx: Pick<Context, 'db' | 'clock' | 'config'>, token: string, kind: DownloadKind): Promise<TokenPayload> {
  const notFound = (): never => reject('not_found', 'token', 'This URL does not exist or has expired.');
  // Without a secret no URL was ever issued: whatever is asked for does not exist (the caller
  // needs no key, so this is no fault of the server's to log).
  const secret = configuredSecret(ctx.config);
  if (secret === undefined) return notFound();
  const [body, signature, extra] = token.split('.');
  if (body === undefined || signature === undefined || extra !== undefined) return notFound();
  const expected = Buffer.from(sign(secret, body));
  const given = Buffer.from(signature);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return notFound();
  let payload: TokenPayload;
  try {
    payload = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as TokenPayload;
  } catch {
    return notFound();
  }
  if ((payload.k ?? 'statement') !== kind) return notFound();
  if (ctx.clock.now().getTime() >= payload.e) return notFound();
  const current = await ctx.db
    .selectFrom('statement_urls')
    .select('nonce')
    .where('account_id', '=', payload.a)
    .where('livemode', '=', payload.l)
    .where('kind', '=', kind)
    .where('statement_id', '=', payload.s)
    .where('platformer', '=', payload.p)
    .executeTakeFirst();
  if (current?.nonce !== payload.n) return notFound();
  return payload;
}

/** Checks a statement download token as of the context clock and returns the statement it names. */
export async function statementOfToken(ctx: Pick<Context, 'db' | 'clock' | 'config'>, token: string): Promise<{ statement: StatementObject; platformer: boolean }> {
  const payload = await payloadOfToken(ctx, token, 'statement');
  const row = await findStatement(ctx.db, { accountId: payload.a, livemode: payload.l }, payload.s, 'token');
  return { statement: (await statementObjects(ctx.db, [row]))[0]!, platformer: payload.p };
}

/** Subjects shown on the platformer's (platform-fee) version of a statement. */
const PLATFORM_FEE_SUBJECTS = new Set(['platform_fee', 'refund_platform_fee_offset', 'chargeback_platform_fee_offset']);

function csvField(value: string | number | null): string {
  const text = value === null ? '' : String(value);
  return /[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/**
 * The CSV a statement URL serves: a header block (statement, term, owner) and one line per item.
 * With `platformer` only the platform-fee items are listed and the operator's report lines (the
 * service's fee items) are left out (v1 §4.7).
 */
export function renderStatementCsv(statement: StatementObject, platformer: boolean): string {
  const items = platformer ? statement.items.filter((item) => PLATFORM_FEE_SUBJECTS.has(item.subject)) : statement.items;
  const net = items.reduce((sum, item) => sum + item.amount, 0);
  const lines = [
    ['statement_id', statement.id],
    ['type', statement.type],
    ['tenant_id', statement.tenant_id],
    ['term_id', statement.term?.id ?? null],
    ['term_start', statement.term === null ? null : new Date(statement.term.start_at * 1000).toISOString()],
    ['term_end', statement.term?.end_at === null || statement.term === null ? null : new Date(statement.term.end_at * 1000).toISOString()],
    ['net', net],
    [],
    ['subject', 'name', 'amount', 'tax_rate'],
    ...items.map((item) => [item.subject, item.name, item.amount, item.tax_rate]),
  ];
  return lines.map((line) => line.map(csvField).join(',')).join('\r\n') + '\r\n';
}

/** The download: checks the token and renders the CSV. */
export async function statementCsv(ctx: Pick<Context, 'db' | 'clock' | 'config'>, token: string): Promise<string> {
  const { statement, platformer } = await statementOfToken(ctx, token);
  return renderStatementCsv(statement, platformer);
}

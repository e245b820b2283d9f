/**
 * Merchant accounts: provisioning with test and live API keys, fee rates per card brand, and key
 * authentication (v1 §5). Keys are random secrets shown once; only their SHA-256 digests are kept
 * (public keys, published in browser pages by design, are also kept in clear: `publicKeyOf`).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema';
import type { Context } from '../engine/context';
import { KessaiError } from '../domain/errors';
import { ID_PREFIX } from '../domain/ids';
import { formatRate, parseRate } from '../domain/money';
import type { Caller } from '../operations/define';

export type TermCycle = 'monthly' | 'semi_monthly';

/** Card brands as the v1 card object names them. */
export const CARD_BRANDS = ['Visa', 'MasterCard', 'JCB', 'American Express', 'Diners Club', 'Discover'] as const;
export type CardBrand = (typeof CARD_BRANDS)[number];

/**
 * Default fee rates of a new account (percent), overridable per account: 3.00 % for Visa and
 * Mastercard, 3.30 % for the other brands (docs/decisions/money-and-settlement.md).
 */
export const DEFAULT_FEE_RATES: Readonly<Record<CardBrand, string>> = {
  Visa: '3.00',
  MasterCard: '3.00',
  JCB: '3.30',
  'American Express': '3.30',
  'Diners Club': '3.30',
  Discover: '3.30',
};

export interface AccountKeys {
  readonly test: { readonly secret: string; readonly public: string };
  readonly live: { readonly secret: string; readonly public: string };
}

export interface Account {
  readonly id: string;
  readonly name: string;
  readonly liveEnabled: boolean;
  readonly termCycle: TermCycle;
  readonly feeRates: Readonly<Record<string, string>>;
  readonly createdAt: Date;
}

export interface CreateAccountInput {
  readonly name: string;
  readonly id?: string;
  readonly liveEnabled?: boolean;
  readonly termCycle?: TermCycle;
  /** Brand → percent, e.g. `{ Visa: '2.59' }`; brands not given keep the defaults. */
  readonly feeRates?: Readonly<Record<string, string>>;
}

const ACCOUNT_ID = /^acct_[A-Za-z0-9_-]{1,60}$/;

export function digestKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

function newKey(prefix: string): string {
  // Secrets come from the operating system, never from the seeded id stream.
  return prefix + randomBytes(15).toString('hex');
}

/** Fee rates by card brand as given (percent, up to two decimals), checked and normalised ("2.5" → "2.50"). */
export function checkedFeeRates(input: Readonly<Record<string, string>>): Record<string, string> {
  const feeRates: Record<string, string> = {};
  for (const [brand, rate] of Object.entries(input)) {
    if (!(CARD_BRANDS as readonly string[]).includes(brand)) {
      throw new KessaiError('unacceptable_brand', { param: `fee_rates[${brand}]`, message: `unknown card brand ${JSON.stringify(brand)}; brands: ${CARD_BRANDS.join(', ')}` });
    }
    try {
      feeRates[brand] = formatRate(parseRate(rate, `fee rate of ${brand}`));
    } catch (error) {
      throw new KessaiError('invalid_param_key', { param: `fee_rates[${brand}]`, message: (error as Error).message });
    }
  }
  return feeRates;
}

/** A key as made, before it is stored: only its digest (and a public key in clear) is kept. */
export interface NewKey {
  readonly key: string;
  readonly kind: 'secret' | 'public';
  readonly livemode: boolean;
}

/** A new random key of a kind and mode (`sk_test_…`, `pk_live_…`). */
export function newApiKey(kind: 'secret' | 'public', livemode: boolean): string {
  const prefix = kind === 'secret' ? (livemode ? ID_PREFIX.secretKeyLive : ID_PREFIX.secretKeyTest) : livemode ? ID_PREFIX.publicKeyLive : ID_PREFIX.publicKeyTest;
  return newKey(prefix);
}

/** Stores keys of an account: their rows in `api_keys` and the digest → account directory that authenticate reads first (sql/000042). */
export async function insertKeys(executor: Kysely<Database>, accountId: string, keys: readonly NewKey[], now: Date): Promise<void> {
  await executor
    .insertInto('api_keys')
    .values(keys.map((row) => ({ account_id: accountId, key_digest: digestKey(row.key), kind: row.kind, livemode: row.livemode, key_hint: row.key.slice(0, 12), public_key: row.kind === 'public' ? row.key : null, created_at: now })))
    .execute();
  await executor
    .insertInto('api_key_directory')
    .values(keys.map((row) => ({ key_digest: digestKey(row.key), account: accountId })))
    .execute();
}

export async function createAccount(ctx: Pick<Context, 'db' | 'clock' | 'ids'>, input: CreateAccountInput): Promise<{ account: Account; keys: AccountKeys }> {
  const name = input.name.trim();
  if (name.length === 0 || name.length > 100) throw new KessaiError('invalid_string_length', { param: 'name', message: 'name must be 1 to 100 characters' });
  const id = input.id ?? ctx.ids.next('account');
  if (!ACCOUNT_ID.test(id)) throw new KessaiError('invalid_flexible_id', { param: 'id', message: `account id must look like acct_<letters, digits, _ or ->, got ${JSON.stringify(id)}` });
  const termCycle = input.termCycle ?? 'monthly';
  if (termCycle !== 'monthly' && termCycle !== 'semi_monthly') {
    throw new KessaiError('invalid_param_key', { param: 'term_cycle', message: 'term_cycle must be monthly or semi_monthly' });
  }
  const feeRates: Record<string, string> = { ...DEFAULT_FEE_RATES, ...checkedFeeRates(input.feeRates ?? {}) };
  const now = ctx.clock.now();
  const keys: AccountKeys = {
    test: { secret: newApiKey('secret', false), public: newApiKey('public', false) },
    live: { secret: newApiKey('secret', true), public: newApiKey('public', true) },
  };
  const keyRows: NewKey[] = [
    { key: keys.test.secret, kind: 'secret', livemode: false },
    { key: keys.test.public, kind: 'public', livemode: false },
    { key: keys.live.secret, kind: 'secret', livemode: true },
    { key: keys.live.public, kind: 'public', livemode: true },
  ];
  await ctx.db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto('accounts')
      .values({ account_id: id, name, live_enabled: input.liveEnabled ?? false, term_cycle: termCycle, created_at: now })
      .onConflict((oc) => oc.column('account_id').doNothing())
      .returning('account_id')
      .executeTakeFirst();
    if (!inserted) throw new KessaiError('already_exist_id', { param: 'id', message: `account ${id} already exists` });
    await trx.insertInto('account_fee_rates').values(Object.entries(feeRates).map(([brand, fee_rate]) => ({ account_id: id, brand, fee_rate }))).execute();
    await insertKeys(trx, id, keyRows, now);
  });
  return { account: { id, name, liveEnabled: input.liveEnabled ?? false, termCycle, feeRates, createdAt: now }, keys };
}

/**
 * The account's public key of a mode, kept in clear (sql/000100: public keys are published in
 * browser pages by design), for the pages kessai serves itself (the hosted checkout page); null
 * for keys made before it was kept, or when every public key of the mode is revoked.
 */
export async function publicKeyOf(executor: Kysely<Database>, accountId: string, livemode: boolean): Promise<string | null> {
  const row = await executor
    .selectFrom('api_keys')
    .select('public_key')
    .where('account_id', '=', accountId)
    .where('livemode', '=', livemode)
    .where('kind', '=', 'public')
    .where('revoked_at', 'is', null)
    .where('public_key', 'is not', null)
    .orderBy('created_at', 'desc')
    .executeTakeFirst();
  return row?.public_key ?? null;
}

export async function getAccount(ctx: Pick<Context, 'db'>, id: string): Promise<Account> {
  const row = await ctx.db.selectFrom('accounts').selectAll().where('account_id', '=', id).executeTakeFirst();
  if (!row) throw new KessaiError('invalid_id', { param: 'id', message: `No such account: ${id}` });
  const rates = await ctx.db.selectFrom('account_fee_rates').select(['brand', 'fee_rate']).where('account_id', '=', id).execute();
  return {
    id: row.account_id,
    name: row.name,
    liveEnabled: row.live_enabled,
    termCycle: row.term_cycle,
    feeRates: Object.fromEntries(rates.map((rate) => [rate.brand, rate.fee_rate])),
    createdAt: row.created_at,
  };
}

export async function listAccounts(ctx: Pick<Context, 'db'>): Promise<{ id: string; name: string; liveEnabled: boolean; termCycle: TermCycle; createdAt: Date }[]> {
  const rows = await ctx.db.selectFrom('accounts').selectAll().orderBy('created_at').orderBy('account_id').execute();
  return rows.map((row) => ({ id: row.account_id, name: row.name, liveEnabled: row.live_enabled, termCycle: row.term_cycle, createdAt: row.created_at }));
}

export type { Caller } from '../operations/define';

/** How long a server reuses a key's answer: a revocation or a withdrawn live permission refuses within this. */
export const KEY_ANSWER_FRESH_MS = 1_000;

/**
 * A server's memory of the keys it authenticated, by key digest (never the key itself):
 * - the key's account, from `api_key_directory`: the directory only gains rows and a key's account
 *   never changes, so this stays true and is kept;
 * - the caller the key authenticated as, reused for `freshMs` (KEY_ANSWER_FRESH_MS by default) on
 *   this process's monotonic clock, then read again from `api_keys` ⋈ `accounts`. So a revocation
 *   or a withdrawn live permission — written by anyone, on any server, by SQL or otherwise —
 *   refuses every server's requests within `freshMs`, and a busy key costs one lookup a second
 *   instead of one a request.
 * A key that was not found, revoked or refused is never remembered. Bounded: emptied once it holds
 * `limit` entries.
 */
export class KeyCache {
  readonly #entries = new Map<string, { readonly account: string; caller?: Caller; until?: number }>();
  readonly #limit: number;
  readonly #freshMs: number;
  readonly #now: () => number;
  constructor(options: { readonly limit?: number; readonly freshMs?: number; readonly now?: () => number } = {}) {
    this.#limit = options.limit ?? 10_000;
    this.#freshMs = options.freshMs ?? KEY_ANSWER_FRESH_MS;
    this.#now = options.now ?? (() => performance.now());
  }

  /** The account of a key found before. */
  account(digest: string): string | undefined {
    return this.#entries.get(digest)?.account;
  }

  /** The caller a key authenticated as, while that answer is fresh. */
  caller(digest: string): Caller | undefined {
    const entry = this.#entries.get(digest);
    return entry?.caller !== undefined && this.#now() < entry.until! ? entry.caller : undefined;
  }

  /** A key found in the directory, and the caller it authenticated as when it did. */
  remember(digest: string, account: string, caller?: Caller): void {
    if (this.#entries.size >= this.#limit && !this.#entries.has(digest)) this.#entries.clear();
    this.#entries.set(digest, caller === undefined ? { account } : { account, caller, until: this.#now() + this.#freshMs });
  }
}

/**
 * Resolves an API key to its account and mode (v1 §5): no key → `no_api_key`; unknown or revoked
 * → `invalid_api_key`; a live key of an account without live permission → `not_activated_account`.
 * With a server's KeyCache, a fresh answer is reused (see KeyCache).
 */
export async function authenticate(ctx: Pick<Context, 'db'>, key: string | undefined, cache?: KeyCache): Promise<Caller> {
  if (key === undefined || key.length === 0) throw new KessaiError('no_api_key', { message: 'You did not provide an API key.' });
  const digest = digestKey(key);
  const fresh = cache?.caller(digest);
  if (fresh !== undefined) return fresh;
  // The account from the engine-wide directory, then the key by account and digest: on Citus the
  // coordinator answers the first itself and routes the second to the account's one shard.
  let account = cache?.account(digest);
  if (account === undefined) {
    account = (await ctx.db.selectFrom('api_key_directory').select('account').where('key_digest', '=', digest).executeTakeFirst())?.account;
    if (account !== undefined) cache?.remember(digest, account);
  }
  const row =
    account !== undefined &&
    (await ctx.db
      .selectFrom('api_keys')
      .innerJoin('accounts', 'accounts.account_id', 'api_keys.account_id')
      .select(['api_keys.account_id', 'api_keys.kind', 'api_keys.livemode', 'api_keys.revoked_at', 'accounts.live_enabled'])
      .where('api_keys.account_id', '=', account)
      .where('accounts.account_id', '=', account)
      .where('api_keys.key_digest', '=', digest)
      .executeTakeFirst());
  if (!row || row.revoked_at !== null) throw new KessaiError('invalid_api_key', { message: 'Invalid API key provided.' });
  if (row.livemode && !row.live_enabled) throw new KessaiError('not_activated_account', { message: 'This account is not activated for live mode.' });
  const caller: Caller = { accountId: row.account_id, livemode: row.livemode, kind: row.kind };
  cache?.remember(digest, row.account_id, caller);
  return caller;
}

/**
 * The scheduled work on v1 holds (service rules §2), set-based like the renewal job:
 *
 * - hold expiry: uncaptured holds past `expired_at` are released through the network in bulk and
 *   marked `released_at` = their own `expired_at`, with a `charge.updated` event at that instant; a
 *   debit or prepaid card was debited at authorization, so its release refunds the debit (service
 *   rules §2.1): the charge is also `refunded` with `amount_refunded` = amount, and the event is
 *   `charge.refunded`;
 * - 3-D Secure timeouts: charges left pending past their 30-minute window are abandoned
 *   (`failure_code` = `three_d_secure_expired`), with `charge.failed` at the window's end;
 * - scheduled reauthorization (service rules §2 Decision): on accounts that opted in, credit-card
 *   holds that lapse within the lead time get a new hold at `expired_at − lead`, up to the
 *   configured count, each attempt a `reauthorizations` row and a `charge.updated` event.
 *
 * Each batch is one transaction: lock the due rows (FOR UPDATE SKIP LOCKED, oldest due first),
 * one bulk network call, one UPDATE from arrays, one INSERT of events rendered server-side. The
 * UPDATE moves every row off its due list in the same transaction, so a repeated slot or a second
 * worker finds nothing left; every instant written is the item's own due instant. A charge claimed
 * by an operation whose network call is in flight (charge-claims.ts) is left to that operation; its
 * lease is read on the worker's clock (the claimant's kind of instant), not against the slot.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema';
import { KessaiError } from '../domain/errors';
import { v1HoldExpiresAt, V1_EXPIRY_DAYS } from '../domain/hold-periods';
import type { Context } from '../engine/context';
import { inAccounts } from '../db/account-scope';
import { dueAccounts, earliestDueAt, listOnReachableNodes } from '../engine/account-batches';
import { customerInScope, LIVE_BOOK, type JobScope } from '../test-clocks/clock-scope';
import { isDatabaseUnavailable } from '../db/errors';
import { checkpoint, runBatches, type JobCounts, type SlotRun } from '../engine/job';
import { liveClaimSql } from './charge-claims';
import { accountsWithLapsedIntents, recoverCreateIntents } from './create-intents';
import { accountsWithLapsedClaims, recoverLapsedClaims } from '../engine/network-claims';
import { recordChargeEvents, type ChargeEventKey } from './charge-record';
import { paymentRefundFinishers } from '../payment-refunds/payment-refunds';
import { paymentFlowFinishers } from '../payment-flows/payment-flows';
import { bulkColumns, ROW_KEYS } from '../db/bulk-rows';

/** A charge whose card moved the money at authorization (service rules §2.1): releasing it refunds the debit. */
export const DEBITED_AT_AUTHORIZATION = sql`(card_funding IN ('debit', 'prepaid'))`;

/** The columns that make a hold live: authorized, not captured, not cancelled, not yet released. */
const LIVE_HOLD = sql`paid AND NOT captured AND NOT refunded AND released_at IS NULL AND expired_at IS NOT NULL`;

// ---- hold expiry ---------------------------------------------------------------------------

/**
 * Service rules §2: "After expired_at the hold is released" — a hold is still good at the
 * `expired_at` instant itself (holdLapsed), so it is due in slots strictly after it.
 */
export async function expireHolds(ctx: Context, run: SlotRun): Promise<JobCounts> {
  const recovered = await recoverLapsedCreateIntents(ctx, run);
  const claims = await recoverLapsedNetworkClaims(ctx, run);
  const counts = await runBatches(
    ctx,
    run,
    ['released'],
    (db, cap, among) => dueAccounts(db, 'charges', sql`d.paid AND NOT d.captured AND NOT d.refunded AND d.released_at IS NULL AND d.expired_at IS NOT NULL AND d.expired_at < ${run.slot} AND ${customerInScope(ctx, 'd', among)}`, cap, among),
    (trx, accountIds, limit) => expireHoldBatch(trx, ctx, accountIds, run.slot, limit),
  );
  return { ...(recovered === 0 ? {} : { intents_recovered: recovered }), ...(claims === 0 ? {} : { claims_recovered: claims }), ...counts };
}

/**
 * Before the holds too: the network claims whose process died between the claim and the record
 * (src/engine/network-claims.ts), lapsed on the worker's clock, account by account: a charge's
 * authorization undone (asked again under its reference, what was approved released), a v2
 * refund, a payment flow's capture or release finished (asked again under its id, the answer
 * recorded). Counted as `claims_recovered`
 * only when there were any.
 */
async function recoverLapsedNetworkClaims(ctx: Context, run: SlotRun): Promise<number> {
  let recovered = 0;
  const finishers = { ...paymentRefundFinishers(ctx), ...paymentFlowFinishers(ctx) };
  for (const accountId of await lapsedOnReachableNodes(ctx, (among) => accountsWithLapsedClaims(ctx.db, ctx.clock.now(), undefined, among))) {
    checkpoint(run);
    recovered += await unlessUnreachable(ctx, accountId, () => recoverLapsedClaims(ctx, [accountId], ctx.config.batchSize, finishers));
  }
  return recovered;
}

/**
 * Before the holds: the create intents of charges whose process died at the card network
 * (create-intents.ts), lapsed on the worker's clock as claims are, undone account by account
 * (released at the network, the token given back). Counted as `intents_recovered` only when there
 * were any, so a slot with none reads as before.
 */
async function recoverLapsedCreateIntents(ctx: Context, run: SlotRun): Promise<number> {
  let recovered = 0;
  for (const accountId of await lapsedOnReachableNodes(ctx, (among) => accountsWithLapsedIntents(ctx.db, ctx.clock.now(), among))) {
    checkpoint(run);
    recovered += await unlessUnreachable(ctx, accountId, () =>
      recoverCreateIntents(ctx, [accountId], ctx.config.batchSize, {
        inClaim: (trx) => run.assertClaim(trx),
        recorded: async (trx, undone) => {
          if (undone > 0) await run.recordBatch(trx, { intents_recovered: undone });
        },
      }),
    );
  }
  return recovered;
}

/**
 * The accounts with lapsed claims on the database nodes that answer (listOnReachableNodes); those of
 * a node that does not are left to the next slot, which finds their lapsed claims again.
 */
async function lapsedOnReachableNodes(ctx: Context, list: (among?: readonly string[]) => Promise<readonly string[]>): Promise<string[]> {
  const { listed, unreachable } = await listOnReachableNodes(ctx.db, list);
  for (const accounts of unreachable) ctx.log.warn({ accounts: accounts.length, account: accounts[0] }, 'recovery skipped for the accounts of an unreachable database node; the next slot takes them again');
  return listed;
}

/**
 * One account's recovery, or 0 when its database node cannot be reached: the other accounts'
 * recoveries and the slot's holds go on, and what this one left lapsed is found again by the next
 * slot (recoveries are found by their lapsed leases, not by slot).
 */
async function unlessUnreachable(ctx: Context, accountId: string, recover: () => Promise<number>): Promise<number> {
  try {
    return await recover();
  } catch (error) {
    if (!isDatabaseUnavailable(error)) throw error;
    ctx.log.warn({ err: error, account: accountId }, 'recovery skipped: the account\'s database node is unreachable; the next slot takes it again');
    return 0;
  }
}

export async function expireHoldBatch(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'processor' | 'clock' | 'testClock'>, accountIds: readonly string[], asOf: Date, limit: number): Promise<{ selected: number; released: number }> {
  const due = await sql<{ t: string; a: string; l: boolean; id: string; amount: number; code: string | null; e: number; debited: boolean }>`
    SELECT ctid::text AS t, account_id AS a, livemode AS l, charge_id AS id, amount, authorization_code AS code, ${DEBITED_AT_AUTHORIZATION} AS debited,
           (extract(epoch from expired_at) * 1000)::bigint AS e
    FROM charges WHERE ${inAccounts('account_id', accountIds)} AND ${LIVE_HOLD} AND expired_at < ${asOf} AND ${customerInScope(ctx, 'charges', accountIds)} AND NOT ${liveClaimSql('charges', accountIds, ctx.clock.now())}
    ORDER BY expired_at, account_id, livemode, charge_id LIMIT ${limit}
    FOR UPDATE SKIP LOCKED`.execute(trx);
  const rows = due.rows;
  if (rows.length === 0) return { selected: 0, released: 0 };
  // The network gives the money back first; a batch that then fails releases again on the retry,
  // which the network treats as the same release.
  await ctx.processor.release(rows.map((r) => ({ reference: r.id, authorizationCode: r.code ?? '', amount: r.amount, at: new Date(Number(r.e)) })));
  // The rows are addressed by the tuple ids the locking SELECT returned (one heap fetch each;
  // joined by key, the planner hashed the whole charges table for every batch). That is exact
  // because this is a separate statement of the same READ COMMITTED transaction: it sees the
  // versions the SELECT locked (also one that a concurrent update made current before the lock),
  // and nobody can move a row this transaction holds locked. charges is not partitioned (tuple
  // ids would repeat across partitions). The accounts bind the statement to one shard on Citus,
  // where a tuple id means something on one shard only.
  const updated = await sql<{ charge_id: string }>`
    UPDATE charges c SET released_at = c.expired_at, updated_at = c.expired_at,
      refunded = c.refunded OR ${DEBITED_AT_AUTHORIZATION}, amount_refunded = CASE WHEN ${DEBITED_AT_AUTHORIZATION} THEN c.amount ELSE c.amount_refunded END
    WHERE ${inAccounts('c.account_id', accountIds)} AND c.ctid = ANY(${rows.map((r) => r.t)}::tid[]) AND c.released_at IS NULL
    RETURNING c.charge_id`.execute(trx);
  // Every row was locked live and unreleased, so every one must have been written; if an
  // assumption above ever stops holding, fail the batch (rolled back, the slot retried) rather
  // than leave holds silently unreleased.
  if (updated.rows.length !== rows.length) {
    throw new Error(`hold expiry: ${rows.length} holds locked but ${updated.rows.length} released; the batch is rolled back`);
  }
  // Every locked hold was released: its event, in the order the holds were due.
  const events: ChargeEventKey[] = rows.map((r) => ({ accountId: r.a, livemode: r.l, chargeId: r.id, type: r.debited ? 'charge.refunded' : 'charge.updated', at: new Date(Number(r.e)) }));
  await recordChargeEvents(trx, ctx.ids, events);
  return { selected: rows.length, released: events.length };
}

/** The earliest instant after `after` at which a hold is due for release (1 ms past its expired_at). */
export async function nextHoldExpiryDueAt(db: Kysely<Database>, after: Date, scope: JobScope = LIVE_BOOK): Promise<Date | null> {
  const due = await earliestDueAt(db, 'charges', 'expired_at', sql`${LIVE_HOLD} AND ${customerInScope(scope, 'd')}`, after, true);
  return due === null ? null : new Date(due.getTime() + 1);
}

// ---- 3-D Secure timeouts -------------------------------------------------------------------

export const THREE_D_SECURE_EXPIRED_MESSAGE = '3-D Secure was not completed within 30 minutes; create the charge again';

/** Service rules §2: a pending 3-D Secure charge "can be finished for 30 minutes after creation"; past that it is abandoned. */
export async function abandonThreeDSecure(ctx: Context, run: SlotRun): Promise<JobCounts> {
  return runBatches(
    ctx,
    run,
    ['abandoned'],
    (db, cap, among) => dueAccounts(db, 'charges', sql`d.tds_expires_at IS NOT NULL AND d.tds_expires_at < ${run.slot} AND ${customerInScope(ctx, 'd', among)}`, cap, among),
    (trx, accountIds, limit) => abandonThreeDSecureBatch(trx, ctx, accountIds, run.slot, limit),
  );
}

export async function abandonThreeDSecureBatch(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'clock' | 'testClock'>, accountIds: readonly string[], asOf: Date, limit: number): Promise<{ selected: number; abandoned: number }> {
  // RETURNING reads plain columns: Citus allows no STABLE function there (extract on a timestamptz is one).
  const updated = await sql<{ a: string; l: boolean; id: string; at: Date }>`
    WITH due AS (
      SELECT account_id, livemode, charge_id FROM charges
      WHERE ${inAccounts('account_id', accountIds)} AND tds_expires_at IS NOT NULL AND tds_expires_at < ${asOf} AND ${customerInScope(ctx, 'charges', accountIds)} AND NOT ${liveClaimSql('charges', accountIds, ctx.clock.now())}
      ORDER BY tds_expires_at, account_id, livemode, charge_id LIMIT ${limit}
      FOR UPDATE SKIP LOCKED)
    UPDATE charges c SET failure_code = 'three_d_secure_expired', failure_message = ${THREE_D_SECURE_EXPIRED_MESSAGE},
                         updated_at = c.tds_expires_at, tds_expires_at = NULL
    FROM due WHERE ${inAccounts('c.account_id', accountIds)} AND c.account_id = due.account_id AND c.livemode = due.livemode AND c.charge_id = due.charge_id
    RETURNING c.account_id AS a, c.livemode AS l, c.charge_id AS id, c.updated_at AS at`.execute(trx);
  const rows = [...updated.rows].sort((x, y) => x.at.getTime() - y.at.getTime() || (x.a < y.a ? -1 : x.a > y.a ? 1 : 0) || (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
  await recordChargeEvents(
    trx,
    ctx.ids,
    rows.map((r) => ({ accountId: r.a, livemode: r.l, chargeId: r.id, type: 'charge.failed', at: r.at })),
  );
  return { selected: rows.length, abandoned: rows.length };
}

export async function nextThreeDSecureTimeoutAt(db: Kysely<Database>, after: Date, scope: JobScope = LIVE_BOOK): Promise<Date | null> {
  const due = await earliestDueAt(db, 'charges', 'tds_expires_at', sql`d.tds_expires_at IS NOT NULL AND ${customerInScope(scope, 'd')}`, after, true);
  return due === null ? null : new Date(due.getTime() + 1);
}

// ---- scheduled reauthorization -------------------------------------------------------------

export interface ReauthSettings {
  readonly enabled: boolean;
  /** Holds lapsing within this many hours are reauthorized (1..720). */
  readonly leadHours: number;
  /** Scheduled attempts per charge at most (0..100). */
  readonly maxCount: number;
}

/**
 * Opts an account in to (or out of) scheduled reauthorization (service rules §2 Decision), and/or
 * sets its lead time and attempt count; what is not given stays. Returns the account's settings.
 * Unknown account: `invalid_id` (account); a value out of range: `invalid_param_key` naming it,
 * and nothing changes.
 */
export async function setReauthSettings(db: Kysely<Database>, accountId: string, settings: Partial<ReauthSettings>): Promise<ReauthSettings> {
  const { enabled, leadHours, maxCount } = settings;
  if (leadHours !== undefined && !(Number.isInteger(leadHours) && leadHours >= 1 && leadHours <= 720)) {
    throw new KessaiError('invalid_param_key', { param: 'lead_hours', message: `lead hours must be an integer from 1 to 720, got ${leadHours}` });
  }
  if (maxCount !== undefined && !(Number.isInteger(maxCount) && maxCount >= 0 && maxCount <= 100)) {
    throw new KessaiError('invalid_param_key', { param: 'max_count', message: `max count must be an integer from 0 to 100, got ${maxCount}` });
  }
  const changes = {
    ...(enabled === undefined ? {} : { reauth_enabled: enabled }),
    ...(leadHours === undefined ? {} : { reauth_lead_hours: leadHours }),
    ...(maxCount === undefined ? {} : { reauth_max_count: maxCount }),
  };
  const columns = ['reauth_enabled', 'reauth_lead_hours', 'reauth_max_count'] as const;
  const row =
    Object.keys(changes).length === 0
      ? await db.selectFrom('accounts').select(columns).where('account_id', '=', accountId).executeTakeFirst()
      : await db.updateTable('accounts').set(changes).where('account_id', '=', accountId).returning(columns).executeTakeFirst();
  if (!row) throw new KessaiError('invalid_id', { param: 'account', message: `No such account: ${accountId}` });
  return { enabled: row.reauth_enabled, leadHours: row.reauth_lead_hours, maxCount: row.reauth_max_count };
}

/**
 * The due instant of a scheduled reauth: `expired_at − lead`, but never before the hold itself was
 * authorized (a lead longer than the hold reauthorizes right after it).
 */
const REAUTH_DUE = sql`greatest(c.expired_at - a.reauth_lead_hours * interval '1 hour', coalesce(c.authorized_at, c.created_at))`;

/**
 * Holds due for a scheduled attempt: the account opted in; a credit card (never debit or prepaid:
 * a second hold is a second debit); fewer attempts than allowed; this hold not attempted before
 * (a failed attempt leaves the hold to lapse); the due instant come by the slot.
 */
/** One scheduled reauthorization attempt, as written (reauthorizations row and the charge's hold). */
interface ReauthAttempt {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly reauthId: string;
  readonly chargeId: string;
  readonly amount: number;
  readonly ok: boolean;
  readonly failureCode: string | null;
  readonly failureMessage: string | null;
  readonly code: string | null;
  readonly previousExpiredAt: Date;
  readonly expiresAt: Date | null;
  readonly at: Date;
}
const REAUTH_COLUMNS = bulkColumns<ReauthAttempt>()({
  a: ['text', 'accountId'],
  l: ['boolean', 'livemode'],
  rid: ['text', 'reauthId'],
  id: ['text', 'chargeId'],
  amt: ['bigint', 'amount'],
  ok: ['boolean', 'ok'],
  fc: ['text', 'failureCode'],
  fm: ['text', 'failureMessage'],
  code: ['text', 'code'],
  prev: ['instant', 'previousExpiredAt'],
  exp: ['instant', 'expiresAt'],
  at: ['instant', 'at'],
});

/** The largest lead time an account may configure (accounts.reauth_lead_hours ≤ 720). */
const MAX_LEAD_MS = 720 * 3600_000;

/** The held charges of reauth-enabled accounts; with `accountIds`, the account rows named too (Citus routes a locking statement only when every table names its accounts). */
function reauthFrom(accountIds?: readonly string[]) {
  return sql`charges c JOIN accounts a ON ${accountIds === undefined ? sql`TRUE` : inAccounts('a.account_id', accountIds)} AND a.account_id = c.account_id AND a.reauth_enabled`;
}
const REAUTH_WHERE = sql`
  c.paid AND NOT c.captured AND NOT c.refunded AND c.released_at IS NULL AND c.expired_at IS NOT NULL
  AND c.card_funding = 'credit' AND c.reauth_count < a.reauth_max_count
  AND c.reauth_tried_expired_at IS DISTINCT FROM c.expired_at`;

export async function reauthorizeHolds(ctx: Context, run: SlotRun): Promise<JobCounts> {
  return runBatches(
    ctx,
    run,
    ['reauthorized', 'failed'],
    // Lock-free and a superset (the hold-due window only); the batch applies every condition.
    (db, cap, among) =>
      dueAccounts(
        db,
        'charges',
        sql`d.paid AND NOT d.captured AND NOT d.refunded AND d.released_at IS NULL AND d.expired_at IS NOT NULL
        AND d.card_funding = 'credit' AND d.expired_at <= ${new Date(run.slot.getTime() + MAX_LEAD_MS)} AND a.reauth_enabled AND ${customerInScope(ctx, 'd', among)}`,
        cap,
        among,
      ),
    (trx, accountIds, limit) => reauthorizeBatch(trx, ctx, accountIds, run.slot, limit),
  );
}

interface ReauthRow {
  a: string;
  l: boolean;
  id: string;
  amount: number;
  expiry_days: number | null;
  issuer: string | null;
  expired: number;
  due: number;
  fingerprint: string;
  exp_month: number;
  exp_year: number;
}

export async function reauthorizeBatch(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'processor' | 'clock' | 'testClock'>, accountIds: readonly string[], asOf: Date, limit: number): Promise<{ selected: number; reauthorized: number; failed: number }> {
  const due = await sql<ReauthRow>`
    SELECT c.account_id AS a, c.livemode AS l, c.charge_id AS id, c.amount, c.expiry_days, c.card_issuer AS issuer,
           (extract(epoch from c.expired_at) * 1000)::bigint AS expired, (extract(epoch from ${REAUTH_DUE}) * 1000)::bigint AS due,
           coalesce(cd.fingerprint, tk.fingerprint) AS fingerprint, coalesce(cd.exp_month, tk.exp_month) AS exp_month, coalesce(cd.exp_year, tk.exp_year) AS exp_year
    FROM ${reauthFrom(accountIds)}
    LEFT JOIN cards cd ON ${inAccounts('cd.account_id', accountIds)} AND cd.account_id = c.account_id AND cd.livemode = c.livemode AND cd.card_id = c.card_id
    LEFT JOIN tokens tk ON cd.card_id IS NULL AND ${inAccounts('tk.account_id', accountIds)} AND tk.account_id = c.account_id AND tk.livemode = c.livemode AND tk.card_id = c.card_id
    WHERE ${inAccounts('c.account_id', accountIds)} AND ${REAUTH_WHERE} AND ${REAUTH_DUE} <= ${asOf} AND ${customerInScope(ctx, 'c', accountIds)} AND NOT ${liveClaimSql('c', accountIds, ctx.clock.now())}
      -- Implied by the line above (lead ≤ 720 h); lets the planner use the hold-due index.
      AND c.expired_at <= ${new Date(asOf.getTime() + MAX_LEAD_MS)}
    ORDER BY 8, 1, 2, 3 LIMIT ${limit}
    FOR UPDATE OF c SKIP LOCKED`.execute(trx);
  const rows = due.rows;
  if (rows.length === 0) return { selected: 0, reauthorized: 0, failed: 0 };
  const reauthIds = rows.map(() => ctx.ids.next('reauthorization'));
  const results = await ctx.processor.authorize(
    rows.map((r, i) => ({
      reference: reauthIds[i]!,
      fingerprint: r.fingerprint,
      expMonth: r.exp_month,
      expYear: r.exp_year,
      amount: r.amount,
      currency: 'jpy' as const,
      livemode: r.l,
      // The attempt happens at its own due instant, never at the slot.
      at: new Date(Number(r.due)),
      kind: 'reauth' as const,
    })),
  );
  const attempts = rows.map((r, i): ReauthAttempt => {
    const result = results[i]!;
    const at = new Date(Number(r.due));
    const expiresAt = result.approved
      ? v1HoldExpiresAt({ authorizedAt: at, expiryDays: r.expiry_days ?? V1_EXPIRY_DAYS.default, issuer: r.issuer === 'overseas' ? 'overseas' : 'domestic' }).expiresAt
      : null;
    return {
      accountId: r.a,
      livemode: r.l,
      reauthId: reauthIds[i]!,
      chargeId: r.id,
      amount: r.amount,
      ok: result.approved,
      failureCode: result.approved ? null : result.code,
      failureMessage: result.approved ? null : result.message,
      code: result.approved ? result.authorizationCode : null,
      previousExpiredAt: new Date(Number(r.expired)),
      expiresAt,
      at,
    };
  });
  const x = REAUTH_COLUMNS.table('r', attempts);
  // The unique index (one scheduled attempt per charge and hold) is the last line of defence: an
  // attempt it refuses is not applied to the charge either.
  const inserted = await sql<{ reauth_id: string }>`
    INSERT INTO reauthorizations (account_id, livemode, reauth_id, charge_id, scheduled, amount, outcome, failure_code, failure_message,
                                  authorization_code, previous_expired_at, expired_at, attempted_at)
    SELECT ${x.cols('a', 'l', 'rid', 'id')}, true, ${x.col('amt')}, CASE WHEN ${x.col('ok')} THEN 'succeeded' ELSE 'failed' END,
           ${x.cols('fc', 'fm', 'code', 'prev', 'exp', 'at')}
    FROM ${x.from}
    ON CONFLICT (account_id, livemode, charge_id, previous_expired_at) WHERE scheduled DO NOTHING
    RETURNING reauth_id`.execute(trx);
  const applied = new Set(inserted.rows.map((r) => r.reauth_id));
  const kept = attempts.filter((attempt) => applied.has(attempt.reauthId));
  // A refused attempt's hold was authorized under its own reference and belongs to no row: give
  // it back, or the card keeps a hold (a debit, the money) that nothing records.
  const orphans = attempts.filter((attempt) => !applied.has(attempt.reauthId) && attempt.ok);
  if (orphans.length > 0) {
    await ctx.processor.release(orphans.map((attempt) => ({ reference: attempt.reauthId, authorizationCode: attempt.code ?? '', amount: attempt.amount, at: attempt.at })));
  }
  // The hold's one scheduled attempt is on record already: mark it tried so the next batch does not
  // select it again (the job takes batches until none is left).
  const refused = attempts.filter((attempt) => !applied.has(attempt.reauthId));
  if (refused.length > 0) {
    const k = ROW_KEYS.table('r', refused.map((attempt) => ({ accountId: attempt.accountId, livemode: attempt.livemode, id: attempt.chargeId })));
    await sql`
      UPDATE charges c SET reauth_tried_expired_at = c.expired_at
      FROM ${k.from}
      WHERE ${inAccounts('c.account_id', accountIds)} AND c.account_id = ${k.col('a')} AND c.livemode = ${k.col('l')} AND c.charge_id = ${k.col('id')}`.execute(trx);
  }
  const r = REAUTH_COLUMNS.table('r', kept);
  await sql`
    UPDATE charges c SET
      reauth_count = c.reauth_count + 1, reauth_tried_expired_at = c.expired_at,
      expired_at = CASE WHEN ${r.col('ok')} THEN ${r.col('exp')} ELSE c.expired_at END,
      authorized_at = CASE WHEN ${r.col('ok')} THEN ${r.col('at')} ELSE c.authorized_at END,
      authorization_code = CASE WHEN ${r.col('ok')} THEN ${r.col('code')} ELSE c.authorization_code END,
      updated_at = ${r.col('at')}
    FROM ${r.from}
    WHERE ${inAccounts('c.account_id', accountIds)} AND c.account_id = ${r.col('a')} AND c.livemode = ${r.col('l')} AND c.charge_id = ${r.col('id')}`.execute(trx);
  await recordChargeEvents(
    trx,
    ctx.ids,
    kept.map((attempt) => ({ accountId: attempt.accountId, livemode: attempt.livemode, chargeId: attempt.chargeId, type: 'charge.updated', at: attempt.at })),
  );
  const reauthorized = kept.filter((attempt) => attempt.ok).length;
  return { selected: rows.length, reauthorized, failed: kept.length - reauthorized };
}

export async function nextReauthDueAt(db: Kysely<Database>, after: Date, scope: JobScope = LIVE_BOOK): Promise<Date | null> {
  const row = await sql<{ due: Date | null }>`SELECT min(${REAUTH_DUE}) AS due FROM ${reauthFrom()} WHERE ${REAUTH_WHERE} AND ${REAUTH_DUE} > ${after} AND ${customerInScope(scope, 'c')}`.execute(db);
  return row.rows[0]?.due ?? null;
}

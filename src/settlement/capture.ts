/**
 * Settlement's hooks on the money-moving paths (contract between the charge/hold code and the
 * settlement code). Every path that captures a charge or writes a refund row calls these in the
 * same transaction, once per batch, after its rows are written:
 * - `settleCaptured`: fills the settlement fields of freshly captured charges (fee, platform fee
 *   split, `term_id` of the term containing `captured_at`, opening that term if needed), and the
 *   instant a dispute card's issuer disputes the capture (`dispute_due_at`, src/disputes).
 * - `settleRefunds`: fills the fee offsets and `term_id` of freshly written refund rows.
 * Both are set-based (one or a few statements per batch) and idempotent: only rows whose `term_id`
 * is still null are settled, and they are locked while it happens.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema';
import { captureBreakdown, chargePlatformFee, refundBreakdown, type PlatformSplit, type RefundBreakdown } from '../domain/fees';
import { shareOf } from '../domain/money';
import type { TermCycle } from '../domain/terms';
import type { Context } from '../engine/context';
import { openTermIdsOpening } from './terms';
import { bookOf } from '../test-clocks/clock-scope';
import type { EventRecorder } from '../events/outbox';
import { bulkColumns, ROW_KEYS } from '../db/bulk-rows';
import { accountsOf, inAccounts } from '../db/account-scope';
import { chargeCardFingerprint, disputeDueAt } from '../disputes/disputes';

export interface ChargeKey {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly chargeId: string;
}

export interface RefundKey {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly refundId: string;
}

interface UnsettledCharge {
  account_id: string;
  livemode: boolean;
  charge_id: string;
  amount: number;
  amount_captured: number;
  captured_at: Date;
  fee_rate: string;
  tenant_id: string | null;
  platform_fee: number | null;
  platform_fee_rate: string | null;
  payjp_fee_included: boolean | null;
  /** The card's fingerprint (chargeCardFingerprint), for the dispute cards of the simulated network. */
  fingerprint: string | null;
}

/**
 * The platform fee of a capture. A fee derived from the tenant's rate is recomputed on the captured
 * amount (floor, like at creation); a given `platform_fee` is scaled down in proportion when less
 * than the authorized amount is captured, floor(platform_fee × captured / amount) (Decision: the
 * fee was agreed for the whole amount, and the released part was never paid).
 */
export function capturedPlatformFee(row: Pick<UnsettledCharge, 'amount' | 'amount_captured' | 'platform_fee' | 'platform_fee_rate' | 'payjp_fee_included'>): number {
  if (row.platform_fee === null) return 0;
  if (row.platform_fee_rate !== null) {
    return chargePlatformFee(row.amount_captured, { platformFeeRate: row.platform_fee_rate, payjpFeeIncluded: row.payjp_fee_included ?? false }).totalPlatformFee;
  }
  if (row.amount_captured === row.amount) return row.platform_fee;
  return shareOf(row.platform_fee, row.amount_captured, row.amount, 'floor');
}


/** A capture about to be written (or just written): what its settlement columns are computed from. */
export interface NewCapture {
  readonly accountId: string;
  readonly livemode: boolean;
  /** The authorized `amount` (a given platform fee was agreed on it). */
  readonly amount: number;
  readonly amountCaptured: number;
  readonly capturedAt: Date;
  readonly feeRate: string;
  readonly tenantId: string | null;
  /** The platform fee stored at creation (of `amount`); null without a tenant. */
  readonly platformFee: number | null;
  readonly platformFeeRate: string | null;
  readonly payjpFeeIncluded: boolean | null;
}

/** The settlement columns of a captured charge. */
export interface CaptureSettlement {
  readonly fee: number;
  readonly platform_fee: number | null;
  readonly total_platform_fee: number;
  readonly term_id: string;
}

/**
 * The settlement columns of captures, in input order, opening the terms they need. For code that
 * writes captured rows in bulk (chargeCards): putting these columns into its INSERT saves the
 * second row version that settleCaptured's UPDATE writes, and its index maintenance (figure in
 * docs/decisions/performance.md, "Measured figures moved out of comments"); settleCaptured then finds nothing
 * left to do.
 */
export async function settlementOfCaptures(
  trx: Kysely<Database>,
  /** testClock: the book the captures settle into (clock-scope.ts), the account's own without one. */
  ctx: Pick<Context, 'ids' | 'testClock'>,
  captures: readonly NewCapture[],
  /** The accounts' term cycles when the caller has read them (fixed at account creation); read here otherwise. */
  knownCycles?: ReadonlyMap<string, TermCycle>,
  /** Where the `term.created` events of terms opened here go (recordEvents at once by default). */
  record?: EventRecorder,
): Promise<CaptureSettlement[]> {
  if (captures.length === 0) return [];
  const accounts = [...new Set(captures.map((c) => c.accountId))];
  const cycles =
    knownCycles !== undefined && accounts.every((a) => knownCycles.has(a))
      ? knownCycles
      : new Map(
          (await trx.selectFrom('accounts').select(['account_id', 'term_cycle']).where('account_id', 'in', accounts).execute()).map((a) => [a.account_id, a.term_cycle as TermCycle]),
        );
  const wants = captures.map((c) => {
    const cycle = cycles.get(c.accountId);
    if (cycle === undefined) throw new Error(`no account ${c.accountId} for a capture`);
    return { accountId: c.accountId, livemode: c.livemode, cycle, at: c.capturedAt, testClockId: bookOf(ctx) };
  });
  const termIds = await openTermIdsOpening(trx, ctx.ids, wants, record);
  return captures.map((c, i) => ({ ...captureAmounts(c), term_id: termIds[i]! }));
}

/** The fee and platform-fee columns of a capture (settlementOfCaptures without the term). */
export function captureAmounts(c: NewCapture): Omit<CaptureSettlement, 'term_id'> {
  const platformFee = capturedPlatformFee({
    amount: c.amount,
    amount_captured: c.amountCaptured,
    platform_fee: c.platformFee,
    platform_fee_rate: c.platformFeeRate,
    payjp_fee_included: c.payjpFeeIncluded,
  });
  const platform: PlatformSplit | null = c.tenantId === null ? null : { platformFee, payjpFeeIncluded: c.payjpFeeIncluded ?? false };
  const split = captureBreakdown({ amount: c.amountCaptured, feeRate: c.feeRate, platform });
  const pf = c.tenantId === null ? null : split.platformFee;
  return { fee: split.fee, platform_fee: pf, total_platform_fee: pf ?? 0 };
}

export async function settleCaptured(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'clock'>, charges: readonly ChargeKey[]): Promise<void> {
  if (charges.length === 0) return;
  const k = ROW_KEYS.table('k', charges.map((c) => ({ accountId: c.accountId, livemode: c.livemode, id: c.chargeId })));
  const accountIds = accountsOf(charges, (c) => c.accountId);
  // No row lock here: the UPDATE below re-checks `term_id IS NULL` under its own lock, so two
  // concurrent settlements of one charge write it once (and would write the same values anyway).
  const due = await sql<UnsettledCharge>`
    SELECT c.account_id, c.livemode, c.charge_id, c.amount, c.amount_captured, c.captured_at, c.fee_rate, c.tenant_id, c.platform_fee,
           c.platform_fee_rate, c.payjp_fee_included, ${chargeCardFingerprint('c', accountIds)} AS fingerprint
    FROM ${k.from}
    JOIN charges c ON ${inAccounts('c.account_id', accountIds)} AND c.account_id = ${k.col('a')} AND c.livemode = ${k.col('l')} AND c.charge_id = ${k.col('id')}
    WHERE c.term_id IS NULL AND c.amount_captured IS NOT NULL AND c.captured_at IS NOT NULL
    ORDER BY c.account_id, c.livemode, c.charge_id`.execute(trx);
  if (due.rows.length === 0) return;
  const settled = await settlementOfCaptures(
    trx,
    ctx,
    due.rows.map((row) => ({
      accountId: row.account_id,
      livemode: row.livemode,
      amount: row.amount,
      amountCaptured: row.amount_captured,
      capturedAt: row.captured_at,
      feeRate: row.fee_rate,
      tenantId: row.tenant_id,
      platformFee: row.platform_fee,
      platformFeeRate: row.platform_fee_rate,
      payjpFeeIncluded: row.payjp_fee_included,
    })),
  );
  const u = SETTLED_CHARGE_COLUMNS.table(
    'u',
    due.rows.map((row, i) => ({ row, settled: settled[i]! })),
  );
  await sql`
    UPDATE charges c SET fee = ${u.col('fee')}, platform_fee = ${u.col('pf')}, total_platform_fee = coalesce(${u.col('pf')}, 0), term_id = ${u.col('t')},
      dispute_due_at = ${u.col('dd')}
    FROM ${u.from}
    WHERE ${inAccounts('c.account_id', accountIds)} AND c.account_id = ${u.col('a')} AND c.livemode = ${u.col('l')} AND c.charge_id = ${u.col('id')} AND c.term_id IS NULL`.execute(trx);
}

const SETTLED_CHARGE_COLUMNS = bulkColumns<{ readonly row: UnsettledCharge; readonly settled: CaptureSettlement }>()({
  a: ['text', (c) => c.row.account_id],
  l: ['boolean', (c) => c.row.livemode],
  id: ['text', (c) => c.row.charge_id],
  fee: ['bigint', (c) => c.settled.fee],
  pf: ['bigint', (c) => c.settled.platform_fee],
  t: ['text', (c) => c.settled.term_id],
  // A capture with a dispute card is disputed later: the disputes.open job opens it then.
  dd: ['instant', (c) => disputeDueAt(c.row.fingerprint, c.row.captured_at)],
});

interface UnsettledRefund {
  account_id: string;
  livemode: boolean;
  refund_id: string;
  charge_id: string;
  amount: number;
  created_at: Date;
  amount_captured: number;
  fee_rate: string;
  tenant_id: string | null;
  platform_fee: number | null;
  payjp_fee_included: boolean | null;
  term_cycle: TermCycle;
}

const SETTLED_REFUND_COLUMNS = bulkColumns<{ readonly row: UnsettledRefund; readonly split: RefundBreakdown; readonly termId: string }>()({
  a: ['text', (r) => r.row.account_id],
  l: ['boolean', (r) => r.row.livemode],
  id: ['text', (r) => r.row.refund_id],
  ten: ['text', (r) => r.row.tenant_id],
  inc: ['boolean', (r) => r.row.payjp_fee_included ?? false],
  rfo: ['bigint', (r) => r.split.refundFeeOffset],
  rpfo: ['bigint', (r) => r.split.refundPlatformFeeOffset],
  t: ['text', 'termId'],
});

export async function settleRefunds(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'clock' | 'testClock'>, refunds: readonly RefundKey[]): Promise<void> {
  if (refunds.length === 0) return;
  const k = ROW_KEYS.table('k', refunds.map((r) => ({ accountId: r.accountId, livemode: r.livemode, id: r.refundId })));
  const accountIds = accountsOf(refunds, (r) => r.accountId);
  // The refunded charges must be settled first: their fee and platform fee are what a refund offsets.
  const charges = await sql<{ account_id: string; livemode: boolean; charge_id: string }>`
    SELECT DISTINCT r.account_id, r.livemode, r.charge_id
    FROM ${k.from}
    JOIN refunds r ON ${inAccounts('r.account_id', accountIds)} AND r.account_id = ${k.col('a')} AND r.livemode = ${k.col('l')} AND r.refund_id = ${k.col('id')}
    WHERE r.term_id IS NULL`.execute(trx);
  await settleCaptured(
    trx,
    ctx,
    charges.rows.map((c) => ({ accountId: c.account_id, livemode: c.livemode, chargeId: c.charge_id })),
  );
  const due = await sql<UnsettledRefund>`
    SELECT r.account_id, r.livemode, r.refund_id, r.charge_id, r.amount, r.created_at, c.amount_captured, c.fee_rate, c.tenant_id,
           c.platform_fee, c.payjp_fee_included, a.term_cycle
    FROM ${k.from}
    JOIN refunds r ON ${inAccounts('r.account_id', accountIds)} AND r.account_id = ${k.col('a')} AND r.livemode = ${k.col('l')} AND r.refund_id = ${k.col('id')}
    JOIN charges c ON ${inAccounts('c.account_id', accountIds)} AND c.account_id = r.account_id AND c.livemode = r.livemode AND c.charge_id = r.charge_id
    JOIN accounts a ON ${inAccounts('a.account_id', accountIds)} AND a.account_id = r.account_id
    WHERE ${inAccounts('r.account_id', accountIds)} AND r.term_id IS NULL AND c.amount_captured IS NOT NULL
    ORDER BY r.account_id, r.livemode, r.refund_id
    FOR UPDATE OF r`.execute(trx);
  if (due.rows.length === 0) return;
  const wants = due.rows.map((row) => ({ accountId: row.account_id, livemode: row.livemode, cycle: row.term_cycle, at: row.created_at, testClockId: bookOf(ctx) }));
  const termIds = await openTermIdsOpening(trx, ctx.ids, wants);
  const u = SETTLED_REFUND_COLUMNS.table(
    'u',
    due.rows.map((row, i) => {
      const platform: PlatformSplit | null = row.tenant_id === null ? null : { platformFee: row.platform_fee ?? 0, payjpFeeIncluded: row.payjp_fee_included ?? false };
      const split = refundBreakdown({ amount: row.amount_captured, refunded: row.amount, feeRate: row.fee_rate, platform });
      return { row, split, termId: termIds[i]! };
    }),
  );
  await sql`
    UPDATE refunds r SET tenant_id = ${u.col('ten')}, payjp_fee_included = ${u.col('inc')}, refund_fee_offset = ${u.col('rfo')},
      refund_platform_fee_offset = ${u.col('rpfo')}, term_id = ${u.col('t')}
    FROM ${u.from}
    WHERE ${inAccounts('r.account_id', accountIds)} AND r.account_id = ${u.col('a')} AND r.livemode = ${u.col('l')} AND r.refund_id = ${u.col('id')}`.execute(trx);
}


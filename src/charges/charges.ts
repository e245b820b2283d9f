/**
 * Charging stored cards, one or thousands at a time: every charge a subscription makes (creation,
 * plan change, resume, renewal) goes through `chargeCards`, which authorizes the whole batch with
 * the card network in one call and writes the charge rows and their events with a handful of
 * statements. Must run inside the caller's transaction, so a charge exists exactly when the
 * subscription change that needed it does.
 */
import { sql, type Kysely, type Selectable } from 'kysely';
import type { ChargesTable, Database } from '../db/schema';
import type { ErrorCode } from '../domain/errors';
import { toUnixSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { heldEvents, recordEvents, type EventInput, type EventRecorder } from '../events/outbox';
import { accountsOf, joinAccounts } from '../db/account-scope';
import type { AuthorizationKind, AuthorizationRequest, AuthorizationResult } from '../processor/card-network';
import { renderCard, type CardObject, type CardRow } from '../customers/card-object';
import { DEFAULT_FEE_RATES } from '../accounts/accounts';
import { settlementOfCaptures, type CaptureSettlement } from '../settlement/capture';
import { disputeDueAt } from '../disputes/disputes';
import { bulkColumns, compositeKey, type BulkDocument, type ColumnsOf } from '../db/bulk-rows';

export type ChargeRow = Selectable<ChargesTable>;

/** The columns of a charge that the charge and hold code writes (000003–000005). */
export type ChargeFields = Pick<
  ChargeRow,
  | 'account_id' | 'livemode' | 'charge_id' | 'amount' | 'currency' | 'paid' | 'captured' | 'captured_at' | 'expired_at' | 'card_id' | 'customer_id'
  | 'subscription_id' | 'period_start' | 'description' | 'failure_code' | 'failure_message' | 'fee_rate' | 'refunded' | 'amount_refunded'
  | 'refund_reason' | 'three_d_secure_status' | 'metadata' | 'created_at' | 'updated_at' | 'amount_captured' | 'capture_requested' | 'expiry_days'
  | 'card_funding' | 'card_issuer' | 'authorization_code' | 'authorized_at' | 'tds_expires_at' | 'released_at' | 'reauth_count' | 'reauth_tried_expired_at'
>;

/**
 * A charge row as this module builds it in memory, before the database or settlement has filled
 * the columns others own (their defaults: null until the charge is settled). Read such columns
 * with `?? null` when rendering.
 */
export function chargeRow(fields: ChargeFields): ChargeRow {
  return fields as ChargeRow;
}

/** The card a charge is made on: the stored card's row (the charge embeds its object). */
export type ChargeCard = Pick<CardRow, 'card_id' | 'livemode' | 'created_at' | 'brand' | 'last4' | 'exp_month' | 'exp_year' | 'fingerprint' | 'name' | 'country' | 'cvc_check'> &
  Partial<Omit<CardRow, 'customer_id'>> & { readonly customer_id?: string | null };

export interface ChargeRequest {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly customerId: string | null;
  readonly card: ChargeCard;
  /** Integer yen, 50 or more for API-made charges; any positive amount for pro-rated ones. */
  readonly amount: number;
  /** The business instant of the charge: the renewal's due instant, not when the job ran. */
  readonly at: Date;
  readonly kind: Extract<AuthorizationKind, 'charge' | 'renewal'>;
  readonly subscriptionId?: string;
  /** With subscriptionId: the start of the period this charge pays for (the natural key). */
  readonly periodStart?: Date;
  /**
   * With periodStart: the paid charge that already holds this period start, when an operation
   * charges again at the instant that period began (a plan change right after the first charge or a
   * renewal). This charge then does not take the period's key (its row has no period start; its
   * instant is the same) and its network reference names the charge it follows.
   */
  readonly follows?: string;
  readonly description?: string | null;
}

export type ChargeOutcome =
  | { readonly status: 'succeeded'; readonly charge: ChargeObject; readonly row: ChargeRow }
  | { readonly status: 'failed'; readonly charge: ChargeObject; readonly row: ChargeRow; readonly code: ErrorCode; readonly message: string }
  /** A charge for this subscription and period already existed; nothing was written. */
  | { readonly status: 'duplicate' };

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type ChargeObject = {
  readonly id: string;
  readonly object: 'charge';
  readonly livemode: boolean;
  readonly created: number;
  readonly amount: number;
  readonly currency: string;
  readonly paid: boolean;
  readonly expired_at: number | null;
  readonly captured: boolean;
  readonly captured_at: number | null;
  /** Null only for the capture rows of v2 payment flows paid without a card (PayPay), which v1 never shows. */
  readonly card: CardObject | null;
  readonly customer: string | null;
  readonly description: string | null;
  readonly failure_code: string | null;
  readonly failure_message: string | null;
  readonly fee_rate: string;
  readonly refunded: boolean;
  readonly amount_refunded: number;
  readonly refund_reason: string | null;
  readonly subscription: string | null;
  readonly metadata: Readonly<Record<string, string>>;
  readonly platform_fee: number | null;
  readonly tenant: string | null;
  readonly platform_fee_rate: string | null;
  readonly total_platform_fee: number;
  readonly three_d_secure_status: string | null;
  readonly term_id: string | null;
};

/** The columns of a charge row that its v1 object shows (a reader of many charges selects just these). */
export const CHARGE_OBJECT_COLUMNS = [
  'charge_id', 'livemode', 'created_at', 'amount', 'currency', 'paid', 'expired_at', 'captured', 'captured_at', 'customer_id', 'description',
  'failure_code', 'failure_message', 'fee_rate', 'refunded', 'amount_refunded', 'refund_reason', 'subscription_id', 'metadata', 'platform_fee',
  'tenant_id', 'platform_fee_rate', 'total_platform_fee', 'three_d_secure_status', 'term_id',
] as const satisfies readonly (keyof ChargeRow)[];

export type ChargeObjectColumns = Pick<ChargeRow, (typeof CHARGE_OBJECT_COLUMNS)[number]>;

/**
 * One field of the v1 charge object: its name, how JS computes it from the row (and the card's
 * object), and the SQL expression that computes it from a `charges` row aliased `c` (the card's
 * object is given to chargeObjectSql). The one source of truth of the object: renderCharge,
 * chargeText (which prints renderCharge's object) and chargeObjectSql are derived from it, so a
 * field is added by one edit here.
 */
export interface ChargeField {
  readonly name: string;
  readonly js: (row: ChargeObjectColumns, card: ChargeCard | null) => unknown;
  /** SQL over alias `c`; `CARD` stands for the card's object. */
  readonly sql: string;
}

const secondsSql = (column: string): string => `floor(extract(epoch from ${column}))::bigint`;
const secondsOrNullSql = (column: string): string => `CASE WHEN ${column} IS NULL THEN NULL ELSE ${secondsSql(column)} END`;
/** The placeholder for the card's object in a field's SQL. */
export const CARD_SQL = 'CARD';

export const CHARGE_FIELDS: readonly ChargeField[] = [
  { name: 'id', js: (r) => r.charge_id, sql: 'c.charge_id' },
  { name: 'object', js: () => 'charge', sql: "'charge'" },
  { name: 'livemode', js: (r) => r.livemode, sql: 'c.livemode' },
  { name: 'created', js: (r) => toUnixSeconds(r.created_at), sql: secondsSql('c.created_at') },
  { name: 'amount', js: (r) => r.amount, sql: 'c.amount' },
  { name: 'currency', js: (r) => r.currency, sql: 'c.currency' },
  { name: 'paid', js: (r) => r.paid, sql: 'c.paid' },
  { name: 'expired_at', js: (r) => (r.expired_at === null ? null : toUnixSeconds(r.expired_at)), sql: secondsOrNullSql('c.expired_at') },
  { name: 'captured', js: (r) => r.captured, sql: 'c.captured' },
  { name: 'captured_at', js: (r) => (r.captured_at === null ? null : toUnixSeconds(r.captured_at)), sql: secondsOrNullSql('c.captured_at') },
  { name: 'card', js: (_r, card) => (card === null ? null : renderCard(card)), sql: CARD_SQL },
  { name: 'customer', js: (r) => r.customer_id, sql: 'c.customer_id' },
  { name: 'description', js: (r) => r.description, sql: 'c.description' },
  { name: 'failure_code', js: (r) => r.failure_code, sql: 'c.failure_code' },
  { name: 'failure_message', js: (r) => r.failure_message, sql: 'c.failure_message' },
  { name: 'fee_rate', js: (r) => r.fee_rate, sql: 'c.fee_rate::text' },
  { name: 'refunded', js: (r) => r.refunded, sql: 'c.refunded' },
  { name: 'amount_refunded', js: (r) => r.amount_refunded, sql: 'c.amount_refunded' },
  { name: 'refund_reason', js: (r) => r.refund_reason, sql: 'c.refund_reason' },
  { name: 'subscription', js: (r) => r.subscription_id, sql: 'c.subscription_id' },
  { name: 'metadata', js: (r) => r.metadata, sql: 'c.metadata' },
  { name: 'platform_fee', js: (r) => r.platform_fee, sql: 'c.platform_fee' },
  { name: 'tenant', js: (r) => r.tenant_id, sql: 'c.tenant_id' },
  { name: 'platform_fee_rate', js: (r) => r.platform_fee_rate, sql: 'c.platform_fee_rate::text' },
  { name: 'total_platform_fee', js: (r) => r.total_platform_fee, sql: 'c.total_platform_fee' },
  { name: 'three_d_secure_status', js: (r) => r.three_d_secure_status, sql: 'c.three_d_secure_status' },
  { name: 'term_id', js: (r) => r.term_id, sql: 'c.term_id' },
];

/** The renderer of a field list: the object, fields in the list's order. */
export function chargeRenderer(fields: readonly ChargeField[]): (row: ChargeObjectColumns, card: ChargeCard | null) => Record<string, unknown> {
  return (row, card) => {
    const object: Record<string, unknown> = {};
    for (const field of fields) object[field.name] = field.js(row, card);
    return object;
  };
}

/** The SQL json_build_object of a field list over a `charges` row `c`, the card's object given as SQL. */
export function chargeObjectSqlText(fields: readonly ChargeField[], cardSql: string): string {
  return `json_build_object(${fields.map((f) => `'${f.name}', ${f.sql === CARD_SQL ? cardSql : f.sql}`).join(', ')})`;
}

const renderChargeFields = chargeRenderer(CHARGE_FIELDS);

/** The v1 charge object (§2.2), from CHARGE_FIELDS. Platform and term fields are filled in by settlement. */
export function renderCharge(row: ChargeObjectColumns, card: ChargeCard | null): ChargeObject {
  return renderChargeFields(row, card) as ChargeObject;
}

const NO_CARD = '"card":null';

/**
 * The charge object as JSON.stringify(renderCharge(row, card)) prints it, given the card's object
 * already printed (JSON.stringify(renderCard(card))), for a reader printing many charges of few
 * cards (the simulation report): the charge is printed without its card, and the card's text put
 * in its place. The first `"card":null` is the field: inside a string its quotes would be
 * escaped, and no field before `card` is an object (metadata, which could hold such a key, comes
 * after).
 */
export function chargeText(row: ChargeObjectColumns, cardText: string | null): string {
  return chargeTextRenderer(renderChargeFields)(row, cardText);
}

/** chargeText for a renderer derived from a field list (chargeRenderer). */
export function chargeTextRenderer(
  render: (row: ChargeObjectColumns, card: ChargeCard | null) => Record<string, unknown>,
): (row: ChargeObjectColumns, cardText: string | null) => string {
  return (row, cardText) => {
    const text = JSON.stringify(render(row, null));
    if (cardText === null) return text;
    const at = text.indexOf(NO_CARD);
    if (at < 0) throw new Error(`charge ${row.charge_id} printed without a card field`);
    return `${text.slice(0, at)}"card":${cardText}${text.slice(at + NO_CARD.length)}`;
  };
}

/** The columns of a batch of charges' INSERT (insertPreparedCharges). */
const CHARGE_COLUMNS = bulkColumns<ChargeRow>()({
  a: ['text', 'account_id'],
  l: ['boolean', 'livemode'],
  c: ['text', 'charge_id'],
  amt: ['bigint', 'amount'],
  p: ['boolean', 'paid'],
  cap: ['instant', 'captured_at'],
  card: ['text', 'card_id'],
  cus: ['text', 'customer_id'],
  sub: ['text', 'subscription_id'],
  ps: ['instant', 'period_start'],
  d: ['text', 'description'],
  fc: ['text', 'failure_code'],
  fm: ['text', 'failure_message'],
  fr: ['numeric', 'fee_rate'],
  t: ['instant', 'created_at'],
  fee: ['bigint', 'fee'],
  tm: ['text', 'term_id'],
  dd: ['instant', 'dispute_due_at'],
});
type ChargeColumn = ColumnsOf<typeof CHARGE_COLUMNS>;

/** Fee rates of the given accounts by brand, in one query (a batch spans many accounts). */
async function feeRates(executor: Kysely<Database>, accountIds: readonly string[]): Promise<Map<string, string>> {
  const unique = [...new Set(accountIds)];
  const rows = await executor.selectFrom('account_fee_rates').select(['account_id', 'brand', 'fee_rate']).where('account_id', 'in', unique).execute();
  return new Map(rows.map((row) => [compositeKey(row.account_id, row.brand), row.fee_rate]));
}

/**
 * Authorizes and records a batch of charges, captured at once (subscription charges are never
 * held). Declined charges are recorded too (`paid` false, with the failure code), as the v1 API
 * shows them. Writes `charge.succeeded` / `charge.failed` events. Outcomes come back in request
 * order. A charge that would repeat an existing (subscription, period start) is not written: it
 * was authorized under that period's reference, which the network answers with the existing
 * authorization. The unique index is the last line of defence; callers lock the subscriptions they
 * bill so it should never fire.
 */
export async function chargeCards(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'processor' | 'clock'>, requests: readonly ChargeRequest[]): Promise<ChargeOutcome[]> {
  const prepared = await prepareCharges(trx, ctx, requests);
  const written = await insertPreparedCharges(trx, prepared);
  await voidUnwritten(ctx, prepared, written);
  const { outcomes, events } = chargeOutcomes(prepared, written);
  await recordEvents(trx, ctx.ids, events);
  return outcomes;
}

/**
 * chargeCards without writing events, for a caller that writes them in its own order in the same
 * transaction: the `term.created` events of terms the captures opened, with their ids (drawn
 * where chargeCards draws them), and the `charge.succeeded` / `charge.failed` events, one per
 * outcome that is not a duplicate, in outcome order, whose ids the caller draws next (before
 * anything else draws one, as chargeCards does).
 */
export async function chargeCardsUnrecorded(
  trx: Kysely<Database>,
  ctx: Pick<Context, 'ids' | 'processor' | 'clock'>,
  requests: readonly ChargeRequest[],
): Promise<{ outcomes: ChargeOutcome[]; events: EventInput[]; termEvents: { readonly event: EventInput; readonly id: string }[] }> {
  const terms = heldEvents(ctx.ids);
  const prepared = await prepareCharges(trx, ctx, requests, terms.record);
  const written = await insertPreparedCharges(trx, prepared);
  await voidUnwritten(ctx, prepared, written);
  return { ...chargeOutcomes(prepared, written), termEvents: terms.held };
}

/**
 * A batch of charges authorized and built, not yet written: chargeCards in steps, for a caller
 * that prepares what follows the INSERT while it runs (the renewal job).
 */
export interface PreparedCharges {
  readonly requests: readonly ChargeRequest[];
  readonly chargeIds: readonly string[];
  readonly references: readonly string[];
  readonly results: readonly AuthorizationResult[];
  readonly rows: readonly ChargeRow[];
  /** The rows as the INSERT's JSON document. */
  readonly payload: BulkDocument<ChargeColumn>;
}

/**
 * chargeCards' first step, in three: authorize (draw the ids, ask the network), read what the rows
 * depend on (fee rates, the settlement of the approved ones), build the rows (buildChargeRows, no I/O).
 */
export async function prepareCharges(
  trx: Kysely<Database>,
  ctx: Pick<Context, 'ids' | 'processor' | 'clock'>,
  requests: readonly ChargeRequest[],
  /** Where the events of terms the captures open go (written at once by default). */
  recordTerms?: EventRecorder,
): Promise<PreparedCharges> {
  if (requests.length === 0) return { requests, chargeIds: [], references: [], results: [], rows: [], payload: CHARGE_COLUMNS.document([]) };
  const { chargeIds, references, results } = await authorizeCharges(ctx, requests);
  const rates = await feeRates(trx, requests.map((r) => r.accountId));
  const feeRateOf = requests.map(
    (request) => rates.get(compositeKey(request.accountId, request.card.brand)) ?? DEFAULT_FEE_RATES[request.card.brand as keyof typeof DEFAULT_FEE_RATES] ?? '3.00',
  );
  // Settlement's columns (fee, term) are computed before the INSERT and written with the rows:
  // settling afterwards would write every row twice (an UPDATE of each new charge) and read it
  // back. These charges never have a tenant.
  const approvedAt = requests.flatMap((_, i) => (results[i]!.approved ? [i] : []));
  const settlements = await settlementOfCaptures(
    trx,
    ctx,
    approvedAt.map((i) => ({
      accountId: requests[i]!.accountId,
      livemode: requests[i]!.livemode,
      amount: requests[i]!.amount,
      amountCaptured: requests[i]!.amount,
      capturedAt: requests[i]!.at,
      feeRate: feeRateOf[i]!,
      tenantId: null,
      platformFee: null,
      platformFeeRate: null,
      payjpFeeIncluded: null,
    })),
    undefined,
    recordTerms,
  );
  const settlementOf = new Map(approvedAt.map((i, k) => [i, settlements[k]!]));
  const rows = buildChargeRows(requests, chargeIds, results, feeRateOf, settlementOf);
  return { requests, chargeIds, references, results, rows, payload: CHARGE_COLUMNS.document(rows) };
}

/**
 * Draws the charges' ids and authorizes them. The network's idempotency reference: for a
 * subscription charge the natural key (subscription, period start), so a batch rolled back and
 * retried asks again under the same reference and a real processor answers with the first
 * authorization instead of a second one. The card is part of it: a declined attempt retried with
 * another card is a new request.
 */
async function authorizeCharges(
  ctx: Pick<Context, 'ids' | 'processor'>,
  requests: readonly ChargeRequest[],
): Promise<{ chargeIds: string[]; references: string[]; results: readonly AuthorizationResult[] }> {
  const chargeIds = requests.map(() => ctx.ids.next('charge'));
  const authorizations = requests.map((request, i) => authorizationOf(request, chargeIds[i]!));
  const results = await ctx.processor.authorize(authorizations);
  return { chargeIds, references: authorizations.map((a) => a.reference), results };
}

/**
 * The authorization request of one charge. Its reference is the network's idempotency: for a
 * subscription charge (subscription, period start, card), else the charge id.
 */
export function authorizationOf(request: ChargeRequest, chargeId: string): AuthorizationRequest {
  return {
    reference: request.subscriptionId !== undefined && request.periodStart !== undefined ? subscriptionReference(request.subscriptionId, request.periodStart, request.card.card_id, request.follows) : chargeId,
    fingerprint: request.card.fingerprint,
    expMonth: request.card.exp_month,
    expYear: request.card.exp_year,
    amount: request.amount,
    currency: 'jpy',
    livemode: request.livemode,
    at: request.at,
    kind: request.kind,
  };
}

/** A subscription charge's network reference: (subscription, period start, card), and the charge it follows if any. */
function subscriptionReference(subscriptionId: string, periodStart: Date, cardId: string, follows: string | undefined): string {
  const reference = `${subscriptionId}@${periodStart.toISOString()}/${cardId}`;
  return follows === undefined ? reference : `${reference}/after/${follows}`;
}

/**
 * The charge rows of authorized requests (no I/O): paid and captured at the request's instant when
 * approved, with the failure when declined; the settlement's fee and term for the approved ones.
 */
export function buildChargeRows(
  requests: readonly ChargeRequest[],
  chargeIds: readonly string[],
  results: readonly AuthorizationResult[],
  feeRateOf: readonly string[],
  settlementOf: ReadonlyMap<number, Pick<CaptureSettlement, 'fee' | 'term_id'>>,
): ChargeRow[] {
  // Each row is built whole in one literal: adding the settlement's columns to a finished row with
  // a spread copied ~40 properties per charge and left objects that were slow to read afterwards.
  return requests.map((request, i): ChargeRow => {
    const result = results[i]!;
    const approved = result.approved;
    const settled = settlementOf.get(i);
    const row: ChargeFields & Pick<ChargeRow, 'tenant_id' | 'platform_fee' | 'platform_fee_rate' | 'payjp_fee_included' | 'fee' | 'total_platform_fee' | 'term_id' | 'dispute_due_at'> = {
      account_id: request.accountId,
      livemode: request.livemode,
      charge_id: chargeIds[i]!,
      amount: request.amount,
      currency: 'jpy',
      paid: approved,
      captured: approved,
      captured_at: approved ? request.at : null,
      expired_at: null,
      card_id: request.card.card_id,
      customer_id: request.customerId,
      subscription_id: request.subscriptionId ?? null,
      period_start: request.follows === undefined ? (request.periodStart ?? null) : null,
      description: request.description ?? null,
      failure_code: approved ? null : result.code,
      failure_message: approved ? null : result.message,
      fee_rate: feeRateOf[i]!,
      refunded: false,
      amount_refunded: 0,
      refund_reason: null,
      three_d_secure_status: null,
      amount_captured: approved ? request.amount : null,
      capture_requested: null,
      expiry_days: null,
      // Hold bookkeeping (000005) stays empty: these charges are captured at once, never held.
      card_funding: null,
      card_issuer: null,
      authorization_code: null,
      authorized_at: null,
      tds_expires_at: null,
      released_at: null,
      reauth_count: 0,
      reauth_tried_expired_at: null,
      metadata: {},
      created_at: request.at,
      updated_at: request.at,
      tenant_id: null,
      platform_fee: null,
      platform_fee_rate: null,
      payjp_fee_included: null,
      fee: settled?.fee ?? null,
      total_platform_fee: 0,
      term_id: settled?.term_id ?? null,
      // Settlement's too (capture.ts settleCaptured does it for the other capture paths).
      dispute_due_at: approved ? disputeDueAt(request.card.fingerprint, request.at) : null,
    };
    return row as ChargeRow;
  });
}

/**
 * Sends the INSERT of prepared charges; resolves to the ids of the charges written (a charge not
 * written repeats a stored paid charge of its subscription and period).
 */
export async function insertPreparedCharges(trx: Kysely<Database>, prepared: PreparedCharges): Promise<Set<string>> {
  if (prepared.rows.length === 0) return new Set();
  const x = CHARGE_COLUMNS.table('r', prepared.payload);
  const inserted = await sql<{ charge_id: string }>`
    INSERT INTO charges (account_id, livemode, charge_id, amount, currency, paid, captured, captured_at, amount_captured, card_id, customer_id,
                         subscription_id, period_start, description, failure_code, failure_message, fee_rate, created_at, updated_at,
                         fee, total_platform_fee, term_id, dispute_due_at)
    SELECT a.account_id, ${x.cols('l', 'c', 'amt')}, 'jpy', ${x.cols('p', 'p', 'cap')}, CASE WHEN ${x.col('p')} THEN ${x.col('amt')} END,
           ${x.cols('card', 'cus', 'sub', 'ps', 'd', 'fc', 'fm', 'fr', 't', 't', 'fee')}, 0, ${x.cols('tm', 'dd')}
    FROM ${x.from}
    ${joinAccounts('a', x.col('a'), accountsOf(prepared.rows, (row) => row.account_id))}
    ON CONFLICT (account_id, livemode, subscription_id, period_start) WHERE subscription_id IS NOT NULL AND period_start IS NOT NULL AND paid DO NOTHING
    RETURNING charge_id`.execute(trx);
  return new Set(inserted.rows.map((row) => row.charge_id));
}

/**
 * Voids the authorizations of prepared charges that were not written, where the network would not
 * answer a repeat with the stored charge's own (see chargeCards).
 */
export async function voidUnwritten(ctx: Pick<Context, 'processor'>, prepared: PreparedCharges, written: ReadonlySet<string>): Promise<void> {
  const { results, references, chargeIds } = prepared;
  const settledRows = prepared.rows;
  // A charge not written repeats an existing (subscription, period start): its authorization
  // went out under that period's reference, so the network answered with the existing charge's
  // authorization, which must stand. Only an authorization under a reference of its own is voided.
  const voided = settledRows.filter((row, i) => !written.has(row.charge_id) && results[i]!.approved && references[i] === row.charge_id);
  if (voided.length > 0) {
    await ctx.processor.release(
      voided.map((row) => {
        const result = results[chargeIds.indexOf(row.charge_id)]!;
        return { reference: references[chargeIds.indexOf(row.charge_id)]!, authorizationCode: result.approved ? result.authorizationCode : '', amount: row.amount, at: row.created_at };
      }),
    );
  }
}

/**
 * What became of each prepared charge, in request order, and the `charge.succeeded` /
 * `charge.failed` events of those written (to record with recordEvents): no I/O.
 */
export function chargeOutcomes(prepared: PreparedCharges, written: ReadonlySet<string>): { outcomes: ChargeOutcome[]; events: EventInput[] } {
  const { requests, results } = prepared;
  const settledRows = prepared.rows;
  const outcomes: ChargeOutcome[] = [];
  const events: EventInput[] = [];
  settledRows.forEach((row, i) => {
    if (!written.has(row.charge_id)) {
      outcomes.push({ status: 'duplicate' });
      return;
    }
    const charge = renderCharge(row, requests[i]!.card);
    const result = results[i]!;
    events.push({ accountId: row.account_id, livemode: row.livemode, type: result.approved ? 'charge.succeeded' : 'charge.failed', data: charge, at: row.created_at });
    outcomes.push(result.approved ? { status: 'succeeded', charge, row } : { status: 'failed', charge, row, code: result.code, message: result.message });
  });
  return { outcomes, events };
}

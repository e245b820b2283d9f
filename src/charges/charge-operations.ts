/**
 * v1 charges as operations (v1 §2.2, §3.1, §4.2, §4.3, §7, §8; service rules §2): create (captured
 * at once, held with `capture=false`, or pending 3-D Secure), retrieve, update, list, capture,
 * refund, reauth, tds_finish, and the buyer's 3-D Secure authentication step.
 *
 * The v1 codec (src/api/v1/charges.ts) checks the parameters and builds the typed commands these
 * functions carry out; they return charge records (row and card), which the codec renders.
 *
 * Every operation gets its parameters checked before it opens a transaction, locks the charge row, reads
 * the clock after the lock, and checks the charge's state before it writes, so a refused call
 * changes nothing. The one exception is a card the network declines: the failed charge (or the
 * failed reauthorization attempt) is kept, the transaction commits, and the 402 is thrown after it.
 * No row stays locked while the card network answers: the network is asked between two short
 * transactions, the charge claimed in the first (charge-claims.ts).
 */
import { sql, type InferResult, type Kysely } from 'kysely';
import { DEFAULT_FEE_RATES, type Caller } from '../accounts/accounts';
import type { CardRow } from '../customers/card-object';
import { assertCardNotFlagged, recordCardError } from '../customers/card-flags';
import { consumeToken } from '../customers/tokens';
import { finishedTokenThreeDSecure } from '../customers/token-three-d-secure';
import type { Database } from '../db/schema';
import { CARD_CAUSED_ERRORS } from '../domain/card-flags';
import { KessaiError, reject, type ErrorCode } from '../domain/errors';
import { holdLapsed, v1HoldExpiresAt, V1_EXPIRY_DAYS, type CardIssuer } from '../domain/hold-periods';
import { mergeMetadata, type MetadataFlavour } from '../domain/metadata';
import { REFUND_WINDOW_MS, THREE_D_SECURE_WINDOW_MS } from '../domain/limits';
import { termContaining, type TermCycle } from '../domain/terms';
import type { Context } from '../engine/context';
import { dropNetworkClaim } from '../engine/network-claims';
import { recordEvent } from '../events/outbox';
import type { AuthorizationRequest, AuthorizationResult } from '../processor/card-network';
import { inPage, type Page } from '../operations/pagination';
import { fixedStatement } from '../db/fixed-statement';
import { routedWhole } from '../db/citus-shape';
import { prepared } from '../db/prepared';
import { captureAmounts, settleCaptured, settleRefunds } from '../settlement/capture';
import { openTermIdsOpening } from '../settlement/terms';
import { bookOf } from '../test-clocks/clock-scope';
import { disputeDueAt, disputedAmounts } from '../disputes/disputes';
import { resolveChargeTenant } from '../tenants/charge-tenant';
import { chargeRow, type ChargeCard, type ChargeObject, type ChargeRow } from './charges';
import { callNetwork, chargeTurn, recordClaimed, takeClaim, type ChargeClaim } from './charge-claims';
import { createIntentFrom, createIntentValues, createIntentWritten, CreateIntentLost, type CreateIntentValues, undoCreateIntent, writeCreateIntent } from './create-intents';
import { chargeRecords, findCharge, findChargeObject, insertCreatedCharge, oneChargeRecord, renderChargeRecord, type ChargeRecord } from './charge-record';

export const CHARGES_URL = '/v1/charges';

export const CHARGE_CURRENCY = 'jpy';

type Declined<T> = { readonly done: T } | { readonly declined: KessaiError };

/** The result of a transaction that may have kept a declined attempt: thrown after the commit. */
function settled<T>(result: Declined<T>): T {
  if ('declined' in result) throw result.declined;
  return result.done;
}

function issuerOf(card: { readonly issuer?: string | null }): CardIssuer {
  return card.issuer === 'overseas' ? 'overseas' : 'domestic';
}

/** A 3-D Secure charge is pending from creation until it is finished or abandoned. */
function tdsPending(row: ChargeRow): boolean {
  return row.tds_expires_at !== null;
}

/** A hold has lapsed once released by the job, or once its `expired_at` has passed (whether or not the job has run). */
function lapsed(row: ChargeRow, at: Date): boolean {
  return row.released_at !== null || (row.expired_at !== null && holdLapsed(row.expired_at, at));
}

function assertNotPending(row: ChargeRow): void {
  if (tdsPending(row)) reject('three_d_secure_incompleted', 'id', `Charge ${row.charge_id} is waiting for 3-D Secure; finish it with tds_finish first.`);
}

function assertPaid(row: ChargeRow): void {
  if (!row.paid) {
    throw new KessaiError('failed_payment', { param: 'id', charge: row.charge_id, message: `Charge ${row.charge_id} has failed (${row.failure_code ?? 'not authorized'}).` });
  }
}

async function writeChanges(trx: Kysely<Database>, row: ChargeRow, changes: Partial<Omit<ChargeRow, 'metadata'>> & { metadata?: Readonly<Record<string, string>> }): Promise<ChargeRow> {
  const { metadata, ...rest } = changes;
  await trx
    .updateTable('charges')
    .set({ ...rest, ...(metadata === undefined ? {} : { metadata: JSON.stringify(metadata) }) })
    .where('account_id', '=', row.account_id)
    .where('livemode', '=', row.livemode)
    .where('charge_id', '=', row.charge_id)
    .execute();
  return { ...row, ...changes } as ChargeRow;
}

/**
 * The charge object as stored now, read back after the writes (and after settlement filled its
 * columns), so the response and the event show exactly the row.
 */
async function storedCharge(trx: Kysely<Database>, row: Pick<ChargeRow, 'account_id' | 'livemode' | 'charge_id'>): Promise<ChargeRecord> {
  return oneChargeRecord(trx, await findCharge(trx, { accountId: row.account_id, livemode: row.livemode, kind: 'secret' }, row.charge_id));
}

async function chargeEvent(trx: Kysely<Database>, ctx: Pick<Context, 'ids'>, row: ChargeRow, type: string, at: Date): Promise<ChargeRecord> {
  const charge = await storedCharge(trx, row);
  await recordEvent(trx, ctx.ids, { accountId: row.account_id, livemode: row.livemode, type, data: renderChargeRecord(charge), at });
  return charge;
}

const keyOf = (row: ChargeRow) => ({ accountId: row.account_id, livemode: row.livemode, chargeId: row.charge_id });

/** A create intent's request but for the card it names, which the read completes (createIntentFrom). */
type IntentRequest = Parameters<typeof createIntentValues>[1];

/** What the first step of charges.create reads: the card to charge, its fee rate, the account's term cycle. */
interface ResolvedCard {
  readonly card: ChargeCard & Pick<CardRow, 'funding' | 'issuer'>;
  readonly customerId: string | null;
  readonly feeRate: string;
  readonly termCycle: TermCycle;
  /**
   * The open term containing the instant of the read, when the read looked (a customer's card)
   * and found it: a capture at that instant settles into it without a term lookup of its own
   * (insertCreatedCharge checks it is still open). Null otherwise.
   */
  readonly openTermId: string | null;
}

/**
 * The card to charge: a token (`card` alone, consumed), or a customer's card (`customer`, with
 * `card` choosing a non-default one); with the fee rate of its brand and the account's term cycle
 * (fixed at creation, for settlement in the second step).
 */
async function resolveCard(trx: Kysely<Database>, caller: Caller, customerId: string | undefined, cardParam: string | undefined, at: Date, intent: IntentRequest | undefined): Promise<ResolvedCard> {
  if (customerId !== undefined) return resolveCustomerCard(trx, caller, customerId, cardParam, at, intent);
  const token = await consumeToken(trx, caller, cardParam!, 'card', at);
  const { feeRate, termCycle } = await accountRatesOf(trx, caller.accountId, token.brand);
  return { card: { ...token, customer_id: null }, customerId: null, feeRate, termCycle, openTermId: null };
}

/** What customerCardRead binds; the intent's values only when the statement writes the intent. */
type CustomerCardValues = { readonly accountId: string; readonly livemode: boolean; readonly customerId: string; readonly cardId: string | null; readonly at: Date } & Partial<CreateIntentValues>;

/** The read of resolveCustomerCard: the account, the customer, its card (by id, or its default), the card's fee rate and the latest term starting by `at`. */
function customerCardQuery(db: Kysely<Database>, byDefault: boolean, v: CustomerCardValues) {
  return db
    .selectFrom('accounts as a')
    .leftJoin('customers as cu', (join) => join.on('cu.account_id', '=', v.accountId).on('cu.livemode', '=', v.livemode).on('cu.customer_id', '=', v.customerId).on('cu.deleted_at', 'is', null))
    .leftJoin('cards as cd', (join) => {
      const mine = join.on('cd.account_id', '=', v.accountId).on('cd.livemode', '=', v.livemode).onRef('cd.customer_id', '=', 'cu.customer_id').on('cd.deleted_at', 'is', null);
      return byDefault ? mine.onRef('cd.card_id', '=', 'cu.default_card_id') : mine.on('cd.card_id', '=', v.cardId);
    })
    .leftJoin('account_fee_rates as f', (join) => join.on('f.account_id', '=', v.accountId).onRef('f.brand', '=', 'cd.brand'))
    .leftJoinLateral(
      // The account's own books only: a clock's customer finds none here, and the charge's term is
      // then found (or opened) in the clock's books by openTermIdsOpening.
      (eb) =>
        eb
          .selectFrom('terms')
          .select(['term_id', 'start_at', 'end_at', 'closed'])
          .where('account_id', '=', v.accountId)
          .where('livemode', '=', v.livemode)
          .where('test_clock_id', 'is', null)
          .where(sql<boolean>`cu.test_clock_id IS NULL`)
          .where('start_at', '<=', v.at)
          .orderBy('start_at', 'desc')
          .limit(1)
          .as('tm'),
      (join) => join.onTrue(),
    )
    .selectAll('cd')
    .select(['cu.customer_id as found_customer_id', 'cu.default_card_id as found_default_card_id', 'f.fee_rate as found_fee_rate', 'a.term_cycle as found_term_cycle'])
    .select(['tm.term_id as found_term_id', 'tm.start_at as found_term_start', 'tm.end_at as found_term_end', 'tm.closed as found_term_closed'])
    .where('a.account_id', '=', v.accountId);
}

/**
 * customerCardQuery, with the create intent's INSERT when `intent` (createIntentFrom). Every create
 * by customer runs it: built once per shape (fixedStatement) and prepared once per connection.
 */
const customerCardRead = fixedStatement((db, shape: { readonly byDefault: boolean; readonly intent: boolean }, v: CustomerCardValues) => {
  const read = customerCardQuery(db, shape.byDefault, v);
  if (!shape.intent) return read.modifyFront(prepared('charges.create.customer_card')).compile();
  return sql<InferResult<typeof read>[number]>`${prepared('charges.create.customer_card_intent')}
    WITH r AS (${read}), i AS (${createIntentFrom('r', v as CustomerCardValues & CreateIntentValues)}) SELECT * FROM r`.compile(db);
});

/**
 * A customer's card, in one statement: the customer (not deleted), the card (`cardParam` or the
 * default, the customer's and not deleted: findCard's rules), its brand's fee rate and the
 * account's term cycle, and the account's latest term starting by `at` (openTermId); refused in
 * findCustomer's and requireCustomerCard's order and terms. With `intent`, the same statement
 * writes the create intent of that card (createIntentFrom) when there is one to charge.
 */
async function resolveCustomerCard(executor: Kysely<Database>, caller: Caller, customerId: string, cardParam: string | undefined, at: Date, intent: IntentRequest | undefined): Promise<ResolvedCard> {
  const { accountId, livemode } = caller;
  const values = { accountId, livemode, customerId, cardId: cardParam ?? null, at, ...(intent === undefined ? {} : createIntentValues(caller, intent, at)) };
  const found = (await customerCardRead(executor, { byDefault: cardParam === undefined, intent: intent !== undefined }, values)).rows[0];
  if (found === undefined) throw new Error(`no account ${accountId}`);
  const { found_customer_id, found_default_card_id, found_fee_rate, found_term_cycle, found_term_id, found_term_start, found_term_end, found_term_closed, ...card } = found;
  if (found_customer_id === null) return reject('invalid_id', 'customer', `No such customer: ${customerId}`);
  if (cardParam === undefined && found_default_card_id === null) return reject('missing_card', 'customer', `Customer ${customerId} has no default card.`);
  const cardId = cardParam ?? found_default_card_id!;
  if (card.card_id === null) return reject('dont_has_this_card', cardParam === undefined ? 'customer' : 'card', `Customer ${customerId} does not have card ${cardId}.`);
  const row = card as CardRow;
  // The term openTermIdsOpening would settle a capture at `at` into without opening one: the one
  // containing `at`, open.
  const containing = found_term_id !== null && found_term_closed === false && found_term_start!.getTime() === termContaining(found_term_cycle, at).start.getTime() && found_term_end! > at;
  return { card: row, customerId, feeRate: feeRateOr(found_fee_rate, row.brand), termCycle: found_term_cycle, openTermId: containing ? found_term_id : null };
}

/** `charges.create`, checked by the codec: the card is a token (`card` alone) or a customer's (`customer`, `card` choosing another of its cards). */
export interface CreateChargeCommand {
  readonly amount: number;
  readonly currency: typeof CHARGE_CURRENCY;
  readonly card: string | undefined;
  readonly customer: string | undefined;
  readonly description: string | null;
  readonly capture: boolean;
  readonly expiryDays: number | undefined;
  readonly threeDSecure: boolean;
  readonly metadata: Readonly<Record<string, string>>;
  /** Platform mode (v1 §4.2): checked against the tenant inside the transaction (resolveChargeTenant). */
  readonly tenant: string | undefined;
  readonly platformFee: number | undefined;
}

/**
 * `charges.create` (v1 §4.2):
 * - default: authorized and captured at once, `charge.succeeded`;
 * - `capture=false`: a hold until `expired_at` from the hold table (service rules §2.1);
 * - `three_d_secure=true`: pending (`paid` false, `unverified`), finished by `tds_finish` within 30 minutes.
 * A declined card keeps the failed charge (`charge.failed`) and answers 402 naming it.
 * Returns the charge object PostgreSQL built for its event (insertCreatedCharge), the object a
 * retrieve answers; nothing is rendered here.
 */
export async function createCharge(ctx: Context, caller: Caller, command: CreateChargeCommand): Promise<ChargeObject> {
  const { amount, currency, card: cardParam, customer: customerParam, description, capture, expiryDays, threeDSecure, metadata } = command;
  // Three steps, so that no row stays locked while the network answers (charge-claims.ts): the
  // card resolved (a token consumed) and the charge prepared in one short transaction; the
  // authorization with no transaction open; the charge written with its outcome in a second one.
  // The new charge is nobody else's until it is written, so it needs no claim.
  // `intentInRead`: the card's read writes the create intent too (resolveCustomerCard), for a
  // customer's card when nothing after the read can refuse.
  const prepare = async (trx: Kysely<Database>, intentInRead: boolean) => {
    const now = ctx.clock.now();
    const chargeId = ctx.ids.next('charge');
    const requested = { reference: chargeId, amount, currency: 'jpy', livemode: caller.livemode, at: now, kind: capture ? 'charge' : 'hold' } as const;
    const { card, customerId, feeRate, termCycle, openTermId } = await resolveCard(trx, caller, customerParam, cardParam, now, intentInRead ? requested : undefined);
    // A token that finished 3-D Secure (tokens.tds_finish) authorizes as authenticated.
    const tokenThreeDSecure = customerId === null ? await finishedTokenThreeDSecure(trx, caller, cardParam!) : undefined;
    const platform = await resolveChargeTenant(trx, caller, { tenant: command.tenant, platformFee: command.platformFee, amount });
    const base = {
      account_id: caller.accountId,
      livemode: caller.livemode,
      charge_id: chargeId,
      amount,
      currency,
      card_id: card.card_id,
      customer_id: customerId,
      subscription_id: null,
      period_start: null,
      description,
      fee_rate: feeRate,
      ...platform,
      refunded: false,
      amount_refunded: 0,
      refund_reason: null,
      metadata,
      created_at: now,
      updated_at: now,
      capture_requested: capture,
      expiry_days: capture ? null : (expiryDays ?? V1_EXPIRY_DAYS.default),
      card_funding: card.funding,
      card_issuer: card.issuer,
      released_at: null,
      reauth_count: 0,
      reauth_tried_expired_at: null,
    } as const;
    if (threeDSecure) {
      // v1 §3.1: "paid=false, captured=false, captured_at=null, expired_at=null, three_d_secure_status=unverified
      // … values are forced regardless of other parameters".
      const row = chargeRow({
        ...base,
        paid: false,
        captured: false,
        captured_at: null,
        expired_at: null,
        amount_captured: null,
        failure_code: null,
        failure_message: null,
        three_d_secure_status: 'unverified',
        authorization_code: null,
        authorized_at: null,
        tds_expires_at: new Date(now.getTime() + THREE_D_SECURE_WINDOW_MS),
      });
      await insertCharge(trx, row);
      return { kind: 'pending' as const, charge: renderChargeRecord(await storedCharge(trx, row)) };
    }
    // The create intent (create-intents.ts) commits with the token's use: a process that dies
    // at the network leaves what undoes it.
    const request: AuthorizationRequest = { ...requested, fingerprint: card.fingerprint, expMonth: card.exp_month, expYear: card.exp_year, ...(tokenThreeDSecure ? { threeDSecure: tokenThreeDSecure } : {}) };
    const intent = intentInRead ? createIntentWritten(caller, request, now) : await writeCreateIntent(trx, caller, request, customerId === null ? cardParam! : null, now);
    return { kind: 'authorize' as const, base, card, tokenThreeDSecure, termCycle, openTermId, now, intent };
  };
  // A customer's card without a tenant or 3-D Secure is one read (resolveCustomerCard) and the
  // intent's one INSERT: it needs no BEGIN and COMMIT. Consuming a token, locking a tenant or
  // writing a pending charge does. Without a platform fee either (refused without a tenant,
  // after the read), the read writes the intent: one statement. Not on Citus (routedWhole,
  // src/db/citus-shape.ts): there the INSERT is a statement of its own, not a common table
  // expression of the read, which Citus copies to every worker node and commits in two phases
  // (docs/decisions/citus.md, "One-phase commits").
  const reads = customerParam !== undefined && command.tenant === undefined && !threeDSecure;
  const prepared = reads ? await prepare(ctx.db, command.platformFee === undefined && !routedWhole(ctx.db)) : await ctx.db.transaction().execute((trx) => prepare(trx, false));
  if (prepared.kind === 'pending') return prepared.charge;
  const { base, card, tokenThreeDSecure, termCycle, openTermId, now, intent } = prepared;
  const chargeId = base.charge_id;
  let authorization: AuthorizationResult | undefined;
  let result: Declined<ChargeObject>;
  try {
    // card_flagged (src/domain/card-flags.ts): a card locked out after repeated refusals is not
    // sent to the network again; the intent is undone below, so the token stays unused.
    await assertCardNotFlagged(ctx.db, caller, card.fingerprint, now);
    [authorization] = await ctx.processor.authorize([intent.request]);
    const approval = authorization!;
    const approved = approval.approved;
    const row = chargeRow({
      ...base,
      paid: approved,
      captured: approved && capture,
      captured_at: approved && capture ? now : null,
      expired_at: approved && !capture ? v1HoldExpiresAt({ authorizedAt: now, expiryDays: base.expiry_days ?? undefined, issuer: issuerOf(card) }).expiresAt : null,
      amount_captured: approved && capture ? amount : null,
      failure_code: approval.approved ? null : approval.code,
      failure_message: approval.approved ? null : approval.message,
      three_d_secure_status: tokenThreeDSecure ?? null,
      authorization_code: approval.approved ? approval.authorizationCode : null,
      authorized_at: approved ? now : null,
      tds_expires_at: null,
    });
    const type = approved ? 'charge.succeeded' : 'charge.failed';
    // Settled in the INSERT (settleCaptured's values, computed from the row in hand), the intent
    // dropped and the event written by the same statement, the answer the object it built for the
    // event. One statement, no transaction, when the charge needs no term or the first step
    // found its term open; else, or when a guard failed (the term closed meanwhile, or the
    // intent was taken over), in a transaction that finds or opens the term and tells which.
    let stored = row.captured && openTermId === null ? undefined : await insertCreatedCharge(ctx.db, ctx.ids, row.captured ? settledNewCharge(row, card.fingerprint, openTermId!) : row, type, intent);
    // Nothing written and no term to blame: the intent was taken over.
    if (stored === undefined && !row.captured) throw new CreateIntentLost(chargeId);
    stored ??= await ctx.db.transaction().execute(async (trx) => {
      const [termId] = await openTermIdsOpening(trx, ctx.ids, [{ accountId: row.account_id, livemode: row.livemode, cycle: termCycle, at: row.captured_at!, testClockId: bookOf(ctx) }]);
      const written = await insertCreatedCharge(trx, ctx.ids, settledNewCharge(row, card.fingerprint, termId!), type, intent);
      // The term is this transaction's (read FOR SHARE): only the intent can have failed.
      if (written === undefined) throw new CreateIntentLost(chargeId);
      return written;
    });
    result = approval.approved ? { done: stored } : { declined: new KessaiError(approval.code, { charge: chargeId, message: approval.message }) };
  } catch (error) {
    // The intent lapsed and was taken over (this call outlived its lease): the taker undoes it.
    if (error instanceof CreateIntentLost) throw new KessaiError('payjp_wrong', { message: `Charge ${chargeId} took too long at the card network and was cancelled; nothing was charged. Create it again.`, cause: error });
    // A fault after the first transaction (the network's, or the second transaction's): the
    // intent undone, so that the failed call leaves nothing behind (the token given back, an
    // approval released).
    await undoCreateIntent(ctx, intent, authorization);
    throw error;
  }
  // The issuer's refusal of the card counts towards its lockout (committed on its own, after the failed charge).
  if (authorization !== undefined && !authorization.approved && CARD_CAUSED_ERRORS.has(authorization.code)) await recordCardError(ctx.db, caller, card.fingerprint, now);
  return settled(result);
}

/**
 * A charge captured at creation with settleCaptured's columns filled (fee, platform fee, term,
 * dispute instant), computed as settleCaptured computes them for the stored row, so that the
 * INSERT writes the settled row once. `fingerprint`: the card's (chargeCardFingerprint of a v1
 * charge, which has no payment flow); `termId`: the open term containing its capture.
 */
function settledNewCharge(row: ChargeRow, fingerprint: string, termId: string): ChargeRow {
  const capturedAt = row.captured_at!;
  const amounts = captureAmounts({
    accountId: row.account_id,
    livemode: row.livemode,
    amount: row.amount,
    amountCaptured: row.amount_captured!,
    capturedAt,
    feeRate: row.fee_rate,
    tenantId: row.tenant_id,
    platformFee: row.platform_fee,
    platformFeeRate: row.platform_fee_rate,
    payjpFeeIncluded: row.payjp_fee_included,
  });
  return { ...row, ...amounts, term_id: termId, dispute_due_at: disputeDueAt(fingerprint, capturedAt) };
}

/** The account's fee rate of a brand (its own, else the default) and its term cycle, in one statement. */
async function accountRatesOf(trx: Kysely<Database>, accountId: string, brand: string): Promise<{ feeRate: string; termCycle: TermCycle }> {
  const row = await trx
    .selectFrom('accounts as a')
    .leftJoin('account_fee_rates as f', (join) => join.on('f.account_id', '=', accountId).on('f.brand', '=', brand))
    .select(['a.term_cycle', 'f.fee_rate'])
    .where('a.account_id', '=', accountId)
    .executeTakeFirst();
  if (row === undefined) throw new Error(`no account ${accountId}`);
  return { feeRate: feeRateOr(row.fee_rate, brand), termCycle: row.term_cycle };
}

/** The account's own fee rate of a brand when it has one, else the default. */
function feeRateOr(own: string | null, brand: string): string {
  return own ?? DEFAULT_FEE_RATES[brand as keyof typeof DEFAULT_FEE_RATES] ?? '3.00';
}

async function insertCharge(trx: Kysely<Database>, row: ChargeRow): Promise<void> {
  const { metadata, ...rest } = row;
  const fields = Object.fromEntries(Object.entries(rest).filter(([, value]) => value !== undefined));
  await trx
    .insertInto('charges')
    .values({ ...(fields as Omit<ChargeRow, 'metadata'>), metadata: JSON.stringify(metadata) })
    .execute();
}

/** `charges.retrieve`: the v1 object, rendered by PostgreSQL (findChargeObject). */
export async function retrieveCharge(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<ChargeObject> {
  return findChargeObject(ctx.db, caller, command.id);
}

/** `charges.update`: `description` (null clears it) and `metadata` (merged under `flavour`'s rules, after the charge is found). */
export interface UpdateChargeCommand {
  readonly id: string;
  readonly description: string | null | undefined;
  readonly metadata: { readonly update: unknown; readonly flavour: MetadataFlavour } | undefined;
}

/** `charges.update` (v1 §4.2); `charge.updated`. */
export async function updateCharge(ctx: Context, caller: Caller, command: UpdateChargeCommand): Promise<ChargeRecord> {
  const { description } = command;
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findCharge(trx, caller, command.id, true);
    const now = ctx.clock.now();
    const metadata = command.metadata === undefined ? current.metadata : (mergeMetadata(current.metadata, command.metadata.update, command.metadata.flavour) as Record<string, string>);
    const row = await writeChanges(trx, current, { ...(description === undefined ? {} : { description }), metadata, updated_at: now });
    return chargeEvent(trx, ctx, row, 'charge.updated', now);
  });
}

/** `charges.list`: a page, optionally of one customer's or one subscription's charges. */
export interface ListChargesCommand {
  readonly page: Page;
  readonly customer: string | undefined;
  readonly subscription: string | undefined;
}

/**
 * `charges.list`: pagination (v1 §4.1) plus `customer` and `subscription` (the filters of the real
 * service that kessai has; v1 §4.2 leaves them "not shown"), newest first.
 */
export async function listCharges(ctx: Context, caller: Caller, command: ListChargesCommand): Promise<ChargeRecord[]> {
  const { page, customer, subscription } = command;
  const rows = await ctx.db
    .selectFrom('charges')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    // The captures of v2 payment flows are charge rows for settlement, not v1 charges.
    .where('payment_flow_id', 'is', null)
    .$if(customer !== undefined, (q) => q.where('customer_id', '=', customer!))
    .$if(subscription !== undefined, (q) => q.where('subscription_id', '=', subscription!))
    .$call(inPage(page, 'charge_id'))
    .execute();
  return chargeRecords(ctx.db, rows);
}

/**
 * `charges.capture` (v1 §3.1): an authorized, uncaptured charge whose hold has not lapsed. A
 * smaller `amount` captures that much and puts the difference in `amount_refunded`; above the
 * hold is `capture_amount_gt_net`; after `expired_at` it is `charge_expired` (service rules §2).
 */
export async function captureCharge(ctx: Context, caller: Caller, command: { readonly id: string; readonly amount: number | undefined }): Promise<ChargeRecord> {
  const { id: chargeId, amount: requested } = command;
  const { claim, current, amount } = await chargeTurn(ctx, caller, chargeId, async (trx, current, now) => {
    assertNotPending(current);
    assertPaid(current);
    if (current.captured) reject('already_captured', 'id', `Charge ${chargeId} is already captured.`);
    if (current.refunded) reject('cant_capture_refunded_charge', 'id', `Charge ${chargeId} was refunded; it cannot be captured.`);
    if (lapsed(current, now)) reject('charge_expired', 'id', `The authorization of charge ${chargeId} lapsed at ${current.expired_at?.toISOString() ?? 'its expiry'}.`);
    const amount = requested ?? current.amount;
    if (amount > current.amount) reject('capture_amount_gt_net', 'amount', `amount ${amount} is above the held ${current.amount} yen`);
    return { claim: await takeClaim(trx, current, 'charges.capture', now), current, amount };
  });
  const now = claim.claimedAt;
  const [result] = await callNetwork(ctx, claim, () => ctx.processor.capture([{ reference: current.charge_id, authorizationCode: current.authorization_code ?? '', amount, at: now }]));
  if (!result!.ok) {
    await dropNetworkClaim(ctx.db, claim);
    throw new KessaiError(result!.code, { charge: chargeId, message: result!.message });
  }
  return recordClaimed(ctx, caller, claim, async (trx, latest) => {
    const row = await writeChanges(trx, latest, { captured: true, captured_at: now, amount_captured: amount, amount_refunded: latest.amount - amount, updated_at: now });
    await settleCaptured(trx, ctx, [keyOf(row)]);
    return chargeEvent(trx, ctx, row, 'charge.captured', now);
  }, storedCharge);
}

/**
 * `charges.refund` (v1 §3.1, §4.2): within 180 days of creation. A captured charge is refunded in
 * full (default) or in part, one `refunds` row per refund. An uncaptured charge is cancelled whole:
 * the hold is released, `refunded` and `amount_refunded` show it, and no `refunds` row is written
 * (no captured money moves back).
 */
export interface RefundChargeCommand {
  readonly id: string;
  readonly amount: number | undefined;
  /** As sent: an empty reason keeps the stored one. */
  readonly reason: string | undefined;
}

export async function refundCharge(ctx: Context, caller: Caller, command: RefundChargeCommand): Promise<ChargeRecord> {
  const { id: chargeId, amount: requested, reason } = command;
  const turn = await chargeTurn(ctx, caller, chargeId, async (trx, current, now): Promise<{ readonly done: ChargeRecord } | { readonly cancel: ChargeClaim; readonly held: ChargeRow; readonly refundReason: string | null }> => {
    assertNotPending(current);
    assertPaid(current);
    const net = current.amount - current.amount_refunded;
    if (current.refunded || net <= 0) reject('already_refunded', 'id', `Charge ${chargeId} is already refunded.`);
    // A dispute took back all that was left (src/disputes): the buyer has the money already.
    if ((await disputedAmounts(trx, current.account_id, current.livemode, [current.charge_id])).has(current.charge_id)) {
      reject('already_refunded', 'id', `Charge ${chargeId} is disputed: its amount went back to the buyer by chargeback.`);
    }
    if (now.getTime() > current.created_at.getTime() + REFUND_WINDOW_MS) reject('refund_limit_exceeded', 'id', `Charge ${chargeId} is more than 180 days old.`);
    const refundReason = reason === undefined || reason === '' ? current.refund_reason : reason;
    if (!current.captured) {
      // v1 §3.1: "an uncaptured charge can only be cancelled whole".
      if (requested !== undefined && requested !== current.amount) {
        reject('invalid_amount_to_not_captured', 'amount', `Charge ${chargeId} is not captured; it can only be refunded whole (${current.amount} yen).`);
      }
      // The hold is given back through the network after this transaction (cancelHold).
      return { cancel: await takeClaim(trx, current, 'charges.refund', now), held: current, refundReason };
    }
    // A captured charge's refund moves no money through the network here: done in this transaction.
    const amount = requested ?? net;
    if (amount > net) reject('refund_amount_gt_net', 'amount', `amount ${amount} is above the ${net} yen left to refund`);
    const amountRefunded = current.amount_refunded + amount;
    const row = await writeChanges(trx, current, { refunded: amountRefunded === current.amount, amount_refunded: amountRefunded, refund_reason: refundReason, updated_at: now });
    const refundId = ctx.ids.next('refund');
    await trx
      .insertInto('refunds')
      .values({ account_id: row.account_id, livemode: row.livemode, refund_id: refundId, charge_id: row.charge_id, amount, reason: reason === undefined || reason === '' ? null : reason, created_at: now })
      .execute();
    await settleRefunds(trx, ctx, [{ accountId: row.account_id, livemode: row.livemode, refundId }]);
    return { done: await chargeEvent(trx, ctx, row, 'charge.refunded', now) };
  });
  if ('done' in turn) return turn.done;
  return cancelHold(ctx, caller, turn.cancel, turn.held, turn.refundReason);
}

/** An uncaptured charge refunded whole: the hold released through the network (unless the expiry job did), then `charge.refunded`. */
async function cancelHold(ctx: Context, caller: Caller, claim: ChargeClaim, held: ChargeRow, refundReason: string | null): Promise<ChargeRecord> {
  const now = claim.claimedAt;
  if (held.released_at === null) {
    await callNetwork(ctx, claim, () => ctx.processor.release([{ reference: held.charge_id, authorizationCode: held.authorization_code ?? '', amount: held.amount, at: now }]));
  }
  return recordClaimed(ctx, caller, claim, async (trx, current) => {
    const row = await writeChanges(trx, current, { refunded: true, amount_refunded: current.amount, refund_reason: refundReason, updated_at: now });
    return chargeEvent(trx, ctx, row, 'charge.refunded', now);
  }, storedCharge);
}

/**
 * `charges.reauth` (v1 §3.1, §4.2; service rules §2): a new hold on an uncaptured charge, with
 * `expired_at` from the hold table at the reauth instant; the earlier hold is not cancelled.
 * Refused for refunded charges. Every attempt is a `reauthorizations` row; a declined attempt is
 * kept and answered with 402, the charge unchanged.
 */
export async function reauthCharge(ctx: Context, caller: Caller, command: { readonly id: string; readonly expiryDays: number | undefined }): Promise<ChargeRecord> {
  const { id: chargeId, expiryDays } = command;
  const { claim, current, request, reauthId } = await chargeTurn(ctx, caller, chargeId, async (trx, current, now) => {
    assertNotPending(current);
    assertPaid(current);
    if (current.refunded) reject('cant_reauth_refunded_charge', 'id', `Charge ${chargeId} was refunded; it cannot be reauthorized.`);
    if (current.captured) reject('already_captured', 'id', `Charge ${chargeId} is captured; only uncaptured charges can be reauthorized.`);
    const { card } = await oneChargeRecord(trx, current);
    // The attempt's id is drawn before the network is asked: it is the authorization's reference,
    // and the request is the claim's recovery point (a taker of a lapsed claim releases it).
    const reauthId = ctx.ids.next('reauthorization');
    const request: AuthorizationRequest = { reference: reauthId, fingerprint: card.fingerprint, expMonth: card.exp_month, expYear: card.exp_year, amount: current.amount, currency: 'jpy', livemode: caller.livemode, at: now, kind: 'reauth' };
    return { claim: await takeClaim(trx, current, 'charges.reauth', now, [request]), current, request, reauthId };
  });
  const now = claim.claimedAt;
  const [authorization] = await callNetwork(ctx, claim, () => ctx.processor.authorize([request]));
  const days = expiryDays ?? V1_EXPIRY_DAYS.default;
  const expiresAt = authorization!.approved ? v1HoldExpiresAt({ authorizedAt: now, expiryDays: days, issuer: issuerOf({ issuer: current.card_issuer }) }).expiresAt : null;
  const result = await recordClaimed(
    ctx,
    caller,
    claim,
    async (trx, latest): Promise<Declined<ChargeRecord>> => {
      await trx
        .insertInto('reauthorizations')
        .values({
          account_id: latest.account_id,
          livemode: latest.livemode,
          reauth_id: reauthId,
          charge_id: latest.charge_id,
          scheduled: false,
          amount: latest.amount,
          outcome: authorization!.approved ? 'succeeded' : 'failed',
          failure_code: authorization!.approved ? null : authorization!.code,
          failure_message: authorization!.approved ? null : authorization!.message,
          authorization_code: authorization!.approved ? authorization!.authorizationCode : null,
          previous_expired_at: latest.expired_at,
          expired_at: expiresAt,
          attempted_at: now,
        })
        .execute();
      if (!authorization!.approved) return { declined: new KessaiError(authorization!.code, { charge: chargeId, message: authorization!.message }) };
      const row = await writeChanges(trx, latest, { expired_at: expiresAt, authorized_at: now, authorization_code: authorization!.authorizationCode, expiry_days: days, released_at: null, updated_at: now });
      return { done: await chargeEvent(trx, ctx, row, 'charge.updated', now) };
    },
    async (trx, latest) => ({ done: await storedCharge(trx, latest) }),
  );
  return settled(result);
}

/** Why tds_finish or the authentication step refuses a charge that is not waiting for 3-D Secure. */
function notPendingError(row: ChargeRow): never {
  if (row.three_d_secure_status === null) return reject('not_in_three_d_secure_flow', 'id', `Charge ${row.charge_id} was not created with three_d_secure.`);
  if (row.failure_code === 'three_d_secure_expired') return reject('three_d_secure_expired', 'id', `The 3-D Secure window of charge ${row.charge_id} has passed; create the charge again.`);
  return reject('invalid_three_d_secure_state', 'id', `Charge ${row.charge_id} has already been through tds_finish.`);
}

function assertWithinWindow(row: ChargeRow, now: Date): void {
  if (now.getTime() > row.tds_expires_at!.getTime()) reject('three_d_secure_expired', 'id', `The 3-D Secure window of charge ${row.charge_id} has passed; create the charge again.`);
}

/**
 * The buyer's 3-D Secure authentication (v1 §4.3 step 2), as the client library would run it:
 * the issuer's answer becomes `three_d_secure_status` (`verified`, `attempted`, `failed`, `error`).
 * Allowed once, within the 30-minute window.
 */
export async function authenticateCharge(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<ChargeRecord> {
  const chargeId = command.id;
  const { claim, card } = await chargeTurn(ctx, caller, chargeId, async (trx, current, now) => {
    if (!tdsPending(current)) notPendingError(current);
    assertWithinWindow(current, now);
    if (current.three_d_secure_status !== 'unverified') reject('invalid_three_d_secure_state', 'id', `Charge ${chargeId} has already been authenticated (${current.three_d_secure_status}).`);
    const { card } = await oneChargeRecord(trx, current);
    return { claim: await takeClaim(trx, current, 'charges.tds_authenticate', now), card };
  });
  const now = claim.claimedAt;
  const [outcome] = await callNetwork(ctx, claim, () => ctx.processor.authenticate([{ reference: chargeId, fingerprint: card.fingerprint, livemode: caller.livemode, at: now }]));
  return recordClaimed(ctx, caller, claim, async (trx, latest) => storedCharge(trx, await writeChanges(trx, latest, { three_d_secure_status: outcome!.status, updated_at: now })), storedCharge);
}

const TDS_FINISH_REFUSALS: Readonly<Record<string, ErrorCode>> = { unverified: 'three_d_secure_incompleted', failed: 'three_d_secure_failed', error: 'three_d_secure_failed' };

/**
 * `charges.tds_finish` (v1 §3.1, §4.3): only from `verified` or `attempted`, within 30 minutes of
 * creation; then processed like a normal create with the `capture` and `expiry_days` asked for at
 * creation, every instant counted from this request. A declined card keeps the failed charge and
 * answers 402.
 */
export async function finishThreeDSecure(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<ChargeRecord> {
  const chargeId = command.id;
  const { claim, current, card, status } = await chargeTurn(ctx, caller, chargeId, async (trx, current, now) => {
    if (!tdsPending(current)) notPendingError(current);
    assertWithinWindow(current, now);
    const status = current.three_d_secure_status ?? 'unverified';
    if (status !== 'verified' && status !== 'attempted') {
      return reject(TDS_FINISH_REFUSALS[status] ?? 'invalid_three_d_secure_state', 'id', `3-D Secure of charge ${chargeId} is ${status}; tds_finish needs verified or attempted.`);
    }
    const { card } = await oneChargeRecord(trx, current);
    return { claim: await takeClaim(trx, current, 'charges.tds_finish', now), current, card, status: status as 'verified' | 'attempted' };
  });
  const now = claim.claimedAt;
  const capture = current.capture_requested ?? true;
  const [authorization] = await callNetwork(ctx, claim, () =>
    ctx.processor.authorize([
      {
        reference: chargeId,
        fingerprint: card.fingerprint,
        expMonth: card.exp_month,
        expYear: card.exp_year,
        amount: current.amount,
        currency: 'jpy',
        livemode: caller.livemode,
        at: now,
        kind: capture ? 'charge' : 'hold',
        threeDSecure: status,
      },
    ]),
  );
  const approved = authorization!.approved;
  const result = await recordClaimed(
    ctx,
    caller,
    claim,
    async (trx, latest): Promise<Declined<ChargeRecord>> => {
      const row = await writeChanges(trx, latest, {
        paid: approved,
        captured: approved && capture,
        captured_at: approved && capture ? now : null,
        amount_captured: approved && capture ? latest.amount : null,
        expired_at: approved && !capture ? v1HoldExpiresAt({ authorizedAt: now, expiryDays: latest.expiry_days ?? undefined, issuer: issuerOf({ issuer: latest.card_issuer }) }).expiresAt : null,
        failure_code: authorization!.approved ? null : authorization!.code,
        failure_message: authorization!.approved ? null : authorization!.message,
        authorization_code: authorization!.approved ? authorization!.authorizationCode : null,
        authorized_at: approved ? now : null,
        tds_expires_at: null,
        updated_at: now,
      });
      if (row.captured) await settleCaptured(trx, ctx, [keyOf(row)]);
      const charge = await chargeEvent(trx, ctx, row, approved ? 'charge.succeeded' : 'charge.failed', now);
      if (!authorization!.approved) return { declined: new KessaiError(authorization!.code, { charge: chargeId, message: authorization!.message }) };
      return { done: charge };
    },
    async (trx, latest) => ({ done: await storedCharge(trx, latest) }),
  );
  return settled(result);
}

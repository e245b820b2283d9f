/**
 * 3-D Secure requests (`tdsr_`; the `payjp` SDK's `three_d_secure_requests.create|retrieve|list`,
 * official-sdks.md §4): 3-D Secure of a card stored on a customer (`resource_id` = `car_…`), apart
 * from any charge. States (docs/decisions/api-conventions.md, "v1 routes: …"):
 *
 *   created ──start──▶ in_progress ──authenticate──▶ result_received ──▶ finished
 *
 * `start` (the buyer opens the issuer's page) and `authenticate` (the issuer answers) are the
 * buyer's steps, run by the simulated card network as `charges.tds_authenticate` is; for a card
 * the request finishes as soon as the result is received (the SDK has no finish call for
 * requests), so `authenticate` records both. `three_d_secure_status` goes from `unverified` to the
 * network's answer (`verified`, `attempted`, `failed`, `error`, v1 §3.1). A request not finished
 * within the 30-minute window of charges (service rules §2) can no longer proceed
 * (`three_d_secure_expired`) and shows `expired_at`. Each change writes its event
 * (`three_d_secure_request.created`, `three_d_secure_request.updated`) in the same transaction;
 * a finished request's status becomes the card's `three_d_secure_status` (`customer.card.updated`).
 */
import type { Kysely, Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { renderCard } from '../customers/card-object';
import type { Database, ThreeDSecureRequestsTable } from '../db/schema';
import { reject } from '../domain/errors';
import { THREE_D_SECURE_WINDOW_MS } from '../domain/limits';
import { toUnixSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import { inPage, type Page } from '../operations/pagination';
import { findTenant } from '../tenants/tenants';

export const THREE_D_SECURE_REQUESTS_URL = '/v1/three_d_secure_requests';

export type ThreeDSecureRequestRow = Selectable<ThreeDSecureRequestsTable>;

export type ThreeDSecureRequestObject = {
  readonly id: string;
  readonly object: 'three_d_secure_request';
  readonly livemode: boolean;
  readonly created: number;
  readonly resource_id: string;
  readonly tenant_id: string | null;
  readonly state: string;
  readonly three_d_secure_status: string;
  readonly started_at: number | null;
  readonly result_received_at: number | null;
  readonly finished_at: number | null;
  /** When the request lapsed unfinished; null while it can proceed or once finished. */
  readonly expired_at: number | null;
};

/** A request as of an instant: its row and whether it has lapsed by then. */
export interface ThreeDSecureRequestView {
  readonly row: ThreeDSecureRequestRow;
  readonly asOf: Date;
}

const unix = (at: Date | null): number | null => (at === null ? null : toUnixSeconds(at));

function lapsed(row: ThreeDSecureRequestRow, asOf: Date): boolean {
  return row.finished_at === null && asOf.getTime() > row.expires_at.getTime();
}

export function renderThreeDSecureRequest({ row, asOf }: ThreeDSecureRequestView): ThreeDSecureRequestObject {
  return {
    id: row.request_id,
    object: 'three_d_secure_request',
    livemode: row.livemode,
    created: toUnixSeconds(row.created_at),
    resource_id: row.resource_id,
    tenant_id: row.tenant_id,
    state: row.state,
    three_d_secure_status: row.three_d_secure_status,
    started_at: unix(row.started_at),
    result_received_at: unix(row.result_received_at),
    finished_at: unix(row.finished_at),
    expired_at: lapsed(row, asOf) ? toUnixSeconds(row.expires_at) : null,
  };
}

export interface CreateThreeDSecureRequestCommand {
  readonly resourceId: string;
  readonly tenantId: string | undefined;
}

export interface ListThreeDSecureRequestsCommand {
  readonly page: Page;
  readonly resourceId: string | undefined;
  readonly tenantId: string | undefined;
}

export interface ThreeDSecureRequestCommand {
  readonly id: string;
}

/**
 * `three_d_secure_requests.create`: the card must be stored on a customer of the caller and not
 * deleted (`not_customer_card` on `resource_id`); `tenant_id`, when given, a live tenant.
 */
export async function createThreeDSecureRequest(ctx: Context, caller: Caller, command: CreateThreeDSecureRequestCommand): Promise<ThreeDSecureRequestView> {
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const card = await trx
      .selectFrom('cards')
      .select('card_id')
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('card_id', '=', command.resourceId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    if (!card) reject('not_customer_card', 'resource_id', `${command.resourceId} is not a card stored on a customer (or it was deleted).`);
    if (command.tenantId !== undefined) await findTenant(trx, caller, command.tenantId, 'tenant_id');
    const row = await trx
      .insertInto('three_d_secure_requests')
      .values({
        account_id: caller.accountId,
        livemode: caller.livemode,
        request_id: ctx.ids.next('threeDSecureRequest'),
        resource_id: command.resourceId,
        tenant_id: command.tenantId ?? null,
        state: 'created',
        three_d_secure_status: 'unverified',
        created_at: now,
        updated_at: now,
        started_at: null,
        result_received_at: null,
        finished_at: null,
        expires_at: new Date(now.getTime() + THREE_D_SECURE_WINDOW_MS),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    const view = { row, asOf: now };
    await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'three_d_secure_request.created', data: renderThreeDSecureRequest(view), at: now });
    return view;
  });
}

async function findRequest(executor: Kysely<Database>, caller: Caller, requestId: string, lock = false): Promise<ThreeDSecureRequestRow> {
  const row = await executor
    .selectFrom('three_d_secure_requests')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('request_id', '=', requestId)
    .$if(lock, (q) => q.forUpdate())
    .executeTakeFirst();
  if (!row) return reject('invalid_id', 'id', `No such three_d_secure_request: ${requestId}`);
  return row;
}

export async function retrieveThreeDSecureRequest(ctx: Context, caller: Caller, command: ThreeDSecureRequestCommand): Promise<ThreeDSecureRequestView> {
  return { row: await findRequest(ctx.db, caller, command.id), asOf: ctx.clock.now() };
}

/** Newest first, filtered by `resource_id` and `tenant_id`. */
export async function listThreeDSecureRequests(ctx: Context, caller: Caller, command: ListThreeDSecureRequestsCommand): Promise<ThreeDSecureRequestView[]> {
  const rows = await ctx.db
    .selectFrom('three_d_secure_requests')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(command.resourceId !== undefined, (q) => q.where('resource_id', '=', command.resourceId!))
    .$if(command.tenantId !== undefined, (q) => q.where('tenant_id', '=', command.tenantId!))
    .$call(inPage(command.page, 'request_id'))
    .execute();
  const asOf = ctx.clock.now();
  return rows.map((row) => ({ row, asOf }));
}

/** Refuses a step the request cannot take now: lapsed, or not in one of the `from` states. */
function checkStep(row: ThreeDSecureRequestRow, from: readonly string[], now: Date): void {
  if (lapsed(row, now)) reject('three_d_secure_expired', 'id', `The 3-D Secure window of ${row.request_id} has passed; create a new request.`);
  if (!from.includes(row.state)) reject('invalid_three_d_secure_state', 'id', `${row.request_id} is ${row.state}; this step needs ${from.join(' or ')}.`);
}

/**
 * One of the buyer's steps. The change is worked out first, without locks (it may ask the card
 * network); then, under the row lock, the step is checked again and written with its event, so
 * of two racing steps one is written and the other refused.
 */
async function advance(
  ctx: Context,
  caller: Caller,
  requestId: string,
  from: readonly string[],
  change: (row: ThreeDSecureRequestRow, now: Date) => Promise<Partial<ThreeDSecureRequestRow>>,
  /** What else the step writes, in the same transaction, once the request row is written. */
  alsoWrite?: (trx: Kysely<Database>, row: ThreeDSecureRequestRow, now: Date) => Promise<void>,
): Promise<ThreeDSecureRequestView> {
  const now = ctx.clock.now();
  const seen = await findRequest(ctx.db, caller, requestId);
  checkStep(seen, from, now);
  const changes = await change(seen, now);
  return ctx.db.transaction().execute(async (trx) => {
    checkStep(await findRequest(trx, caller, requestId, true), from, now);
    const row = await trx
      .updateTable('three_d_secure_requests')
      .set({ ...changes, updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('request_id', '=', requestId)
      .returningAll()
      .executeTakeFirstOrThrow();
    await alsoWrite?.(trx, row, now);
    const view = { row, asOf: now };
    await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'three_d_secure_request.updated', data: renderThreeDSecureRequest(view), at: now });
    return view;
  });
}

/** The buyer opens the issuer's authentication page: `created` → `in_progress`. */
export async function startThreeDSecureRequest(ctx: Context, caller: Caller, command: ThreeDSecureRequestCommand): Promise<ThreeDSecureRequestView> {
  return advance(ctx, caller, command.id, ['created'], async (_row, now) => ({ state: 'in_progress', started_at: now }));
}

/**
 * The issuer answers (`in_progress` → `result_received` → `finished` at once for a card): the
 * card network's outcome becomes `three_d_secure_status`.
 */
export async function authenticateThreeDSecureRequest(ctx: Context, caller: Caller, command: ThreeDSecureRequestCommand): Promise<ThreeDSecureRequestView> {
  return advance(ctx, caller, command.id, ['in_progress'], async (row, now) => {
    const card = await ctx.db
      .selectFrom('cards')
      .select('fingerprint')
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('card_id', '=', row.resource_id)
      .executeTakeFirstOrThrow();
    const [outcome] = await ctx.processor.authenticate([{ reference: row.request_id, fingerprint: card.fingerprint, livemode: caller.livemode, at: now }]);
    return { state: 'finished', three_d_secure_status: outcome!.status, result_received_at: now, finished_at: now };
  }, recordCardStatus(ctx, caller));
}

/** The finished request's status becomes the card's `three_d_secure_status` (`customer.card.updated`). */
function recordCardStatus(ctx: Pick<Context, 'ids'>, caller: Caller) {
  return async (trx: Kysely<Database>, request: ThreeDSecureRequestRow, now: Date): Promise<void> => {
    const card = await trx
      .updateTable('cards')
      .set({ three_d_secure_status: request.three_d_secure_status, updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('card_id', '=', request.resource_id)
      .where('deleted_at', 'is', null)
      .returningAll()
      .executeTakeFirst();
    // A card deleted while the buyer authenticated keeps its state; the request still finishes.
    if (card) await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'customer.card.updated', data: renderCard(card), at: now });
  };
}

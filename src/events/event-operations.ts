/**
 * Events as operations: v1 (v1 §6) `events.retrieve` and `events.list` with the filters the SDKs
 * send (`resource_id`, `object`, `type`) and v1 pagination; v2 (v2 §4.7) `v2.events.retrieve` and
 * `v2.events.list` with the same filters and cursors. Only the caller's account and mode, and only
 * the version's own events: another account's event is the same 404 as none.
 */
import type { Caller } from '../accounts/accounts';
import { reject } from '../domain/errors';
import type { Context } from '../engine/context';
import { defineOperation } from '../operations/define';
import { inPage, listObject, PAGINATION_PARAMS, readPage } from '../operations/pagination';
import { optionalString, readParams, requireString, type Params } from '../operations/params';
import { inV2Page, readV2Page, V2_PAGINATION_PARAMS, v2ListObject } from '../operations/v2-pagination';
import { renderEvent, storedEvent, type ApiVersion } from './outbox';

const EVENTS_URL = '/v1/events';
const V2_EVENTS_URL = '/v2/events';

function ownEvents(ctx: Context, caller: Caller, version: ApiVersion) {
  return ctx.db
    .selectFrom('events')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('api_version', '=', version);
}

async function findEvent(ctx: Context, caller: Caller, version: ApiVersion, id: string, param: string) {
  const row = await ownEvents(ctx, caller, version).where('event_id', '=', id).executeTakeFirst();
  if (!row) return reject('invalid_id', param, `No such event: ${id}`);
  return row;
}

/** The filters both versions take (`resource_id`, `object`, `type`). */
function filtered(ctx: Context, caller: Caller, version: ApiVersion, params: Params) {
  const resourceId = optionalString(params, 'resource_id');
  const objectType = optionalString(params, 'object');
  const type = optionalString(params, 'type');
  return ownEvents(ctx, caller, version)
    .$if(resourceId !== undefined, (q) => q.where('resource_id', '=', resourceId!))
    .$if(objectType !== undefined, (q) => q.where('object_type', '=', objectType!))
    .$if(type !== undefined, (q) => q.where('type', '=', type!));
}

const EVENT_FILTERS = ['resource_id', 'object', 'type'] as const;

async function retrieveEvent(ctx: Context, caller: Caller, input: unknown): Promise<object> {
  const id = requireString(readParams(input, ['id']), 'id');
  return renderEvent(storedEvent(await findEvent(ctx, caller, 'v1', id, 'id')));
}

async function listEventsOperation(ctx: Context, caller: Caller, input: unknown): Promise<object> {
  const params = readParams(input, [...PAGINATION_PARAMS, ...EVENT_FILTERS]);
  const page = readPage(params);
  const rows = await filtered(ctx, caller, 'v1', params).$call(inPage(page, 'event_id')).execute();
  return listObject(rows.map((row) => renderEvent(storedEvent(row))), page, EVENTS_URL);
}

/** `v2.events.retrieve` (`GET /v2/events/{event_id}`, v2 §4.7): a v2 event with `pending_webhooks`. */
async function retrieveV2Event(ctx: Context, caller: Caller, input: unknown): Promise<object> {
  const id = requireString(readParams(input, ['id']), 'id');
  return renderEvent(storedEvent(await findEvent(ctx, caller, 'v2', id, 'id')));
}

/** `v2.events.list`: v2 events newest first, cursors (an event id), the filters of v1. */
async function listV2Events(ctx: Context, caller: Caller, input: unknown): Promise<object> {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, ...EVENT_FILTERS]);
  const page = readV2Page(params);
  const cursor = page.cursor === undefined ? undefined : await findEvent(ctx, caller, 'v2', page.cursor.id, page.cursor.param);
  const rows = await filtered(ctx, caller, 'v2', params)
    // Events of one instant in the order they were written (seq), not by their random ids.
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.seq }, 'seq'))
    .execute();
  return v2ListObject(rows, page, V2_EVENTS_URL, (row) => renderEvent(storedEvent(row)));
}

export const EVENT_OPERATIONS = [
  defineOperation('events.retrieve', retrieveEvent),
  defineOperation('events.list', listEventsOperation),
  defineOperation('v2.events.retrieve', retrieveV2Event),
  defineOperation('v2.events.list', listV2Events),
] as const;

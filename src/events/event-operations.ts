/**
 * v1 events (v1 §6) as operations: `events.retrieve` and `events.list` with the filters the SDKs
 * send (`resource_id`, `object`, `type`) and v1 pagination. Only the caller's account and mode, and
 * only v1 events (the v2 API shows its own): another account's event is the same 404 as none.
 */
import type { Caller } from '../accounts/accounts';
import { reject } from '../domain/errors';
import type { Context } from '../engine/context';
import { defineOperation } from '../operations/define';
import { inPage, listObject, PAGINATION_PARAMS, readPage } from '../operations/pagination';
import { optionalString, readParams, requireString } from '../operations/params';
import { renderEvent, storedEvent } from './outbox';

const EVENTS_URL = '/v1/events';

function ownEvents(ctx: Context, caller: Caller) {
  return ctx.db
    .selectFrom('events')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('api_version', '=', 'v1');
}

async function retrieveEvent(ctx: Context, caller: Caller, input: unknown): Promise<object> {
  const id = requireString(readParams(input, ['id']), 'id');
  const row = await ownEvents(ctx, caller).where('event_id', '=', id).executeTakeFirst();
  if (!row) return reject('invalid_id', 'id', `No such event: ${id}`);
  return renderEvent(storedEvent(row));
}

async function listEventsOperation(ctx: Context, caller: Caller, input: unknown): Promise<object> {
  const params = readParams(input, [...PAGINATION_PARAMS, 'resource_id', 'object', 'type']);
  const page = readPage(params);
  const resourceId = optionalString(params, 'resource_id');
  const objectType = optionalString(params, 'object');
  const type = optionalString(params, 'type');
  const rows = await ownEvents(ctx, caller)
    .$if(resourceId !== undefined, (q) => q.where('resource_id', '=', resourceId!))
    .$if(objectType !== undefined, (q) => q.where('object_type', '=', objectType!))
    .$if(type !== undefined, (q) => q.where('type', '=', type!))
    .$call(inPage(page, 'event_id'))
    .execute();
  return listObject(rows.map((row) => renderEvent(storedEvent(row))), page, EVENTS_URL);
}

export const EVENT_OPERATIONS = [defineOperation('events.retrieve', retrieveEvent), defineOperation('events.list', listEventsOperation)] as const;

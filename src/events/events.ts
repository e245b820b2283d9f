/**
 * Events as the APIs read them (v1 §6, v2 §4.7): one event by id, and a page of events with the
 * filters the SDKs send (`resource_id`, `object`, `type`). Only the caller's account and mode, and
 * only the version's own events: another account's event is the same 404 as none. Both APIs run
 * these executions: the v1 codec is src/api/v1/events.ts, the v2 codec src/api/v2/events.ts.
 */
import type { Caller } from '../accounts/accounts';
import { reject } from '../domain/errors';
import type { Context } from '../engine/context';
import { cursorOf, isV2Page, type ListPage } from '../operations/list-page';
import { inPage } from '../operations/pagination';
import { optionalString, type Params } from '../operations/params';
import { inV2Page } from '../operations/v2-pagination';
import { storedEvent, type ApiVersion, type StoredEvent } from './outbox';

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

/** `events.retrieve` of one API version as a command. */
export interface RetrieveEventCommand {
  readonly version: ApiVersion;
  readonly id: string;
}

export async function retrieveEvent(ctx: Context, caller: Caller, command: RetrieveEventCommand): Promise<StoredEvent> {
  return storedEvent(await findEvent(ctx, caller, command.version, command.id, 'id'));
}

/** The list filters both versions take; each undefined when not sent. */
export interface EventFilters {
  readonly resourceId: string | undefined;
  readonly object: string | undefined;
  readonly type: string | undefined;
}

/** The filters' parameter names, the same in v1 and v2. */
export const EVENT_FILTERS = ['resource_id', 'object', 'type'] as const;

/** Reads the filters (both APIs' codecs read them alike). */
export function readEventFilters(params: Params): EventFilters {
  return { resourceId: optionalString(params, 'resource_id'), object: optionalString(params, 'object'), type: optionalString(params, 'type') };
}

/** `events.list` of one API version as a command. */
export interface ListEventsCommand {
  readonly version: ApiVersion;
  readonly page: ListPage;
  readonly filters: EventFilters;
}

/** One page of the version's events, newest first, one past the limit. */
export async function listEventPage(ctx: Context, caller: Caller, command: ListEventsCommand): Promise<StoredEvent[]> {
  const { version, page, filters } = command;
  const cursor = await cursorOf(page, (id, param) => findEvent(ctx, caller, version, id, param), (row) => ({ created_at: row.created_at, id: row.seq }));
  const rows = await ownEvents(ctx, caller, version)
    .$if(filters.resourceId !== undefined, (q) => q.where('resource_id', '=', filters.resourceId!))
    .$if(filters.object !== undefined, (q) => q.where('object_type', '=', filters.object!))
    .$if(filters.type !== undefined, (q) => q.where('type', '=', filters.type!))
    // A v2 page lists events of one instant in the order they were written (seq), not by their
    // random ids; v1 pages keep the id tie-break they have always had.
    .$call(isV2Page(page) ? inV2Page(page, cursor, 'seq') : inPage(page, 'event_id'))
    .execute();
  return rows.map(storedEvent);
}

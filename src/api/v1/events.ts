/**
 * The v1 codec of events (v1 §6): `events.retrieve` by id, `events.list` with v1 pagination and
 * the filters the SDKs send (`resource_id`, `object`, `type`) → event commands of version v1;
 * stored events → v1 event objects.
 */
import { EVENT_FILTERS, listEventPage, readEventFilters, retrieveEvent, type ListEventsCommand, type RetrieveEventCommand } from '../../events/events';
import { renderEvent } from '../../events/outbox';
import { defineCommandOperation } from '../../operations/define';
import { listObject, PAGINATION_PARAMS, readPage, type Page } from '../../operations/pagination';
import { readParams } from '../../operations/params';
import { decodeId } from './codec';

const EVENTS_URL = '/v1/events';

export function decodeRetrieveEvent(input: unknown): RetrieveEventCommand {
  return { version: 'v1', ...decodeId(input) };
}

/** `events.list`: pagination, then the filters. */
export function decodeListEvents(input: unknown): ListEventsCommand & { readonly page: Page } {
  const params = readParams(input, [...PAGINATION_PARAMS, ...EVENT_FILTERS]);
  const page = readPage(params);
  return { version: 'v1', page, filters: readEventFilters(params) };
}

export const EVENT_OPERATIONS = [
  defineCommandOperation('events.retrieve', { decode: decodeRetrieveEvent, execute: retrieveEvent, encode: renderEvent }),
  defineCommandOperation('events.list', {
    decode: decodeListEvents,
    execute: listEventPage,
    encode: (events, command) => listObject(events.map(renderEvent), command.page, EVENTS_URL),
  }),
];

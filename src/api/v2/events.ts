/**
 * The v2 codec of events (v2 §4.7): `v2.events.retrieve` (`GET /v2/events/{event_id}`, a v2 event
 * with `pending_webhooks`) and `v2.events.list` (newest first, cursors, the filters of v1), on the
 * executions the v1 codec uses (src/events/events.ts). An event's object is rendered as it was
 * when the event was written (src/events/outbox.ts).
 */
import { EVENT_FILTERS, listEventPage, readEventFilters, retrieveEvent, type ListEventsCommand } from '../../events/events';
import { renderEvent } from '../../events/outbox';
import { defineCommandOperation } from '../../operations/define';
import { readParams, requireString } from '../../operations/params';
import { readV2Page, V2_PAGINATION_PARAMS, v2ListObject, type V2Page } from '../../operations/v2-pagination';

const V2_EVENTS_URL = '/v2/events';

function decodeV2List(input: unknown): ListEventsCommand & { readonly page: V2Page } {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, ...EVENT_FILTERS]);
  const page = readV2Page(params);
  return { version: 'v2', page, filters: readEventFilters(params) };
}

export const V2_EVENT_OPERATIONS = [
  defineCommandOperation('v2.events.retrieve', {
    decode: (input) => ({ version: 'v2' as const, id: requireString(readParams(input, ['id']), 'id') }),
    execute: retrieveEvent,
    encode: renderEvent,
  }),
  defineCommandOperation('v2.events.list', {
    decode: decodeV2List,
    execute: listEventPage,
    encode: (events, command) => v2ListObject(events, command.page, V2_EVENTS_URL, renderEvent),
  }),
];

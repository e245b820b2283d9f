/**
 * One source of truth for the event object: a field added to an event field list
 * shows in renderEvent's object and in the SQL text printer derived from the same list.
 */
import { describe, expect, it } from 'vitest';
import { Kysely, sql, DummyDriver, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from 'kysely';
import { EVENT_V1_FIELDS, eventRenderer, eventTextSql, renderEvent, type EventField, type StoredEvent } from '../../src/events/outbox';

const db = new Kysely<unknown>({
  dialect: { createAdapter: () => new PostgresAdapter(), createDriver: () => new DummyDriver(), createIntrospector: (k) => new PostgresIntrospector(k), createQueryCompiler: () => new PostgresQueryCompiler() },
});
const event = { id: 'evnt_1', livemode: false, createdAt: new Date('2027-03-01T00:00:00Z'), type: 'charge.succeeded', pendingWebhooks: 2, data: { a: 1 }, apiVersion: 'v1' } as unknown as StoredEvent;
const extra: EventField = { name: 'request', js: () => null, sql: { json: 'null' } };

describe('the event field lists', () => {
  it('renderEvent is the v1 list, in order', () => {
    expect(Object.keys(renderEvent(event))).toEqual(EVENT_V1_FIELDS.map((f) => f.name));
  });
  it('an added field shows in the object and in the SQL printer', () => {
    const fields = [...EVENT_V1_FIELDS, extra];
    expect(eventRenderer(fields)(event)).toMatchObject({ request: null, pending_webhooks: 2 });
    const printed = sql`SELECT ${eventTextSql(fields)}`.compile(db).sql;
    expect(printed).toContain(`',"request":null}'`);
    expect(sql`SELECT ${eventTextSql(EVENT_V1_FIELDS)}`.compile(db).sql).not.toContain('request');
  });
});

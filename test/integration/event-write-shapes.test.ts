/**
 * The two shapes of the event outbox's writes (src/db/citus-shape.ts): on a single PostgreSQL one
 * statement (eventsWithDeliveries, the endpoints matched in SQL), on a Citus coordinator separate
 * statements routed whole (the endpoints read, matched in writeEventRows, then the events and the
 * deliveries). Both run here without Citus, the second through a store given the Citus mark, on two
 * databases given the same calls and the same seeded ids: the events (`pending_webhooks` included),
 * their deliveries and the charges must be the same row for row. Events encoded ahead of their
 * statement (encodePreparedEvents, as the renewal job does) must be written the same as well.
 */
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { runOperation } from '../../src/api/operations';
import { CitusStore, routedWhole } from '../../src/db/citus-shape';
import type { Database } from '../../src/db/schema';
import { encodePreparedEvents, prepareEvents, recordPreparedEvents } from '../../src/events/outbox';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { addEndpoint } from '../../src/webhooks/endpoints';
import { captureStatements } from '../support/statement-capture';
import { createTestDatabase, isPostgres, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';

const databases: TestDatabase[] = [];
beforeAll(async () => {
  databases.push(await createTestDatabase(), await createTestDatabase(), await createTestDatabase());
});
afterAll(async () => Promise.all(databases.map((database) => database.drop())));

/** Endpoints of every filter, events of two accounts, both APIs and several types in one write, and a charge created by customer. */
async function scenario(database: TestDatabase, citus: boolean, encodedAhead = false): Promise<{ readonly statements: string[]; readonly rows: unknown }> {
  const base = testContext(database.store);
  const db = citus ? database.store.db.withPlugin(new CitusStore()) : database.store.db;
  const ctx = { ...base, db };
  expect(routedWhole(ctx.db)).toBe(citus);
  for (const id of ['acct_shape_a', 'acct_shape_b']) await createAccount(ctx, { name: id, id });
  await addEndpoint(ctx, { accountId: 'acct_shape_a', url: 'https://a.example/all' });
  await addEndpoint(ctx, { accountId: 'acct_shape_a', url: 'https://a.example/charges', eventTypes: ['charge.succeeded', 'charge.failed'] });
  await addEndpoint(ctx, { accountId: 'acct_shape_a', url: 'https://a.example/v2', apiVersion: 'v2' });
  await addEndpoint(ctx, { accountId: 'acct_shape_a', url: 'https://a.example/v1-customers', apiVersion: 'v1', eventTypes: ['customer.updated'] });
  const disabled = await addEndpoint(ctx, { accountId: 'acct_shape_a', url: 'https://a.example/off' });
  await ctx.db.updateTable('webhook_endpoints').set({ status: 'disabled' }).where('account_id', '=', 'acct_shape_a').where('endpoint_id', '=', disabled.endpoint.id).execute();
  await addEndpoint(ctx, { accountId: 'acct_shape_b', url: 'https://b.example/all' });

  const stop = captureStatements();
  try {
    const at = REFERENCE_INSTANT;
    await ctx.db.transaction().execute((trx) => {
      const prepared = prepareEvents([
        { accountId: 'acct_shape_a', livemode: false, type: 'customer.updated', data: { id: 'cus_1', object: 'customer' }, at },
        { accountId: 'acct_shape_b', livemode: false, type: 'customer.updated', data: { id: 'cus_2', object: 'customer' }, at },
        { accountId: 'acct_shape_a', livemode: false, type: 'payment_flow.created', apiVersion: 'v2', data: { id: 'pfl_1', object: 'payment_flow' }, at },
        { accountId: 'acct_shape_a', livemode: false, type: 'charge.succeeded', data: { id: 'ch_1', object: 'charge', note: 'a blank, "quotes" and ü' }, at },
        { accountId: 'acct_shape_a', livemode: true, type: 'charge.succeeded', data: { id: 'ch_2', object: 'charge' }, at },
      ]);
      // As the renewal job does while its charges' INSERT runs.
      if (encodedAhead) encodePreparedEvents(trx, prepared);
      return recordPreparedEvents(trx, ctx.ids, prepared);
    });
    const caller: Caller = { accountId: 'acct_shape_a', livemode: false, kind: 'secret' };
    const token = (await runOperation(ctx, { ...caller, kind: 'public' }, 'tokens.create', { card: { number: TEST_CARDS.visa.number, exp_month: '12', exp_year: '2035', cvc: '123' } })) as { id: string };
    const customer = ((await runOperation(ctx, caller, 'customers.create', { card: token.id })) as { id: string }).id;
    const charge = await runOperation(ctx, caller, 'charges.create', { amount: '1000', currency: 'jpy', customer });
    return { statements: stop().map((statement) => statement.text), rows: { charge, ...(await written(ctx.db)) } };
  } catch (error) {
    stop();
    throw error;
  }
}

async function written(db: Kysely<Database>): Promise<Record<string, unknown>> {
  const rows = async (query: ReturnType<typeof sql>) => (await query.execute(db)).rows;
  return {
    events: await rows(sql`SELECT account_id, event_id, livemode, api_version, type, object_type, resource_id, data, created_at, pending_webhooks FROM events ORDER BY seq`),
    deliveries: await rows(sql`SELECT d.account_id, w.url, d.event_id, d.next_attempt_at, d.created_at, d.test_clock_id FROM webhook_deliveries d
      JOIN webhook_endpoints w ON w.account_id = d.account_id AND w.endpoint_id = d.endpoint_id ORDER BY d.event_id, w.url`),
    charges: await rows(sql`SELECT * FROM charges ORDER BY charge_id`),
    intents: await rows(sql`SELECT count(*)::int AS n FROM network_claims`),
  };
}

/** The single-PostgreSQL run, made once for the tests comparing with it. */
let singleRun: ReturnType<typeof scenario> | undefined;
const singleScenario = () => (singleRun ??= scenario(databases[0]!, false));

describe('the outbox writes the same rows in either shape', () => {
  it('events, pending_webhooks, deliveries and the created charge: one statement each on PostgreSQL, routed-whole statements on a Citus store', async () => {
    const single = await singleScenario();
    const citus = await scenario(databases[1]!, true);
    // The shapes differ (seen through the pg driver, so on PostgreSQL): only the Citus store reads
    // the endpoints on their own, once per event write.
    if (isPostgres()) {
      const endpointRead = (text: string) => /^SELECT w\.account_id, w\.endpoint_id\b/.test(text.trim());
      expect(single.statements.some(endpointRead)).toBe(false);
      const eventWrites = single.statements.filter((text) => /\bINSERT INTO events\b/.test(text)).length;
      expect(eventWrites).toBeGreaterThan(1);
      expect(citus.statements.filter(endpointRead)).toHaveLength(eventWrites);
      // The outbox's single-PostgreSQL events come from a set built of text parameters (no VALUES
      // rows, one statement whatever the batch); Citus's are the multi-row VALUES it routes in one
      // phase. (The created charge writes its event from the charge's row, in its own statement.)
      const eventInserts = (statements: string[]) => statements.filter((text) => /\bINSERT INTO events\b/.test(text) && !/\binsert into "charges"/i.test(text));
      for (const text of eventInserts(single.statements)) {
        expect(text).toMatch(/json_to_recordset\(/);
        expect(text).not.toMatch(/\bVALUES\b/);
      }
      for (const text of eventInserts(citus.statements)) expect(text).toMatch(/^INSERT INTO events \([a-z_, ]+\) VALUES \(/);
    }
    // …and the rows are the same.
    const rows = single.rows as { events: { pending_webhooks: number }[]; deliveries: unknown[] };
    // a's customer.updated: the endpoint of all and the v1 customers' one; b's: b's own; the v2
    // event: all and v2; the charge event: all and the charges'; live mode: none.
    expect(rows.events.slice(0, 5).map((event) => event.pending_webhooks)).toEqual([2, 1, 2, 2, 0]);
    expect(rows.deliveries).toHaveLength(rows.events.reduce((sum, event) => sum + event.pending_webhooks, 0));
    expect(citus.rows).toEqual(single.rows);
  });

  it('events encoded ahead of their statement (encodePreparedEvents) are written the same', async () => {
    const single = await singleScenario();
    const ahead = await scenario(databases[2]!, false, true);
    expect((ahead.rows as { events: unknown[] }).events.length).toBeGreaterThan(5);
    expect(ahead.rows).toEqual(single.rows);
  });
});

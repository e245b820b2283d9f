/**
 * Every statement an API request sends names its account on every account table it reads or
 * changes (src/db/account-scope.ts), so that on Citus a request is one worker node's work with a
 * one-phase commit. Recorded on PostgreSQL while the official SDKs (v1 `payjp`, v2
 * `@payjp/payjpv2`) call the real server: tokens, customers and cards, charges captured and
 * refunded, plans and subscriptions, v2 payment methods and flows, events and settlement lists,
 * with a webhook endpoint configured (every event write reads the endpoints).
 *
 * PostgreSQL only: the recording listens on the pg driver; CI always has PostgreSQL.
 */
import * as v2 from '@payjp/payjpv2';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { addEndpoint } from '../../src/webhooks/endpoints';
import { isPostgres } from '../support/database';
import { call, startTestServer } from '../support/http-server';
import { captureStatements, unscopedStatements, type SentStatement } from '../support/statement-capture';
import { ok, v2Client } from '../support/v2-sdk';

const CARD = { number: TEST_CARDS.visa.number, exp_month: '12', exp_year: '2035', cvc: '123' };

describe.runIf(isPostgres())('every statement of an API request names its account', () => {
  it('over v1 and v2 SDK calls of two accounts', async () => {
    const server = await startTestServer('harness');
    let captured: SentStatement[] = [];
    const accountTables = new Set<string>();
    try {
      const tables = await sql<{ table_name: string }>`
        SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' AND column_name = 'account_id'`.execute(server.ctx.db);
      for (const { table_name: table } of tables.rows) accountTables.add(table);
      for (const accountId of ['acct_http_a', 'acct_http_b']) await addEndpoint(server.ctx, { accountId, url: 'https://hooks.example/kessai' });

      const stop = captureStatements();
      try {
        for (const keys of [server.keys.a, server.keys.b]) {
          const payjp = server.sdk(keys.test.secret);
          const token = async (number: string = CARD.number): Promise<string> => {
            const answer = await call(`${server.baseUrl}/v1`, keys.test.public, 'POST', '/tokens', { 'card[number]': number, 'card[exp_month]': CARD.exp_month, 'card[exp_year]': CARD.exp_year, 'card[cvc]': CARD.cvc });
            expect(answer.status).toBe(200);
            return (answer.body as { id: string }).id;
          };
          const customer = await payjp.customers.create({ email: 'buyer@example.com', card: await token() } as never);
          await payjp.customers.cards.create(customer.id, { card: await token(TEST_CARDS.mastercard.number) } as never);
          await payjp.customers.retrieve(customer.id);
          const held = await payjp.charges.create({ amount: 3000, currency: 'jpy', customer: customer.id, capture: false });
          await payjp.charges.capture(held.id, { amount: 2500 });
          const paid = await payjp.charges.create({ amount: 1800, currency: 'jpy', card: await token() });
          await payjp.charges.refund(paid.id, { amount: 800 });
          await payjp.charges.retrieve(paid.id);
          await payjp.charges.list({ limit: 5 });
          const plan = await payjp.plans.create({ amount: 980, currency: 'jpy', interval: 'month' });
          const subscription = await payjp.subscriptions.create({ customer: customer.id, plan: plan.id });
          await payjp.subscriptions.pause(subscription.id);
          await payjp.subscriptions.resume(subscription.id);
          await payjp.subscriptions.list({ limit: 5 });
          await payjp.events.list({ limit: 5 });
          await payjp.terms.list({ limit: 5 });
          await payjp.balances.list({ limit: 5 });
          await payjp.statements.list({ limit: 5 });

          const client = v2Client(server, keys.test.secret);
          const method = await ok(v2.createPaymentMethod({ client, body: { type: 'card', card: { number: TEST_CARDS.visa.number, exp_month: 12, exp_year: 2035, cvc: '123' }, billing_details: { email: 'buyer@example.com' } } }));
          const flow = await ok(v2.createPaymentFlow({ client, body: { amount: 1200, currency: 'jpy', payment_method_id: (method as { id: string }).id, confirm: true, capture_method: 'manual' } }));
          await ok(v2.capturePaymentFlow({ client, path: { payment_flow_id: (flow as { id: string }).id } }));
          await ok(v2.getAllPaymentFlows({ client, query: { limit: 5 } }));
          await ok(v2.getAllEvents({ client, query: { limit: 5 } }));
        }
      } finally {
        captured = stop();
      }
    } finally {
      await server.close();
    }
    // The requests were recorded, their writes among them…
    expect(captured.filter((statement) => statement.inTransaction).length).toBeGreaterThan(50);
    // (the outbox reads the endpoints, then writes events and their deliveries)
    for (const written of [/\bFROM webhook_endpoints\b/, /\bINSERT INTO events\b/i, /\bINSERT INTO webhook_deliveries\b/i]) expect(captured.some((statement) => written.test(statement.text))).toBe(true);
    // …and none reads or changes another account's rows: no look across accounts on this path.
    expect(unscopedStatements(captured, accountTables, { discovery: false })).toEqual([]);
  });
});

/**
 * Makes a few real events for the webhook walkthrough of docs/webhooks.md without starting `kessai serve`
 * (the SDKs against the server make the same events): on the account given (test mode), a plan, a customer with the test Visa card and a
 * subscription, through the same operations the API runs, at the real clock.
 *
 *   DATABASE_URL=… npx tsx scripts/webhooks-demo.ts acct_demo
 */
import { randomIds } from '../src/engine/random-ids';
import { silentLogger } from '../src/engine/logger';
import { openRuntime } from '../src/engine/runtime';
import { systemClock } from '../src/engine/system-clock';
import { runOperation } from '../src/api/operations';
import { TEST_CARDS } from '../src/processor/test-cards';

const accountId = process.argv[2];
if (!accountId) throw new Error('usage: npx tsx scripts/webhooks-demo.ts ACCOUNT');
const rt = await openRuntime({ databaseUrl: process.env.DATABASE_URL, clock: systemClock, ids: randomIds(), log: silentLogger() });
try {
  const caller = { accountId, livemode: false, kind: 'secret' } as const;
  const plan = (await runOperation(rt.ctx, caller, 'plans.create', { amount: 980, currency: 'jpy', interval: 'month', name: 'Demo monthly' })) as { id: string };
  const token = (await runOperation(rt.ctx, caller, 'tokens.create', { card: { number: TEST_CARDS.visa.number, exp_month: '12', exp_year: '2035', cvc: '123' } })) as { id: string };
  const customer = (await runOperation(rt.ctx, caller, 'customers.create', { email: 'demo@example.com', card: token.id })) as { id: string };
  const subscription = (await runOperation(rt.ctx, caller, 'subscriptions.create', { customer: customer.id, plan: plan.id })) as { id: string; status: string };
  console.log(`${accountId}: plan ${plan.id}, customer ${customer.id}, subscription ${subscription.id} (${subscription.status})`);
} finally {
  await rt.close();
}

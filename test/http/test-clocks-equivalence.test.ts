/**
 * A test clock's advance and `kessai simulate` are one engine: the same population (a monthly
 * subscriber, one with a trial, one whose card is declined at the trial's end), put on a clock
 * through the payjp SDK and advanced over a range, and simulated from a scenario over the same
 * range, give the same charges, statements and events, ids aside.
 */
import { sql, type Kysely } from 'kysely';
import type Payjp from 'payjp';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ALL_JOBS } from '../../jobs/index';
import { operationNames } from '../../src/api/operations';
import type { Database } from '../../src/db/schema';
import { parseInstant } from '../../src/domain/time';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { parseScenario, planSteps } from '../../src/simulation/scenario';
import { simulate } from '../../src/simulation/simulate';
import { startTestServer, type TestServer } from '../support/http-server';
import { callTestClocks, untilClockReady } from '../support/test-clock-api';

const FROM = parseInstant('2027-01-01');
const TO = parseInstant('2027-05-01');
const SEED = 7;
const card = (number: string) => ({ number, exp_month: 12, exp_year: 2035, cvc: '123' });
const PLANS = {
  monthly: { amount: 1000, currency: 'jpy', interval: 'month' },
  trial: { amount: 1500, currency: 'jpy', interval: 'month', trial_days: 7 },
} as const;
const POPULATION = [
  { ref: 'paying', card: TEST_CARDS.visa.number, plan: 'monthly' },
  { ref: 'trialing', card: TEST_CARDS.visa.number, plan: 'trial' },
  { ref: 'declining', card: TEST_CARDS.declinesOnCharge.number, plan: 'trial' },
] as const;

/** What is compared, ids aside: every charge, statement and event of the population's books, in order. */
interface Books {
  readonly charges: unknown[];
  readonly statements: unknown[];
  readonly events: unknown[];
}

/**
 * The books of `account` (on the clock `clock`, or the account's own when null): charges of its
 * customers, statements of its books, and the events from FROM on — but the plans' and tokens' (not
 * on a clock: made at the server's time) and the clock's own.
 */
async function booksOf(db: Kysely<Database>, account: string, clock: string | null): Promise<Books> {
  const customers = sql`(SELECT customer_id FROM customers WHERE account_id = ${account} AND test_clock_id IS NOT DISTINCT FROM ${clock})`;
  const charges = await sql`
    SELECT amount, created_at, captured, captured_at, paid, failure_code, amount_refunded, fee, period_start, expired_at
    FROM charges WHERE account_id = ${account} AND customer_id IN ${customers}
    ORDER BY created_at, amount, failure_code NULLS FIRST`.execute(db);
  const statements = await sql`
    SELECT s.type, s.net, s.title, s.created_at, t.start_at, t.end_at,
      (SELECT count(*)::int FROM statement_items i WHERE i.account_id = s.account_id AND i.statement_id = s.statement_id) AS items
    FROM statements s JOIN terms t ON t.account_id = s.account_id AND t.livemode = s.livemode AND t.term_id = s.term_id
    WHERE s.account_id = ${account} AND s.test_clock_id IS NOT DISTINCT FROM ${clock}
    ORDER BY s.created_at, s.type, s.net`.execute(db);
  const events = await sql`
    SELECT type, api_version, object_type, created_at FROM events
    WHERE account_id = ${account} AND created_at >= ${FROM} AND type NOT LIKE 'plan.%' AND type NOT LIKE 'token.%' AND type NOT LIKE 'test_clock.%'
    ORDER BY created_at, type, api_version`.execute(db);
  return { charges: charges.rows, statements: statements.rows, events: events.rows };
}

let server: TestServer;
let payjp: Payjp.Payjp;
let key: string;

beforeAll(async () => {
  server = await startTestServer('harness');
  key = server.keys.a.test.secret;
  payjp = server.sdk(key);
});
afterAll(async () => {
  await server?.close();
});

it('an advance over a range gives the charges, statements and events kessai simulate gives over it, ids aside', async () => {
  // The clock: frozen at FROM, the population attached through the SDK, advanced to the range's last second.
  const clock = (await callTestClocks(server.baseUrl, key, 'POST', '', { frozen_time: String(FROM.getTime() / 1000), name: 'equivalence' })).body;
  const plans: Record<string, string> = {};
  for (const [ref, params] of Object.entries(PLANS)) plans[ref] = (await payjp.plans.create({ ...params })).id;
  for (const person of POPULATION) {
    const token = await payjp.tokens.create({ card: card(person.card) } as never, { 'X-Payjp-Direct-Token-Generate': 'true' });
    const customer = await payjp.customers.create({ card: token.id, test_clock: clock.id } as never);
    await payjp.subscriptions.create({ customer: customer.id, plan: plans[person.plan]! });
  }
  const last = TO.getTime() / 1000 - 1;
  expect((await callTestClocks(server.baseUrl, key, 'POST', `/${clock.id}/advance`, { frozen_time: String(last) })).status).toBe(200);
  expect(await untilClockReady(server.baseUrl, key, clock.id)).toMatchObject({ status: 'ready', frozen_time: last });
  const onClock = await booksOf(server.ctx.db, 'acct_http_a', clock.id as string);

  // The simulation: the same plans, customers and sign-ups at FROM, over [FROM, TO).
  const scenario = parseScenario(
    JSON.stringify({
      name: 'test clock equivalence',
      plans: Object.entries(PLANS).map(([ref, params]) => ({ ref, params })),
      customers: POPULATION.map((person) => ({ ref: person.ref, card: card(person.card) })),
      timeline: POPULATION.map((person) => ({ at: '2027-01-01', op: 'subscriptions.create', params: { customer: `$${person.ref}`, plan: `$${person.plan}` } })),
    }),
    'equivalence scenario',
  );
  const steps = planSteps(scenario, { from: FROM, to: TO, seed: SEED, operations: operationNames() });
  const simulated = await simulate({ scenario, steps, from: FROM, to: TO, seed: SEED, jobs: ALL_JOBS, strict: true }, (world) => booksOf(world.ctx.db, world.accounts[0]!, null));

  expect(onClock.charges).toEqual(simulated.charges);
  expect(onClock.statements).toEqual(simulated.statements);
  expect(onClock.events).toEqual(simulated.events);
  // Not empty: four months of renewals, the trial ends (one declined), three month closes and their statements.
  expect(onClock.charges.length).toBeGreaterThanOrEqual(9);
  expect(onClock.statements.length).toBeGreaterThanOrEqual(3);
  expect(onClock.events.length).toBeGreaterThan(20);
}, 240_000);

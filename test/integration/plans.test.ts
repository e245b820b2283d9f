import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import type { SubscriptionStatus } from '../../src/db/column-types';
import { assertSubscribablePlan } from '../../src/domain/billing-calendar';
import { KessaiError } from '../../src/domain/errors';
import { toUnixSeconds } from '../../src/domain/time';
import { listEvents } from '../../src/events/outbox';
import { operationNames, runOperation } from '../../src/api/operations';
import { createTestDatabase, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';
import { rejectionOf, expectRefused } from '../support/rejections';

type Json = Record<string, unknown> & { id: string };
type List = { object: string; count: number; data: Json[]; has_more: boolean; url: string };

let database: TestDatabase;
let ctx: ReturnType<typeof testContext>;
let test: Caller;
let live: Caller;
let publicKey: Caller;

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 11 });
  const { account } = await createAccount(ctx, { name: 'Plans Shop', id: 'acct_plans', liveEnabled: true });
  test = { accountId: account.id, livemode: false, kind: 'secret' };
  live = { accountId: account.id, livemode: true, kind: 'secret' };
  publicKey = { accountId: account.id, livemode: false, kind: 'public' };
});
afterAll(async () => database?.drop());

async function run<T = Json>(name: string, params?: unknown, caller: Caller = test): Promise<T> {
  return (await runOperation(ctx, caller, name, params)) as T;
}

/** Asserts the call is refused with the code and param, and that no row or event was written. */
async function refused(name: string, params: unknown, code: string, param: string | undefined, caller: Caller = test): Promise<KessaiError> {
  return expectRefused(`${name} ${JSON.stringify(params)}`, () => runOperation(ctx, caller, name, params), code, param, snapshot);
}

/** Every row this file's account owns, so "a rejected call changes nothing" compares whole tables. */
async function snapshot(): Promise<unknown> {
  const [plans, subscriptions, events] = await Promise.all([
    ctx.db.selectFrom('plans').selectAll().where('account_id', '=', test.accountId).orderBy('livemode').orderBy('plan_id').execute(),
    ctx.db.selectFrom('subscriptions').selectAll().where('account_id', '=', test.accountId).orderBy('livemode').orderBy('subscription_id').execute(),
    ctx.db.selectFrom('events').select(({ fn }) => fn.countAll<number>().as('n')).where('account_id', '=', test.accountId).executeTakeFirstOrThrow(),
  ]);
  return { plans, subscriptions, events: events.n };
}

const monthly = { amount: '1000', currency: 'jpy', interval: 'month' } as const;

let subscriptionCount = 0;

/**
 * A subscription row written directly: the subscriptions operations are not part of this slice,
 * and plans.delete only needs a row that names the plan.
 */
async function subscribe(planId: string, options: { status?: SubscriptionStatus; nextCyclePlanId?: string; deleted?: boolean; caller?: Caller } = {}): Promise<string> {
  const caller = options.caller ?? test;
  subscriptionCount += 1;
  const subscriptionId = `sub_plans_${subscriptionCount}`;
  const now = ctx.clock.now();
  await ctx.db
    .insertInto('subscriptions')
    .values({
      account_id: caller.accountId,
      livemode: caller.livemode,
      subscription_id: subscriptionId,
      customer_id: 'cus_plans',
      plan_id: planId,
      next_cycle_plan_id: options.nextCyclePlanId ?? null,
      status: options.status ?? 'active',
      start_at: now,
      current_period_start: now,
      current_period_end: new Date(now.getTime() + 31 * 86_400_000),
      metadata: '{}',
      created_at: now,
      updated_at: now,
      deleted_at: options.deleted ? now : null,
    })
    .execute();
  return subscriptionId;
}

describe('plan operations', () => {
  it('are registered, and a public key cannot run them', async () => {
    expect(operationNames()).toEqual(expect.arrayContaining(['plans.create', 'plans.retrieve', 'plans.update', 'plans.delete', 'plans.list']));
    const error = await refused('plans.create', monthly, 'invalid_api_key', undefined, publicKey);
    expect(error.status).toBe(401);
  });
});

describe('plans.create', () => {
  it('creates a plan with a chosen id, name, trial days, billing day and metadata, and a plan.created event', async () => {
    const plan = await run('plans.create', { ...monthly, id: 'gold-monthly_1', name: 'Gold', trial_days: '14', billing_day: '25', metadata: { tier: 'gold' } });
    expect(plan).toEqual({
      id: 'gold-monthly_1',
      object: 'plan',
      livemode: false,
      created: toUnixSeconds(REFERENCE_INSTANT),
      amount: 1000,
      currency: 'jpy',
      interval: 'month',
      name: 'Gold',
      trial_days: 14,
      billing_day: 25,
      metadata: { tier: 'gold' },
    });
    expect(await run('plans.retrieve', { id: 'gold-monthly_1' })).toEqual(plan);
    const events = await listEvents(ctx.db, test.accountId, { resourceId: 'gold-monthly_1' });
    expect(events.map((e) => [e.type, e.livemode])).toEqual([['plan.created', false]]);
    expect(events[0]!.data).toEqual(plan);
  });

  it('a plan with only the required parameters has a pln_ id, no name, no trial, no billing day and metadata {}', async () => {
    const plan = await run('plans.create', { amount: 500, currency: 'jpy', interval: 'year' });
    expect(plan.id).toMatch(/^pln_[0-9a-f]{30}$/);
    expect(plan).toMatchObject({ amount: 500, interval: 'year', name: null, trial_days: 0, billing_day: null, metadata: {} });
    // An empty name is no name, as on customers.
    expect((await run('plans.create', { ...monthly, name: '' })).name).toBeNull();
  });

  it('"Plan amount 50 to 9,999,999 yen", "trial_days 0 to 365", "billing_day 1 to 31": the bounds are accepted', async () => {
    expect((await run('plans.create', { ...monthly, amount: '50', trial_days: '0', billing_day: '1' })).amount).toBe(50);
    const top = await run('plans.create', { ...monthly, amount: 9_999_999, trial_days: 365, billing_day: 31 });
    expect(top).toMatchObject({ amount: 9_999_999, trial_days: 365, billing_day: 31 });
  });

  it('"A yearly plan with billing_day can be created but fails when used for a subscription"', async () => {
    const plan = await run('plans.create', { amount: '12000', currency: 'jpy', interval: 'year', billing_day: '15', id: 'yearly-with-day' });
    expect(plan).toMatchObject({ interval: 'year', billing_day: 15 });
    expect(await run('plans.retrieve', { id: 'yearly-with-day' })).toEqual(plan);
    // The failure belongs to the subscription: invalid_plan, not billing_day_for_non_monthly_plan.
    expect(rejectionOf(() => assertSubscribablePlan({ interval: 'year', billingDay: plan.billing_day as number }))).toEqual({ code: 'invalid_plan', param: 'plan' });
  });

  it('refuses missing required parameters with missing_param, in the order amount, currency, interval', async () => {
    await refused('plans.create', {}, 'missing_param', 'amount');
    await refused('plans.create', { currency: 'jpy', interval: 'month' }, 'missing_param', 'amount');
    await refused('plans.create', { amount: '1000', interval: 'month' }, 'missing_param', 'currency');
    await refused('plans.create', { amount: '1000', currency: 'jpy' }, 'missing_param', 'interval');
    await refused('plans.create', { amount: null, currency: 'jpy', interval: 'month' }, 'missing_param', 'amount');
  });

  it('refuses an amount outside 50..9,999,999 or not an integer with invalid_plan_amount', async () => {
    for (const amount of ['49', 0, -1000, '10000000', 10_000_000, '1000.5', 1000.5, 'abc', '', true]) {
      await refused('plans.create', { ...monthly, amount }, 'invalid_plan_amount', 'amount');
    }
  });

  it('"currency: jpy only"; anything else is invalid_currency', async () => {
    for (const currency of ['usd', 'JPY', '', 392]) {
      await refused('plans.create', { ...monthly, currency }, 'invalid_currency', 'currency');
    }
  });

  it('"interval: month or year"; anything else is invalid_interval', async () => {
    for (const interval of ['week', 'day', 'Month', 'monthly', '', 1]) {
      await refused('plans.create', { ...monthly, interval }, 'invalid_interval', 'interval');
    }
  });

  it('refuses trial_days outside 0..365 with invalid_trial_days and billing_day outside 1..31 with invalid_billing_day', async () => {
    for (const trialDays of ['-1', '366', '1.5', 'two']) {
      await refused('plans.create', { ...monthly, trial_days: trialDays }, 'invalid_trial_days', 'trial_days');
    }
    for (const billingDay of ['0', '32', 32, '15.5', 'last']) {
      await refused('plans.create', { ...monthly, billing_day: billingDay }, 'invalid_billing_day', 'billing_day');
    }
  });

  it('refuses a bad chosen id with invalid_flexible_id and a taken one with already_exist_id', async () => {
    await run('plans.create', { ...monthly, id: 'taken-plan' });
    await refused('plans.create', { ...monthly, id: 'has space' }, 'invalid_flexible_id', 'id');
    await refused('plans.create', { ...monthly, id: '' }, 'invalid_flexible_id', 'id');
    await refused('plans.create', { ...monthly, id: 'x'.repeat(101) }, 'invalid_flexible_id', 'id');
    await refused('plans.create', { ...monthly, id: 'プラン' }, 'invalid_flexible_id', 'id');
    const error = await refused('plans.create', { ...monthly, id: 'taken-plan', name: 'Other' }, 'already_exist_id', 'id');
    expect(error.status).toBe(400);
    expect((await run('plans.retrieve', { id: 'taken-plan' })).name).toBeNull();
    // The longest id is fine.
    expect((await run('plans.create', { ...monthly, id: 'y'.repeat(100) })).id).toBe('y'.repeat(100));
  });

  it('refuses bad names, metadata and unknown parameters', async () => {
    await refused('plans.create', { ...monthly, name: 'n'.repeat(256) }, 'invalid_string_length', 'name');
    await refused('plans.create', { ...monthly, metadata: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v'])) }, 'too_many_metadata_keys', 'metadata');
    await refused('plans.create', { ...monthly, metadata: { ['k'.repeat(41)]: 'v' } }, 'invalid_metadata_key', `metadata[${'k'.repeat(41)}]`);
    await refused('plans.create', { ...monthly, metadata: { k: 'v'.repeat(501) } }, 'invalid_metadata_value', 'metadata[k]');
    await refused('plans.create', { ...monthly, metadata: { k: 1 } }, 'invalid_metadata_value', 'metadata[k]');
    await refused('plans.create', { ...monthly, description: 'x' }, 'invalid_param_key', 'description');
    await refused('plans.create', { ...monthly, interval_count: '2' }, 'invalid_param_key', 'interval_count');
    expect((await run('plans.create', { ...monthly, name: 'n'.repeat(255) })).name).toBe('n'.repeat(255));
  });

  it('the first bad parameter in the documented order decides the error', async () => {
    await refused('plans.create', { amount: '1', currency: 'usd', interval: 'week' }, 'invalid_plan_amount', 'amount');
    await refused('plans.create', { amount: '100', currency: 'usd', interval: 'week' }, 'invalid_currency', 'currency');
    await refused('plans.create', { ...monthly, interval: 'week', id: 'bad id' }, 'invalid_interval', 'interval');
    await refused('plans.create', { ...monthly, trial_days: '400', billing_day: '40' }, 'invalid_trial_days', 'trial_days');
  });
});

describe('plans.retrieve and plans.update', () => {
  it('"an unknown id gives 404 with param = id" and a message naming it', async () => {
    const error = await refused('plans.retrieve', { id: 'pln_x' }, 'invalid_id', 'id');
    expect([error.status, error.message]).toEqual([404, 'No such plan: pln_x']);
    await refused('plans.update', { id: 'pln_x', name: 'n' }, 'invalid_id', 'id');
    await refused('plans.delete', { id: 'pln_x' }, 'invalid_id', 'id');
    await refused('plans.retrieve', {}, 'missing_param', 'id');
    await refused('plans.update', { name: 'n' }, 'missing_param', 'id');
    await refused('plans.delete', {}, 'missing_param', 'id');
  });

  it('updates the name and merges metadata; the empty string clears the name or a metadata key; a plan.updated event', async () => {
    const plan = await run('plans.create', { ...monthly, name: 'Basic', metadata: { a: '1', b: '2' } });
    ctx.clock.advance(5_000);
    const renamed = await run('plans.update', { id: plan.id, name: 'Basic+', metadata: { a: '', c: '3' } });
    expect(renamed).toEqual({ ...plan, name: 'Basic+', metadata: { b: '2', c: '3' } });
    expect(await run('plans.retrieve', { id: plan.id })).toEqual(renamed);
    const cleared = await run('plans.update', { id: plan.id, name: '' });
    expect(cleared).toEqual({ ...renamed, name: null });
    const emptied = await run('plans.update', { id: plan.id, metadata: '' });
    expect(emptied.metadata).toEqual({});
    ctx.clock.set(REFERENCE_INSTANT);
    const events = await listEvents(ctx.db, test.accountId, { resourceId: plan.id });
    expect(events.map((e) => e.type)).toEqual(['plan.created', 'plan.updated', 'plan.updated', 'plan.updated']);
    expect(events[1]!.data).toEqual(renamed);
    expect(events[3]!.data).toEqual(emptied);
  });

  it('"Update: name, metadata only": any other parameter is invalid_param_key naming it, and nothing changes', async () => {
    const plan = await run('plans.create', { ...monthly, id: 'frozen-plan' });
    const fixed = { amount: '2000', currency: 'jpy', interval: 'year', trial_days: '7', billing_day: '10', nickname: 'x' };
    for (const [key, value] of Object.entries(fixed)) {
      await refused('plans.update', { id: plan.id, name: 'ignored', [key]: value }, 'invalid_param_key', key);
    }
    await refused('plans.update', { id: plan.id, name: 'n'.repeat(256) }, 'invalid_string_length', 'name');
    await refused('plans.update', { id: plan.id, metadata: { k: ['v'] } }, 'invalid_metadata_value', 'metadata[k]');
    expect(await run('plans.retrieve', { id: plan.id })).toEqual(plan);
  });

  it('an update that would leave more than 20 metadata keys is too_many_metadata_keys', async () => {
    const full = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, 'v']));
    const plan = await run('plans.create', { ...monthly, metadata: full });
    await refused('plans.update', { id: plan.id, metadata: { extra: 'v' } }, 'too_many_metadata_keys', 'metadata');
    expect(Object.keys((await run('plans.update', { id: plan.id, metadata: { k0: '', extra: 'v' } })).metadata as object)).toHaveLength(20);
  });
});

describe('plans.delete', () => {
  it('deletes softly: deleted-object response, 404 afterwards, plan.deleted with the plan as it was, id not reused', async () => {
    const plan = await run('plans.create', { ...monthly, id: 'leaving-plan', name: 'Leaving' });
    expect(await run('plans.delete', { id: 'leaving-plan' })).toEqual({ deleted: true, id: 'leaving-plan', livemode: false });
    await refused('plans.retrieve', { id: 'leaving-plan' }, 'invalid_id', 'id');
    await refused('plans.update', { id: 'leaving-plan', name: 'Back' }, 'invalid_id', 'id');
    await refused('plans.delete', { id: 'leaving-plan' }, 'invalid_id', 'id');
    await refused('plans.create', { ...monthly, id: 'leaving-plan' }, 'already_exist_id', 'id');
    const stored = await ctx.db.selectFrom('plans').select(['deleted_at', 'name']).where('account_id', '=', test.accountId).where('plan_id', '=', 'leaving-plan').executeTakeFirstOrThrow();
    expect(stored).toEqual({ deleted_at: REFERENCE_INSTANT, name: 'Leaving' });
    const events = await listEvents(ctx.db, test.accountId, { resourceId: 'leaving-plan' });
    expect(events.map((e) => e.type)).toEqual(['plan.created', 'plan.deleted']);
    expect(events[1]!.data).toEqual(plan);
    expect((await run<List>('plans.list', { limit: 100 })).data.map((p) => p.id)).not.toContain('leaving-plan');
  });

  it('"A plan with subscribers (not deleted) cannot be deleted (exist_subscribers)", whatever the subscription status', async () => {
    for (const status of ['active', 'trial', 'paused', 'canceled'] as const) {
      const plan = await run('plans.create', { ...monthly, id: `subscribed-${status}` });
      await subscribe(plan.id, { status });
      const error = await refused('plans.delete', { id: plan.id }, 'exist_subscribers', 'id');
      expect(error.status).toBe(400);
      expect(await run('plans.retrieve', { id: plan.id })).toEqual(plan);
    }
  });

  it('a plan named as next_cycle_plan of a subscription that is not deleted also has a subscriber', async () => {
    const current = await run('plans.create', { ...monthly, id: 'current-plan' });
    const next = await run('plans.create', { ...monthly, id: 'next-plan' });
    await subscribe(current.id, { nextCyclePlanId: next.id });
    await refused('plans.delete', { id: next.id }, 'exist_subscribers', 'id');
    await refused('plans.delete', { id: current.id }, 'exist_subscribers', 'id');
  });

  it('deleted subscriptions, and subscriptions in the other mode, do not count as subscribers', async () => {
    const plan = await run('plans.create', { ...monthly, id: 'formerly-subscribed' });
    await subscribe(plan.id, { deleted: true });
    await subscribe('other-plan', { nextCyclePlanId: plan.id, deleted: true });
    // A live plan of the same id, subscribed in live mode, is another plan.
    await run('plans.create', { ...monthly, id: 'formerly-subscribed' }, live);
    await subscribe(plan.id, { caller: live });
    expect(await run('plans.delete', { id: plan.id })).toEqual({ deleted: true, id: plan.id, livemode: false });
    await refused('plans.delete', { id: plan.id }, 'exist_subscribers', 'id', live);
  });
});

describe('plans.list', () => {
  /** A fresh account, so its list holds only what the test puts there. */
  async function freshAccount(id: string): Promise<Caller> {
    const { account } = await createAccount(ctx, { name: id, id });
    return { accountId: account.id, livemode: false, kind: 'secret' };
  }

  it('lists are newest first (ties by id, descending), 10 by default, with has_more, offset, since and until', async () => {
    const caller = await freshAccount('acct_plan_pages');
    const start = new Date('2027-06-01T00:00:00Z');
    const made: Json[] = [];
    for (let i = 0; i < 12; i += 1) {
      ctx.clock.set(new Date(start.getTime() + i * 1000));
      made.push(await run('plans.create', { ...monthly, amount: String(100 + i) }, caller));
    }
    // Two more in the same second as the last one (different milliseconds are the same `created`).
    ctx.clock.set(new Date(start.getTime() + 11 * 1000 + 500));
    made.push(await run('plans.create', { ...monthly, id: 'zz-same-second' }, caller));
    made.push(await run('plans.create', { ...monthly, id: 'aa-same-second' }, caller));
    ctx.clock.set(REFERENCE_INSTANT);

    const all = await run<List>('plans.list', { limit: '100' }, caller);
    expect(all).toMatchObject({ object: 'list', count: 14, has_more: false, url: '/v1/plans' });
    expect(all.data.slice(0, 2).map((p) => p.id)).toEqual(['zz-same-second', 'aa-same-second']);
    const expected = [...made].sort((x, y) => (y.created as number) - (x.created as number) || (x.id < y.id ? 1 : x.id > y.id ? -1 : 0));
    expect(all.data.slice(3).map((p) => p.id)).toEqual(expected.slice(3).map((p) => p.id));
    expect(all.data.find((p) => p.id === made[0]!.id)).toEqual(made[0]);

    const first = await run<List>('plans.list', {}, caller);
    expect(first).toMatchObject({ count: 10, has_more: true });
    expect(first.data.map((p) => p.id)).toEqual(all.data.slice(0, 10).map((p) => p.id));
    const second = await run<List>('plans.list', { offset: 10 }, caller);
    expect(second).toMatchObject({ count: 4, has_more: false });
    expect(second.data.map((p) => p.id)).toEqual(all.data.slice(10).map((p) => p.id));
    expect((await run<List>('plans.list', { limit: 4, offset: 10 }, caller)).has_more).toBe(false);

    // "since: only objects created at or after this timestamp; until: … at or before" (v1 §4.1).
    const t = toUnixSeconds(start);
    const window = await run<List>('plans.list', { since: String(t + 2), until: String(t + 4) }, caller);
    expect(window.data.map((p) => p.created)).toEqual([t + 4, t + 3, t + 2]);
    expect((await run<List>('plans.list', { since: t + 11 }, caller)).count).toBe(3);

    // A deleted plan leaves the list.
    await run('plans.delete', { id: 'zz-same-second' }, caller);
    expect((await run<List>('plans.list', { limit: 1 }, caller)).data.map((p) => p.id)).toEqual(['aa-same-second']);
  });

  it('refuses bad pagination values and unknown parameters with their param', async () => {
    await refused('plans.list', { limit: '0' }, 'invalid_querystring', 'limit');
    await refused('plans.list', { limit: '101' }, 'invalid_querystring', 'limit');
    await refused('plans.list', { offset: '-1' }, 'invalid_querystring', 'offset');
    await refused('plans.list', { since: 'yesterday' }, 'invalid_timestamp', 'since');
    await refused('plans.list', { until: '-5' }, 'invalid_timestamp', 'until');
    await refused('plans.list', { interval: 'month' }, 'invalid_param_key', 'interval');
  });
});

describe('test and live mode', () => {
  it('test and live plans are separate: a test plan is unknown in live mode and its chosen id is free there', async () => {
    const testPlan = await run('plans.create', { ...monthly, id: 'both-modes-plan', name: 'Test' });
    await refused('plans.retrieve', { id: 'both-modes-plan' }, 'invalid_id', 'id', live);
    await refused('plans.update', { id: 'both-modes-plan', name: 'x' }, 'invalid_id', 'id', live);
    const livePlan = await run('plans.create', { ...monthly, id: 'both-modes-plan', name: 'Live', amount: '3000' }, live);
    expect(livePlan).toMatchObject({ id: 'both-modes-plan', livemode: true, name: 'Live', amount: 3000 });
    expect(await run('plans.retrieve', { id: 'both-modes-plan' })).toEqual(testPlan);
    await run('plans.delete', { id: 'both-modes-plan' }, live);
    expect(await run('plans.retrieve', { id: 'both-modes-plan' })).toEqual(testPlan);
    const liveIds = (await run<List>('plans.list', { limit: 100 }, live)).data.map((p) => p.id);
    expect(liveIds).not.toContain('both-modes-plan');
    const events = await listEvents(ctx.db, test.accountId, { resourceId: 'both-modes-plan' });
    expect(events.map((e) => [e.type, e.livemode])).toEqual([
      ['plan.created', false],
      ['plan.created', true],
      ['plan.deleted', true],
    ]);
  });
});

/**
 * Races a payments API must survive, as real concurrent transactions on two
 * connection pools of one PostgreSQL database, the way two server processes would run them.
 * PostgreSQL only: PGlite is a single session, so nothing there can run at the same time.
 *
 * Where the outcome depends on who takes the row first, the first caller's card network holds its
 * call at a gate (after it has taken its lock or claim), the second starts only once the first is
 * there, and the gate opens after: the test then knows the winner, whatever the machine's load,
 * and checks that the loser got the catalogue error and changed nothing.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { expireHoldBatch } from '../../src/charges/hold-jobs';
import type { Store } from '../../src/db/connect';
import { KessaiError } from '../../src/domain/errors';
import { listEvents } from '../../src/events/outbox';
import { runOperation } from '../../src/api/operations';
import { simulatedCardNetwork, type CardNetwork } from '../../src/processor/card-network';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { createTestDatabase, isPostgres, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';

const caller: Caller = { accountId: 'acct_races', livemode: false, kind: 'secret' };

/** The gate of the current race: `reached` once a gated call is at the network, which waits for `opened`. */
interface Gate {
  readonly reached: Promise<void>;
  readonly opened: Promise<void>;
  arrive(): void;
  open(): void;
}
function newGate(): Gate {
  let arrive!: () => void;
  let open!: () => void;
  const reached = new Promise<void>((resolve) => (arrive = resolve));
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { reached, opened, arrive, open };
}
let gate = newGate();

/** The simulator, with every call held at the current race's gate: the caller keeps what it took (lock or claim) until the test opens it. */
function gatedNetwork(): CardNetwork {
  const network = simulatedCardNetwork();
  const held = async () => {
    gate.arrive();
    await gate.opened;
  };
  return {
    authorize: async (requests) => (await held(), network.authorize(requests)),
    authenticate: async (requests) => (await held(), network.authenticate(requests)),
    capture: async (requests) => (await held(), network.capture(requests)),
    release: async (requests) => (await held(), network.release(requests)),
    refund: async (requests) => (await held(), network.refund(requests)),
  };
}

type Ctx = ReturnType<typeof testContext>;
let database: TestDatabase;
let other: Store;
/** Two "processes": each its own pool; `slow` answers from the gated card network. */
let first: Ctx;
let second: Ctx;
let slowFirst: Ctx;
let slowSecond: Ctx;

interface Charge {
  id: string;
  amount: number;
  captured: boolean;
  refunded: boolean;
  amount_refunded: number;
  expired_at: number | null;
}

/** Called at every clock read of the plain contexts (`first`, `second`): how a race sees its second caller take its turn. */
let onClockRead: () => void = () => undefined;
function watchedClock(ctx: Ctx): Ctx {
  const clock = new Proxy(ctx.clock, {
    get(target, property, receiver) {
      if (property === 'now') {
        return () => {
          onClockRead();
          return target.now();
        };
      }
      const value = Reflect.get(target, property, receiver) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { ...ctx, clock };
}

/** Resolves once a transaction of this database waits for a lock (a second caller blocked behind the first), or when `stop` settles. */
async function someoneBlocked(stop: Promise<unknown>): Promise<void> {
  let stopped = false;
  void stop.then(() => (stopped = true));
  while (!stopped) {
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND a.datname = current_database()`.execute(database.store.db);
    if (rows[0]!.n > 0) return;
  }
}

/**
 * Settles both calls: `a` (on a gated context) first; `b` once `a` is at the network (or done, if
 * it never goes there); the gate opens once `b` has read the clock (an operation reads it right
 * after locking its row, where it finds what `a` took), waits for a lock `a` holds, or is done. So
 * `a` has taken the row first and `b` meets it there.
 */
async function race<A, B>(a: () => Promise<A>, b: () => Promise<B>): Promise<[PromiseSettledResult<A>, PromiseSettledResult<B>]> {
  gate = newGate();
  const settle = <T>(p: Promise<T>) => Promise.allSettled([p]).then(([r]) => r!);
  const one = settle(a());
  await Promise.race([gate.reached, one]);
  let turn!: () => void;
  const tookTurn = new Promise<void>((resolve) => (turn = resolve));
  onClockRead = turn;
  const two = settle(b());
  await Promise.race([tookTurn, someoneBlocked(Promise.race([tookTurn, two])), two]);
  onClockRead = () => undefined;
  gate.open();
  return Promise.all([one, two]);
}

function codeOf(result: PromiseSettledResult<unknown>): string {
  if (result.status === 'fulfilled') return 'ok';
  if (result.reason instanceof KessaiError) return result.reason.code;
  throw result.reason;
}

function op<T = Charge>(ctx: Ctx, name: string, params?: unknown): Promise<T> {
  return runOperation(ctx, caller, name, params) as Promise<T>;
}

async function customer(): Promise<string> {
  const token = await op<{ id: string }>(first, 'tokens.create', { card: { number: TEST_CARDS.visa.number, exp_month: '12', exp_year: '2035', cvc: '123' } });
  return (await op<{ id: string }>(first, 'customers.create', { card: token.id })).id;
}

async function heldCharge(): Promise<Charge> {
  return op(first, 'charges.create', { amount: '1000', currency: 'jpy', customer: await customer(), capture: 'false' });
}

async function chargeRow(id: string) {
  return first.db.selectFrom('charges').selectAll().where('account_id', '=', caller.accountId).where('charge_id', '=', id).executeTakeFirstOrThrow();
}

async function eventTypes(id: string): Promise<string[]> {
  return (await listEvents(first.db, caller.accountId, { resourceId: id })).map((e) => e.type);
}

describe.runIf(isPostgres())('races on one charge or customer, two connection pools (PostgreSQL)', () => {
  beforeAll(async () => {
    database = await createTestDatabase();
    other = await database.openAnother();
    // Distinct seeds: the two "processes" must not draw the same ids.
    first = testContext(database.store, { seed: 151 });
    first = watchedClock(first);
    second = testContext(other, { seed: 152 });
    second = watchedClock(second);
    slowFirst = { ...testContext(database.store, { seed: 153 }), processor: gatedNetwork() };
    slowSecond = { ...testContext(other, { seed: 154 }), processor: gatedNetwork() };
    await createAccount(first, { name: 'Races Shop', id: caller.accountId });
  });
  afterAll(async () => database?.drop());

  it('two captures of one charge at once: one succeeds, the other is already_captured; one capture event', async () => {
    const held = await heldCharge();
    const [a, b] = await race(() => op(slowFirst, 'charges.capture', { id: held.id }), () => op(second, 'charges.capture', { id: held.id }));
    expect([codeOf(a), codeOf(b)]).toEqual(['ok', 'already_captured']);
    expect(await chargeRow(held.id)).toMatchObject({ captured: true, amount_captured: 1000 });
    expect((await eventTypes(held.id)).filter((t) => t === 'charge.captured')).toHaveLength(1);
  });

  it('two captures started together (no head start): exactly one succeeds', async () => {
    for (let round = 0; round < 5; round += 1) {
      const held = await heldCharge();
      const results = await Promise.allSettled([op(first, 'charges.capture', { id: held.id }), op(second, 'charges.capture', { id: held.id, amount: '900' })]);
      expect(results.map(codeOf).sort()).toEqual(['already_captured', 'ok']);
      const row = await chargeRow(held.id);
      const winner = results.findIndex((r) => r.status === 'fulfilled');
      expect(row.amount_captured).toBe(winner === 0 ? 1000 : 900);
    }
  });

  it('two refunds that together exceed the amount: one is refused (refund_amount_gt_net), never over-refunded', async () => {
    const paid = await op(first, 'charges.create', { amount: '1000', currency: 'jpy', customer: await customer() });
    // A refund of captured money does not ask the card network: the two are started together.
    const both = await Promise.allSettled([op(first, 'charges.refund', { id: paid.id, amount: '600' }), op(second, 'charges.refund', { id: paid.id, amount: '600' })]);
    expect(both.map(codeOf).sort()).toEqual(['ok', 'refund_amount_gt_net']);
    const refunds = await first.db.selectFrom('refunds').select('amount').where('account_id', '=', caller.accountId).where('charge_id', '=', paid.id).execute();
    expect(refunds.map((r) => r.amount)).toEqual([600]);
    expect(await chargeRow(paid.id)).toMatchObject({ amount_refunded: 600, refunded: false });
    // Many at once, no head start: the refunds never add up past the charge.
    const many = await Promise.allSettled([first, second, first, second].map((ctx) => op(ctx, 'charges.refund', { id: paid.id, amount: '300' })));
    expect(many.map(codeOf).sort()).toEqual(['ok', 'refund_amount_gt_net', 'refund_amount_gt_net', 'refund_amount_gt_net']);
    expect(await chargeRow(paid.id)).toMatchObject({ amount_refunded: 900 });
  });

  /** A capture at the last instant the hold is good, and the hold-expiry job's slot just after it. */
  async function captureAgainstExpiry(captureFirst: boolean): Promise<{ capture: string; released: number; row: Awaited<ReturnType<typeof chargeRow>>; events: string[] }> {
    const held = await heldCharge();
    const expiredAt = new Date(held.expired_at! * 1000);
    for (const ctx of [first, second, slowFirst, slowSecond]) ctx.clock.set(expiredAt);
    const slot = new Date(expiredAt.getTime() + 60_000);
    const capture = (ctx: Ctx) => op(ctx, 'charges.capture', { id: held.id });
    const expire = (ctx: Ctx) => ctx.db.transaction().execute((trx) => expireHoldBatch(trx, ctx, [caller.accountId], slot, 100));
    const [c, j] = captureFirst
      ? await race(() => capture(slowFirst), () => expire(second))
      : await race(() => expire(slowSecond), () => capture(first)).then(([job, cap]) => [cap, job] as const);
    if (j.status === 'rejected') throw j.reason;
    return { capture: codeOf(c), released: j.value.released, row: await chargeRow(held.id), events: await eventTypes(held.id) };
  }

  it('a capture racing the hold-expiry job: the one that locks the charge first decides, and there is one outcome', async () => {
    const captured = await captureAgainstExpiry(true);
    expect(captured.capture).toBe('ok');
    expect(captured.released).toBe(0);
    expect(captured.row).toMatchObject({ captured: true, released_at: null });
    expect(captured.events.filter((t) => t !== 'charge.succeeded')).toEqual(['charge.captured']);

    const released = await captureAgainstExpiry(false);
    expect(released.capture).toBe('charge_expired');
    expect(released.released).toBe(1);
    expect(released.row.captured).toBe(false);
    expect(released.row.released_at).not.toBeNull();
    expect(released.events.filter((t) => t !== 'charge.succeeded')).toEqual(['charge.updated']);
  });

  it('two subscriptions.create for one customer and plan at once: already_subscribed for one, one subscription and one charge', async () => {
    for (const clockOf of [slowFirst, first, second, slowSecond]) clockOf.clock.set(REFERENCE_INSTANT);
    const plan = await op<{ id: string }>(first, 'plans.create', { amount: '800', currency: 'jpy', interval: 'month' });
    const cus = await customer();
    const [a, b] = await race(() => op(slowFirst, 'subscriptions.create', { customer: cus, plan: plan.id }), () => op(second, 'subscriptions.create', { customer: cus, plan: plan.id }));
    expect([codeOf(a), codeOf(b)]).toEqual(['ok', 'already_subscribed']);
    const subscriptions = await first.db.selectFrom('subscriptions').select('subscription_id').where('account_id', '=', caller.accountId).where('customer_id', '=', cus).execute();
    expect(subscriptions).toHaveLength(1);
    const charges = await first.db.selectFrom('charges').select(['charge_id', 'paid']).where('account_id', '=', caller.accountId).where('customer_id', '=', cus).execute();
    expect(charges).toEqual([{ charge_id: expect.any(String), paid: true }]);

    // Started together, several times over: never two.
    const again = await customer();
    const results = await Promise.allSettled([first, second, first, second].map((ctx) => op(ctx, 'subscriptions.create', { customer: again, plan: plan.id })));
    expect(results.map(codeOf).sort()).toEqual(['already_subscribed', 'already_subscribed', 'already_subscribed', 'ok']);
  });

  it('a plan change onto a plan racing subscriptions.create of that plan for the same customer: already_subscribed for one', async () => {
    for (const ctx of [slowFirst, first, second, slowSecond]) ctx.clock.set(REFERENCE_INSTANT);
    const [basic, premium] = await Promise.all(['500', '900'].map((amount) => op<{ id: string }>(first, 'plans.create', { amount, currency: 'jpy', interval: 'month' })));
    const cus = await customer();
    const held = await op<{ id: string }>(first, 'subscriptions.create', { customer: cus, plan: basic!.id });
    // A day later (a plan change at the very instant of creation would charge the same period again).
    for (const ctx of [slowFirst, first, second, slowSecond]) ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 86_400_000));
    const [change, create] = await race(() => op(slowFirst, 'subscriptions.update', { id: held.id, plan: premium!.id }), () => op(second, 'subscriptions.create', { customer: cus, plan: premium!.id }));
    expect([codeOf(change), codeOf(create)]).toEqual(['ok', 'already_subscribed']);
    const onPremium = await first.db.selectFrom('subscriptions').select('subscription_id').where('account_id', '=', caller.accountId).where('customer_id', '=', cus).where('plan_id', '=', premium!.id).execute();
    expect(onPremium).toEqual([{ subscription_id: held.id }]);
  });

  it('a capture racing a refund of the same hold: the second waits for the first — a captured hold is then refunded in full, a cancelled one cannot be captured', async () => {
    const held = await heldCharge();
    const [capture, refund] = await race(() => op(slowFirst, 'charges.capture', { id: held.id }), () => op(second, 'charges.refund', { id: held.id }));
    expect(codeOf(capture)).toBe('ok');
    expect(codeOf(refund)).toBe('ok'); // the refund waited for the capture, then refunded the captured money
    expect(await chargeRow(held.id)).toMatchObject({ captured: true, refunded: true, amount_refunded: 1000 });
    const refunds = await first.db.selectFrom('refunds').select('amount').where('account_id', '=', caller.accountId).where('charge_id', '=', held.id).execute();
    expect(refunds.map((r) => r.amount)).toEqual([1000]);

    const other = await heldCharge();
    const [cancel, late] = await race(() => op(slowFirst, 'charges.refund', { id: other.id }), () => op(second, 'charges.capture', { id: other.id }));
    expect([codeOf(cancel), codeOf(late)]).toEqual(['ok', 'cant_capture_refunded_charge']);
    expect(await chargeRow(other.id)).toMatchObject({ captured: false, refunded: true, amount_captured: null });
  });
});

/**
 * Payment flow confirmation and the card network (ARCHITECTURE.md: "Network I/O never happens while
 * rows are locked"; exactly once): while the network is asked (authorize, authenticate, capture,
 * release), another connection can lock the flow's row (and, for a checkout session's completion,
 * the session's row); two confirmations or captures at once reach
 * the network once; a claim left by a crash is taken over after the lease and recorded once.
 *
 * PostgreSQL only: these need two connections at the same time, and PGlite is a single session.
 * Nothing here waits on a timer: a network call is held open on a promise the test releases.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SQL_DIR } from '../../src/db/migrate';
import { holdExpiryJob } from '../../jobs/hold-expiry';
import { Scheduler } from '../../src/engine/scheduler';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { type CheckoutSessionObject } from '../../src/checkout/checkout-sessions';
import { expireSessionBatch } from '../../src/checkout/session-expiry';
import type { PriceObject } from '../../src/prices/prices';
import { decodeCreateToken } from '../../src/api/v1/tokens';
import { createToken } from '../../src/customers/tokens';
import type { Store } from '../../src/db/connect';
import { KessaiError } from '../../src/domain/errors';
import { NETWORK_CLAIM_LEASE_MS } from '../../src/domain/network-claims';
import { listEvents } from '../../src/events/outbox';
import { simulatedCardNetwork, type CardNetwork } from '../../src/processor/card-network';
import type { SetupFlowObject } from '../../src/setup-flows/setup-flows';
import { TEST_CARDS, type TestCardName } from '../../src/processor/test-cards';
import { createTestDatabase, isPostgres, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';
import { createPaymentFlow, updatePaymentFlow, confirmPaymentFlow, completePaymentFlowAction, capturePaymentFlow, cancelPaymentFlow } from '../support/payment-flows';
import { probeRowLock, whileLocked, type ProbedRow } from '../support/row-locks';
import { v2Operation } from '../support/operations';
import type { PaymentFlowObject } from '../../src/payment-flows/payment-flow-object';

const retrievePaymentFlow = v2Operation<PaymentFlowObject>('payment_flows.retrieve');
const completeCheckoutSession = v2Operation<CheckoutSessionObject>('checkout.sessions.complete');
const createCheckoutSession = v2Operation<CheckoutSessionObject>('checkout.sessions.create');
const expireCheckoutSession = v2Operation<CheckoutSessionObject>('checkout.sessions.expire');
const retrieveCheckoutSession = v2Operation<CheckoutSessionObject>('checkout.sessions.retrieve');

const createPrice = v2Operation<PriceObject>('prices.create');
const createSetupFlow = v2Operation<SetupFlowObject>('setup_flows.create');
const confirmSetupFlow = v2Operation<SetupFlowObject>('setup_flows.confirm');
const updateSetupFlow = v2Operation<SetupFlowObject>('setup_flows.update');
const retrieveSetupFlow = v2Operation<SetupFlowObject>('setup_flows.retrieve');
const completeSetupFlowAction = v2Operation<SetupFlowObject>('setup_flows.complete_action');

const ACCOUNT = 'acct_flow_network';
const secret: Caller = { accountId: ACCOUNT, livemode: false, kind: 'secret' };
const browser: Caller = { accountId: ACCOUNT, livemode: false, kind: 'public' };

type Ctx = ReturnType<typeof testContext>;
let database: TestDatabase;
let other: Store;

/** What another connection saw of a flow's row while a network call was in flight. */
interface Probe {
  readonly call: 'authorize' | 'authenticate' | 'capture' | 'release' | 'refund';
  readonly flowId: string;
  /** `FOR UPDATE NOWAIT` from another connection got the lock. */
  readonly lockable: boolean;
  /** The flow's status as committed at that moment. */
  readonly status: string | undefined;
}

const rowOf = (id: string, table: 'payment_flows' | 'checkout_sessions' = 'payment_flows'): ProbedRow => ({
  table,
  key: { account_id: ACCOUNT, livemode: false, [table === 'payment_flows' ? 'payment_flow_id' : 'checkout_session_id']: id },
});

/** From the other connection: can the flow's (or the checkout session's) row be locked right now, and what status is committed? */
async function probeRow(id: string, table: 'payment_flows' | 'checkout_sessions' = 'payment_flows'): Promise<{ lockable: boolean; status: string | undefined }> {
  const { lock, row } = await probeRowLock(other.db, rowOf(id, table));
  return { lockable: lock === 'free', status: row?.status as string | undefined };
}

interface Gate {
  /** Resolves when the first held call has reached the network. */
  readonly reached: Promise<void>;
  release(): void;
}

function gate(): Gate & { arrive(): void; wait: Promise<void> } {
  let arrive!: () => void;
  let release!: () => void;
  const reached = new Promise<void>((resolve) => (arrive = resolve));
  const wait = new Promise<void>((resolve) => (release = resolve));
  return { reached, release, arrive, wait };
}

/**
 * The simulator, instrumented: every authorization and authentication is counted (with its
 * reference); `probe` checks the row from another connection during the call; `hold` keeps the
 * call open until released; `fail` throws as a process dying mid-call would leave things.
 */
function instrumentedNetwork(options: { probe?: Probe[]; sessionProbe?: { readonly id: string; readonly seen: Probe[] }; hold?: ReturnType<typeof gate>; fail?: boolean; calls: string[] }): CardNetwork {
  const network = simulatedCardNetwork();
  const during = async (call: Probe['call'], reference: string) => {
    options.calls.push(`${call}:${reference}`);
    if (options.probe) options.probe.push({ call, flowId: reference, ...(await probeRow(reference)) });
    if (options.sessionProbe) options.sessionProbe.seen.push({ call, flowId: reference, ...(await probeRow(options.sessionProbe.id, 'checkout_sessions')) });
    if (options.hold) {
      options.hold.arrive();
      await options.hold.wait;
    }
    if (options.fail) throw new Error('the process died while the network was asked');
  };
  return {
    authorize: async (requests) => (await during('authorize', requests[0]!.reference), network.authorize(requests)),
    authenticate: async (requests) => (await during('authenticate', requests[0]!.reference), network.authenticate(requests)),
    capture: async (requests) => (await during('capture', requests[0]!.reference), network.capture(requests)),
    release: async (requests) => (await during('release', requests[0]!.reference), network.release(requests)),
    refund: async (requests) => (await during('refund', requests[0]!.reference), network.refund(requests)),
  };
}

function withNetwork(store: Store, seed: number, processor: CardNetwork, at: Date = REFERENCE_INSTANT): Ctx {
  return { ...testContext(store, { seed, at }), processor };
}

let plain: Ctx;

async function token(card: TestCardName): Promise<string> {
  const spec = TEST_CARDS[card];
  return (await createToken(plain, browser, decodeCreateToken({ card: { number: spec.number, exp_month: 12, exp_year: 2030, cvc: '123' } }))).id;
}

const eventTypes = async (id: string) => (await listEvents(database.store.db, ACCOUNT, { resourceId: id })).map((event) => event.type);
const chargesOf = (id: string) => database.store.db.selectFrom('charges').select(['amount', 'payment_flow_capture']).where('account_id', '=', ACCOUNT).where('payment_flow_id', '=', id).execute();

function codeOf(result: PromiseSettledResult<unknown>): string {
  if (result.status === 'fulfilled') return 'ok';
  if (result.reason instanceof KessaiError) return result.reason.code;
  throw result.reason;
}

describe.runIf(isPostgres())('payment flow confirmation and the card network (PostgreSQL, two connections)', () => {
  beforeAll(async () => {
    database = await createTestDatabase();
    other = await database.openAnother();
    // One context for the plain calls of every test: its seeded ids run on from test to test.
    plain = testContext(database.store, { seed: 11 });
    await createAccount(plain, { name: 'Flow Network Shop', id: ACCOUNT });
  });
  afterAll(async () => database?.drop());

  it('the probe sees a lock when one is held (so its "lockable" below means something)', async () => {
    const flow = await createPaymentFlow(plain, secret, { amount: 1000 });
    const seen = await whileLocked(database.store.db, rowOf(flow.id), () => probeRow(flow.id));
    expect(seen).toEqual({ lockable: false, status: undefined });
    expect(await probeRow(flow.id)).toEqual({ lockable: true, status: 'requires_payment_method' });
  });

  it('no row lock while the network authorizes: confirm (automatic and manual), create with confirm=true; the claim is committed as processing', async () => {
    const probes: Probe[] = [];
    const ctx = withNetwork(database.store, 21, instrumentedNetwork({ probe: probes, calls: [] }));
    const automatic = await createPaymentFlow(ctx, secret, { amount: 1200 });
    expect(await confirmPaymentFlow(ctx, browser, { id: automatic.id, client_secret: automatic.client_secret, payment_method: await token('visa') })).toMatchObject({ status: 'succeeded' });
    const manual = await createPaymentFlow(ctx, secret, { amount: 1300, capture_method: 'manual' });
    expect(await confirmPaymentFlow(ctx, secret, { id: manual.id, payment_method: await token('mastercard') })).toMatchObject({ status: 'requires_capture' });
    const atOnce = await createPaymentFlow(ctx, secret, { amount: 1400, payment_method: await token('visa'), confirm: true });
    expect(atOnce).toMatchObject({ status: 'succeeded' });
    expect(probes).toEqual([
      { call: 'authorize', flowId: automatic.id, lockable: true, status: 'processing' },
      { call: 'authorize', flowId: manual.id, lockable: true, status: 'processing' },
      { call: 'authorize', flowId: atOnce.id, lockable: true, status: 'processing' },
    ]);
  });

  it('no row lock while the buyer authenticates and the card is authorized after the 3-D Secure return (complete_action)', async () => {
    const probes: Probe[] = [];
    const ctx = withNetwork(database.store, 22, instrumentedNetwork({ probe: probes, calls: [] }));
    const flow = await createPaymentFlow(ctx, secret, { amount: 1500, capture_method: 'manual' });
    expect(await confirmPaymentFlow(ctx, browser, { id: flow.id, client_secret: flow.client_secret, payment_method: await token('threeDSecureRequired') })).toMatchObject({ status: 'requires_action' });
    // Handing the challenge to the browser needs no network call.
    expect(probes).toEqual([]);
    expect(await completePaymentFlowAction(ctx, browser, { id: flow.id, client_secret: flow.client_secret })).toMatchObject({ status: 'requires_capture', three_d_secure_status: 'verified' });
    expect(probes).toEqual([
      { call: 'authenticate', flowId: flow.id, lockable: true, status: 'processing' },
      { call: 'authorize', flowId: flow.id, lockable: true, status: 'processing' },
    ]);
  });

  it('two confirmations at once: the second is refused at once (invalid_status) while the first is at the network; one authorization, one charge, one succeeded', async () => {
    const calls: string[] = [];
    const hold = gate();
    const slow = withNetwork(database.store, 31, instrumentedNetwork({ hold, calls }));
    const fast = withNetwork(other, 32, instrumentedNetwork({ calls }));
    const flow = await createPaymentFlow(plain, secret, { amount: 2000 });
    const [first, second] = [await token('visa'), await token('mastercard')];
    const one = confirmPaymentFlow(slow, browser, { id: flow.id, client_secret: flow.client_secret, payment_method: first });
    await hold.reached;
    // Not blocked behind the first (no lock is held), and refused without reaching the network.
    const two = await Promise.allSettled([confirmPaymentFlow(fast, browser, { id: flow.id, client_secret: flow.client_secret, payment_method: second })]);
    expect(two.map(codeOf)).toEqual(['invalid_status']);
    // A refused update leaves the claim alone, too.
    await expect(updatePaymentFlow(fast, secret, { id: flow.id, metadata: { note: 'late' } })).rejects.toMatchObject({ code: 'invalid_status' });
    hold.release();
    expect(await one).toMatchObject({ status: 'succeeded', amount_received: 2000 });
    expect(calls).toEqual([`authorize:${flow.id}`]);
    expect(await chargesOf(flow.id)).toEqual([{ amount: 2000, payment_flow_capture: 1 }]);
    expect(await eventTypes(flow.id)).toEqual(['payment_flow.created', 'payment_flow.processing', 'payment_flow.succeeded']);
    // The second buyer's token was never spent: the refusal changed nothing.
    const unused = await plain.db.selectFrom('tokens').select('used_at').where('account_id', '=', ACCOUNT).where('token_id', '=', second).executeTakeFirstOrThrow();
    expect(unused.used_at).toBeNull();
  });

  it('two confirmations started together on two connections, many rounds: exactly one succeeds and authorizes', async () => {
    for (let round = 0; round < 5; round += 1) {
      const calls: string[] = [];
      const a = withNetwork(database.store, 40 + round, instrumentedNetwork({ calls }));
      const b = withNetwork(other, 50 + round, instrumentedNetwork({ calls }));
      const flow = await createPaymentFlow(plain, secret, { amount: 2100 });
      const [ta, tb] = [await token('visa'), await token('visa')];
      const results = await Promise.allSettled([
        confirmPaymentFlow(a, secret, { id: flow.id, payment_method: ta }),
        confirmPaymentFlow(b, secret, { id: flow.id, payment_method: tb }),
      ]);
      expect(results.map(codeOf).sort()).toEqual(['invalid_status', 'ok']);
      expect(calls).toEqual([`authorize:${flow.id}`]);
      expect(await chargesOf(flow.id)).toHaveLength(1);
    }
  });

  it('a claim left by a crash: refused while fresh, taken over after the lease by the next confirmation, which finishes the claimed payment once', async () => {
    const calls: string[] = [];
    const crashing = withNetwork(database.store, 61, instrumentedNetwork({ fail: true, calls }));
    const flow = await createPaymentFlow(plain, secret, { amount: 2200, capture_method: 'manual' });
    const claimed = await token('visa');
    await expect(confirmPaymentFlow(crashing, secret, { id: flow.id, payment_method: claimed })).rejects.toThrow('the process died');
    expect(await retrievePaymentFlow(plain, secret, { id: flow.id })).toMatchObject({ status: 'processing', payment_method: claimed });
    const later = withNetwork(other, 62, instrumentedNetwork({ calls }), new Date(REFERENCE_INSTANT.getTime() + NETWORK_CLAIM_LEASE_MS - 1000));
    await expect(confirmPaymentFlow(later, secret, { id: flow.id, payment_method: await token('mastercard') })).rejects.toMatchObject({ code: 'invalid_status' });
    later.clock.set(new Date(REFERENCE_INSTANT.getTime() + NETWORK_CLAIM_LEASE_MS));
    // The takeover finishes the payment it finds claimed (the first card), whatever this call names.
    const done = await confirmPaymentFlow(later, secret, { id: flow.id, payment_method: await token('mastercard') });
    expect(done).toMatchObject({ status: 'requires_capture', amount_capturable: 2200, payment_method: claimed });
    // Both authorizations carried the flow id as their reference (the network's idempotency key).
    expect(calls).toEqual([`authorize:${flow.id}`, `authorize:${flow.id}`]);
    expect(await eventTypes(flow.id)).toEqual(['payment_flow.created', 'payment_flow.processing', 'payment_flow.amount_capturable_updated']);
  });

  it('a claimer overtaken after the lease: its late answer is dropped, the payment recorded once', async () => {
    const calls: string[] = [];
    const hold = gate();
    const stale = withNetwork(database.store, 71, instrumentedNetwork({ hold, calls }));
    const flow = await createPaymentFlow(plain, secret, { amount: 2300 });
    const one = confirmPaymentFlow(stale, secret, { id: flow.id, payment_method: await token('visa') });
    await hold.reached;
    const taker = withNetwork(other, 72, instrumentedNetwork({ calls }), new Date(REFERENCE_INSTANT.getTime() + NETWORK_CLAIM_LEASE_MS));
    expect(await confirmPaymentFlow(taker, secret, { id: flow.id })).toMatchObject({ status: 'succeeded', amount_received: 2300 });
    hold.release();
    // The stale claimer answers what was recorded, and records nothing of its own.
    expect(await one).toMatchObject({ status: 'succeeded', amount_received: 2300 });
    expect(await chargesOf(flow.id)).toEqual([{ amount: 2300, payment_flow_capture: 1 }]);
    expect(await eventTypes(flow.id)).toEqual(['payment_flow.created', 'payment_flow.processing', 'payment_flow.succeeded']);
  });

  it('a 3-D Secure return whose claim died is taken over by the next complete_action, authenticating again', async () => {
    const calls: string[] = [];
    const flow = await createPaymentFlow(plain, secret, { amount: 2400 });
    await confirmPaymentFlow(plain, browser, { id: flow.id, client_secret: flow.client_secret, payment_method: await token('threeDSecureRequired') });
    const crashing = withNetwork(database.store, 81, instrumentedNetwork({ fail: true, calls }));
    await expect(completePaymentFlowAction(crashing, browser, { id: flow.id, client_secret: flow.client_secret })).rejects.toThrow('the process died');
    const later = withNetwork(other, 82, instrumentedNetwork({ calls }), new Date(REFERENCE_INSTANT.getTime() + NETWORK_CLAIM_LEASE_MS));
    expect(await completePaymentFlowAction(later, browser, { id: flow.id, client_secret: flow.client_secret })).toMatchObject({ status: 'succeeded', three_d_secure_status: 'verified' });
    expect(calls).toEqual([`authenticate:${flow.id}`, `authenticate:${flow.id}`, `authorize:${flow.id}`]);
    expect(await eventTypes(flow.id)).toEqual(['payment_flow.created', 'payment_flow.requires_action', 'payment_flow.processing', 'payment_flow.succeeded']);
  });

  /** A manual-capture flow holding `amount` on a Visa card, confirmed with the plain network. */
  async function held(amount: number): Promise<string> {
    return (await createPaymentFlow(plain, secret, { amount, capture_method: 'manual', payment_method: await token('visa'), confirm: true })).id;
  }

  it('no row lock while the network captures or releases: capture (partial, then the rest) and cancel of a hold', async () => {
    const probes: Probe[] = [];
    const ctx = withNetwork(database.store, 91, instrumentedNetwork({ probe: probes, calls: [] }));
    const captured = await held(3000);
    expect(await capturePaymentFlow(ctx, secret, { id: captured, amount_to_capture: 1000 })).toMatchObject({ status: 'requires_capture', amount_received: 1000, amount_capturable: 2000 });
    expect(await capturePaymentFlow(ctx, secret, { id: captured })).toMatchObject({ status: 'succeeded', amount_received: 3000, amount_capturable: 0 });
    const canceled = await held(3100);
    expect(await cancelPaymentFlow(ctx, secret, { id: canceled, cancellation_reason: 'requested_by_customer' })).toMatchObject({ status: 'canceled', cancellation_reason: 'requested_by_customer', amount_capturable: 0 });
    expect(probes).toEqual([
      { call: 'capture', flowId: captured, lockable: true, status: 'processing' },
      { call: 'capture', flowId: captured, lockable: true, status: 'processing' },
      { call: 'release', flowId: canceled, lockable: true, status: 'processing' },
    ]);
    expect((await chargesOf(captured)).map((c) => c.amount)).toEqual([1000, 2000]);
    expect(await eventTypes(canceled)).toEqual(['payment_flow.created', 'payment_flow.processing', 'payment_flow.amount_capturable_updated', 'payment_flow.canceled']);
  });

  it('a capture and a cancel at once: the second is refused while the first is at the network; one capture, no release', async () => {
    const calls: string[] = [];
    const hold = gate();
    const slow = withNetwork(database.store, 92, instrumentedNetwork({ hold, calls }));
    const fast = withNetwork(other, 93, instrumentedNetwork({ calls }));
    const flow = await held(3200);
    const one = capturePaymentFlow(slow, secret, { id: flow });
    await hold.reached;
    const refused = await Promise.allSettled([capturePaymentFlow(fast, secret, { id: flow }), cancelPaymentFlow(fast, secret, { id: flow })]);
    expect(refused.map(codeOf)).toEqual(['invalid_status', 'invalid_status']);
    hold.release();
    expect(await one).toMatchObject({ status: 'succeeded', amount_received: 3200 });
    expect(calls).toEqual([`capture:${flow}`]);
    expect(await chargesOf(flow)).toEqual([{ amount: 3200, payment_flow_capture: 1 }]);
  });

  it('a capture whose claim died: refused while fresh; after the lease the next capture finishes the claimed amount once', async () => {
    const calls: string[] = [];
    const flow = await held(3300);
    const crashing = withNetwork(database.store, 94, instrumentedNetwork({ fail: true, calls }));
    await expect(capturePaymentFlow(crashing, secret, { id: flow, amount_to_capture: 1300 })).rejects.toThrow('the process died');
    expect(await retrievePaymentFlow(plain, secret, { id: flow })).toMatchObject({ status: 'processing', amount_received: 0 });
    // A confirmation never takes over a capture's claim, and a cancel cannot end it.
    const later = withNetwork(other, 95, instrumentedNetwork({ calls }), new Date(REFERENCE_INSTANT.getTime() + NETWORK_CLAIM_LEASE_MS));
    await expect(confirmPaymentFlow(later, secret, { id: flow })).rejects.toMatchObject({ code: 'invalid_status' });
    await expect(cancelPaymentFlow(later, secret, { id: flow })).rejects.toMatchObject({ code: 'invalid_status' });
    // The takeover captures what was claimed (1300), not what this call asks.
    expect(await capturePaymentFlow(later, secret, { id: flow })).toMatchObject({ status: 'requires_capture', amount_received: 1300, amount_capturable: 2000 });
    expect(calls).toEqual([`capture:${flow}`, `capture:${flow}`]);
    expect(await chargesOf(flow)).toEqual([{ amount: 1300, payment_flow_capture: 1 }]);
  });

  it('setup flows keep their claim too: an update while the card is verified is refused, and the verification is recorded', async () => {
    const calls: string[] = [];
    const hold = gate();
    const slow = withNetwork(database.store, 96, instrumentedNetwork({ hold, calls }));
    const fast = withNetwork(other, 97, instrumentedNetwork({ calls }));
    const flow = await createSetupFlow(plain, secret, {});
    const one = confirmSetupFlow(slow, secret, { id: flow.id, payment_method_id: await token('visa') });
    await hold.reached;
    await expect(updateSetupFlow(fast, secret, { id: flow.id, metadata: { note: 'late' } })).rejects.toMatchObject({ code: 'invalid_status' });
    hold.release();
    expect(await one).toMatchObject({ status: 'succeeded', metadata: {} });
    // The 1-yen verification: authorized and released once.
    expect(calls).toEqual([`authorize:${flow.id}`, `release:${flow.id}`]);
  });

  it.each([
    ['confirm', 'visa', 1],
    ['complete_action (3-D Secure: the claim\'s recovery point moved to the authenticated verification)', 'threeDSecureRequired', 2],
  ] as const)('a setup flow verification that died after the network approved (%s): the hold-expiry job releases it once; the next confirmation takes the flow over and succeeds once', async (_path, card, minute) => {
    const calls: string[] = [];
    const counted = simulatedCardNetwork();
    const counting: CardNetwork = {
      ...counted,
      authorize: async (requests) => (calls.push(...requests.map((r) => `authorize:${r.reference}${r.threeDSecure ? `:${r.threeDSecure}` : ''}`)), counted.authorize(requests)),
      release: async (requests) => (calls.push(...requests.map((r) => `release:${r.reference}`)), counted.release(requests)),
    };
    const dying: CardNetwork = {
      ...counting,
      authorize: async (requests) => {
        await counting.authorize(requests);
        throw new Error('the process died after the network approved');
      },
    };
    const flow = await createSetupFlow(plain, secret, {});
    const crashed = withNetwork(database.store, 110 + minute, dying);
    if (card === 'visa') {
      await expect(confirmSetupFlow(crashed, secret, { id: flow.id, payment_method_id: await token(card) })).rejects.toThrow('the process died');
    } else {
      expect(await confirmSetupFlow(plain, secret, { id: flow.id, payment_method_id: await token(card) })).toMatchObject({ status: 'requires_action' });
      await expect(completeSetupFlowAction(crashed, secret, { id: flow.id })).rejects.toThrow('the process died');
    }
    const verified = card === 'visa' ? `authorize:${flow.id}` : `authorize:${flow.id}:verified`;
    expect(calls).toEqual([verified]);
    expect(await retrieveSetupFlow(plain, secret, { id: flow.id })).toMatchObject({ status: 'processing' });
    // The job at the lease's end: the verification asked again as it was made (the same answer) and released, once.
    const slot = new Date(REFERENCE_INSTANT.getTime() + minute * NETWORK_CLAIM_LEASE_MS);
    const job = withNetwork(database.store, 120 + minute, counting, slot);
    const outcome = await new Scheduler(job, [holdExpiryJob], { owner: `setup-claims-${minute}` }).runSlot(holdExpiryJob.name, slot);
    expect(outcome).toMatchObject({ status: 'succeeded', counts: { claims_recovered: 1 } });
    expect(calls).toEqual([verified, verified, `release:${flow.id}`]);
    // Undone, not finished: the flow stays processing (no claim now), and the next confirmation takes it over.
    expect(await retrieveSetupFlow(plain, secret, { id: flow.id })).toMatchObject({ status: 'processing' });
    const later = withNetwork(database.store, 130 + minute, counting, slot);
    expect(await confirmSetupFlow(later, secret, { id: flow.id })).toMatchObject({ status: 'succeeded' });
    expect(calls.slice(3)).toEqual([verified, `release:${flow.id}`]);
    expect((await eventTypes(flow.id)).filter((t) => t === 'setup_flow.succeeded')).toHaveLength(1);
  });

  it('a capture and a release whose calls died, nobody coming back: the hold-expiry job finishes each as it was claimed, once', async () => {
    const calls: string[] = [];
    const capturing = await held(2700);
    const releasing = await held(2800);
    const crashing = withNetwork(database.store, 160, instrumentedNetwork({ fail: true, calls }));
    await expect(capturePaymentFlow(crashing, secret, { id: capturing, amount_to_capture: 700 })).rejects.toThrow('the process died');
    await expect(cancelPaymentFlow(crashing, secret, { id: releasing, cancellation_reason: 'duplicate' })).rejects.toThrow('the process died');
    const runAt = async (minutes: number) => {
      const slot = new Date(REFERENCE_INSTANT.getTime() + minutes * NETWORK_CLAIM_LEASE_MS);
      const job = withNetwork(database.store, 161 + minutes, instrumentedNetwork({ calls }), slot);
      const outcome = await new Scheduler(job, [holdExpiryJob], { owner: `flow-claims-${minutes}` }).runSlot(holdExpiryJob.name, slot);
      expect(outcome).toMatchObject({ status: 'succeeded' });
      return outcome.counts;
    };
    expect(await runAt(3)).toMatchObject({ claims_recovered: 2 });
    expect(await runAt(4)).not.toHaveProperty('claims_recovered');
    expect(calls).toEqual([`capture:${capturing}`, `release:${releasing}`, `capture:${capturing}`, `release:${releasing}`]);
    expect(await retrievePaymentFlow(plain, secret, { id: capturing })).toMatchObject({ status: 'requires_capture', amount_received: 700, amount_capturable: 2000 });
    expect(await retrievePaymentFlow(plain, secret, { id: releasing })).toMatchObject({ status: 'canceled', cancellation_reason: 'duplicate', amount_capturable: 0 });
    expect(await chargesOf(capturing)).toEqual([{ amount: 700, payment_flow_capture: 1 }]);
    expect((await eventTypes(releasing)).filter((t) => t === 'payment_flow.canceled')).toHaveLength(1);
  });

  it('sql/000250 gives a processing setup flow without a claim row (as the earlier code left it) its claim: refused while fresh, taken over after the lease', async () => {
    const flow = await createSetupFlow(plain, secret, {});
    await expect(confirmSetupFlow(withNetwork(database.store, 140, instrumentedNetwork({ fail: true, calls: [] })), secret, { id: flow.id, payment_method_id: await token('visa') })).rejects.toThrow('the process died');
    const db = database.store.db;
    const claimOf = () => db.selectFrom('network_claims').select(['operation', 'claimed_at', 'lease_until', 'recovery']).where('resource', '=', 'setup_flow').where('resource_id', '=', flow.id).executeTakeFirst();
    expect(await claimOf()).toMatchObject({ operation: 'setup_flows.confirm', claimed_at: REFERENCE_INSTANT });
    await db.deleteFrom('network_claims').where('resource', '=', 'setup_flow').where('resource_id', '=', flow.id).execute();
    await sql.raw(readFileSync(join(SQL_DIR, '000250_setup_flow_claims.sql'), 'utf8')).execute(db);
    expect(await claimOf()).toEqual({ operation: 'setup_flows.confirm', claimed_at: REFERENCE_INSTANT, lease_until: new Date(REFERENCE_INSTANT.getTime() + NETWORK_CLAIM_LEASE_MS), recovery: { authorizations: [] } });
    const calls: string[] = [];
    const fresh = withNetwork(database.store, 141, instrumentedNetwork({ calls }), new Date(REFERENCE_INSTANT.getTime() + NETWORK_CLAIM_LEASE_MS - 1));
    await expect(confirmSetupFlow(fresh, secret, { id: flow.id })).rejects.toMatchObject({ code: 'invalid_status' });
    const later = withNetwork(database.store, 142, instrumentedNetwork({ calls }), new Date(REFERENCE_INSTANT.getTime() + NETWORK_CLAIM_LEASE_MS));
    expect(await confirmSetupFlow(later, secret, { id: flow.id })).toMatchObject({ status: 'succeeded' });
    expect(calls).toEqual([`authorize:${flow.id}`, `release:${flow.id}`]);
    expect(await claimOf()).toBeUndefined();
  });

  it('sql/000290 gives payment flows left processing by the earlier code (a confirmation, a capture) their claims: refused while fresh, taken over after the lease', async () => {
    const db = database.store.db;
    const confirming = await createPaymentFlow(plain, secret, { amount: 2500, capture_method: 'manual' });
    const card = await token('visa');
    await expect(confirmPaymentFlow(withNetwork(database.store, 150, instrumentedNetwork({ fail: true, calls: [] })), secret, { id: confirming.id, payment_method: card })).rejects.toThrow('the process died');
    const capturing = await held(2600);
    await expect(capturePaymentFlow(withNetwork(database.store, 151, instrumentedNetwork({ fail: true, calls: [] })), secret, { id: capturing, amount_to_capture: 600 })).rejects.toThrow('the process died');
    // As the earlier code left them: no claim rows; the capture's work in the flow's network_claim column.
    await db.deleteFrom('network_claims').where('resource', '=', 'payment_flow').where('resource_id', 'in', [confirming.id, capturing]).execute();
    await sql`ALTER TABLE payment_flows ADD COLUMN network_claim jsonb`.execute(db);
    await sql`UPDATE payment_flows SET network_claim = ${JSON.stringify({ op: 'capture', amount: 600 })}::jsonb WHERE account_id = ${ACCOUNT} AND payment_flow_id = ${capturing}`.execute(db);
    await sql.raw(readFileSync(join(SQL_DIR, '000290_payment_flow_claims.sql'), 'utf8')).execute(db);
    const claimOf = (id: string) => db.selectFrom('network_claims').select(['operation', 'claimed_at', 'lease_until', 'recovery']).where('resource', '=', 'payment_flow').where('resource_id', '=', id).executeTakeFirst();
    const lease = { claimed_at: REFERENCE_INSTANT, lease_until: new Date(REFERENCE_INSTANT.getTime() + NETWORK_CLAIM_LEASE_MS) };
    expect(await claimOf(confirming.id)).toEqual({ operation: 'payment_flows.confirm', ...lease, recovery: { authorizations: [], work: { op: 'confirm' } } });
    expect(await claimOf(capturing)).toEqual({ operation: 'payment_flows.capture', ...lease, recovery: { authorizations: [], work: { op: 'capture', amount: 600 } } });
    const calls: string[] = [];
    const fresh = withNetwork(database.store, 152, instrumentedNetwork({ calls }), new Date(REFERENCE_INSTANT.getTime() + NETWORK_CLAIM_LEASE_MS - 1));
    await expect(confirmPaymentFlow(fresh, secret, { id: confirming.id })).rejects.toMatchObject({ code: 'invalid_status' });
    await expect(capturePaymentFlow(fresh, secret, { id: capturing })).rejects.toMatchObject({ code: 'invalid_status' });
    const later = withNetwork(database.store, 153, instrumentedNetwork({ calls }), new Date(REFERENCE_INSTANT.getTime() + NETWORK_CLAIM_LEASE_MS));
    expect(await confirmPaymentFlow(later, secret, { id: confirming.id })).toMatchObject({ status: 'requires_capture', amount_capturable: 2500, payment_method: card });
    // The capture claimed (600), not the whole hold this call asks for.
    expect(await capturePaymentFlow(later, secret, { id: capturing })).toMatchObject({ status: 'requires_capture', amount_received: 600, amount_capturable: 2000 });
    expect(calls).toEqual([`authorize:${confirming.id}`, `capture:${capturing}`]);
    expect(await claimOf(confirming.id)).toBeUndefined();
    expect(await claimOf(capturing)).toBeUndefined();
  });

  /** An open payment session of `amount` yen (one line item), as the hosted page completes it. */
  async function checkoutSession(amount: number, captureMethod: 'automatic' | 'manual' = 'automatic'): Promise<string> {
    const price = await createPrice(plain, secret, { unit_amount: amount });
    return (await createCheckoutSession(plain, secret, { line_items: [{ price: price.id, quantity: 1 }], success_url: 'https://shop.test/ok', payment_flow_data: { capture_method: captureMethod } })).id;
  }
  const completedEvents = async (sessionId: string) => (await listEvents(database.store.db, ACCOUNT, { type: 'checkout.session.completed' })).filter((e) => e.data.id === sessionId).length;

  it('checkout session completion: neither the session nor its flow is locked while the buyer authenticates and the card is authorized; the session completes once', async () => {
    const probes: Probe[] = [];
    const sessionId = await checkoutSession(3400, 'manual');
    const sessionSeen: Probe[] = [];
    // The probe's control for the session's table: it says "not lockable" while the row is held.
    expect(await whileLocked(database.store.db, rowOf(sessionId, 'checkout_sessions'), () => probeRow(sessionId, 'checkout_sessions'))).toEqual({ lockable: false, status: undefined });
    const ctx = withNetwork(database.store, 101, instrumentedNetwork({ probe: probes, sessionProbe: { id: sessionId, seen: sessionSeen }, calls: [] }));
    const completed = await completeCheckoutSession(ctx, browser, { id: sessionId, payment_method: await token('threeDSecureRequired') });
    expect(completed).toMatchObject({ status: 'complete', amount_total: 3400 });
    const flowId = completed.payment_flow!;
    expect(probes).toEqual([
      { call: 'authenticate', flowId, lockable: true, status: 'processing' },
      { call: 'authorize', flowId, lockable: true, status: 'processing' },
    ]);
    // The session is completed with the answer, after the network: open (and lockable) while it was asked.
    expect(sessionSeen).toEqual([
      { call: 'authenticate', flowId, lockable: true, status: 'open' },
      { call: 'authorize', flowId, lockable: true, status: 'open' },
    ]);
    expect(await retrievePaymentFlow(plain, secret, { id: flowId })).toMatchObject({ status: 'requires_capture', amount_capturable: 3400, three_d_secure_status: 'verified' });
    expect(await completedEvents(sessionId)).toBe(1);
  });

  it('two checkout completions at once: the second, the merchant\'s expire and the expiry job leave the session to the first while it is at the network; one authorization, one completed event', async () => {
    const calls: string[] = [];
    const hold = gate();
    const sessionId = await checkoutSession(3500);
    const slow = withNetwork(database.store, 111, instrumentedNetwork({ hold, calls }));
    const fast = withNetwork(other, 112, instrumentedNetwork({ calls }));
    const [first, second] = [await token('visa'), await token('mastercard')];
    const one = completeCheckoutSession(slow, browser, { id: sessionId, payment_method: first });
    await hold.reached;
    // Not blocked behind the first (no lock is held), and refused without reaching the network.
    await expect(completeCheckoutSession(fast, browser, { id: sessionId, payment_method: second })).rejects.toMatchObject({ code: 'invalid_status' });
    // A session being paid is not expired: the merchant is refused, and the job does not take it
    // even at a slot past its expires_at (it would select nothing else here).
    await expect(expireCheckoutSession(fast, secret, { id: sessionId })).rejects.toMatchObject({ code: 'invalid_status' });
    const afterExpiry = new Date(REFERENCE_INSTANT.getTime() + 30 * 60 * 60 * 1000);
    expect(await other.db.transaction().execute((trx) => expireSessionBatch(trx, fast, [ACCOUNT], afterExpiry, 100))).toMatchObject({ expired: 0 });
    expect(await probeRow(sessionId, 'checkout_sessions')).toEqual({ lockable: true, status: 'open' });
    hold.release();
    const done = await one;
    expect(done).toMatchObject({ status: 'complete' });
    expect(calls).toEqual([`authorize:${done.payment_flow}`]);
    expect(await chargesOf(done.payment_flow!)).toEqual([{ amount: 3500, payment_flow_capture: 1 }]);
    expect(await completedEvents(sessionId)).toBe(1);
  });

  it('two checkout completions started together on two connections, many rounds: one completes and authorizes, the other is refused', async () => {
    for (let round = 0; round < 5; round += 1) {
      const calls: string[] = [];
      const sessionId = await checkoutSession(3600);
      const a = withNetwork(database.store, 120 + round, instrumentedNetwork({ calls }));
      const b = withNetwork(other, 130 + round, instrumentedNetwork({ calls }));
      const [ta, tb] = [await token('visa'), await token('visa')];
      const results = await Promise.allSettled([completeCheckoutSession(a, browser, { id: sessionId, payment_method: ta }), completeCheckoutSession(b, browser, { id: sessionId, payment_method: tb })]);
      expect(results.map(codeOf).sort()).toEqual(['invalid_status', 'ok']);
      const session = await retrieveCheckoutSession(plain, secret, { id: sessionId });
      expect(session.status).toBe('complete');
      expect(calls).toEqual([`authorize:${session.payment_flow}`]);
      expect(await chargesOf(session.payment_flow!)).toHaveLength(1);
      expect(await completedEvents(sessionId)).toBe(1);
    }
  });
});

/**
 * `refund.failed` (v2 §6.1) through `@payjp/payjpv2` against the real server: a refund to the
 * `refundFails` test card (4000000000005126) is refused by the issuer, so the refund ends `failed`
 * with `refund.failed` and no money moves (no refund rows, the capture unrefunded, no refund
 * transaction); the same refund to a Visa card succeeds with `refund.created`. And a refund whose
 * request died at the network (its claim in network_claims lapsed) is finished once: by the flow's
 * next refund request after the lease, or by the hold-expiry job when nobody comes back.
 */
import * as v2 from '@payjp/payjpv2';
import type { Client } from '@payjp/payjpv2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NETWORK_CLAIM_LEASE_MS } from '../../src/domain/network-claims';
import { holdExpiryJob } from '../../jobs/hold-expiry';
import { Scheduler } from '../../src/engine/scheduler';
import { runOperation } from '../../src/api/operations';
import type { Caller } from '../../src/accounts/accounts';
import type { Context } from '../../src/engine/context';
import type { PaymentRefundObject } from '../../src/payment-refunds/payment-refunds';
import { simulatedCardNetwork, type CardNetwork } from '../../src/processor/card-network';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { testContext } from '../support/database';
import { startTestServer, type TestServer } from '../support/http-server';
import { ok, v2CardMethod, v2Client, v2EventTypes } from '../support/v2-sdk';

const createPaymentRefund = (ctx: Context, caller: Caller, input: unknown) => runOperation(ctx, caller, 'payment_refunds.create', input) as Promise<PaymentRefundObject>;

describe.each(['harness', 'pglite'] as const)('v2 refunds the issuer refuses (%s)', (backend) => {
  let server: TestServer;
  let client: Client;

  beforeAll(async () => {
    server = await startTestServer(backend);
    client = v2Client(server, server.keys.a.test.secret);
  });
  afterAll(async () => server?.close());

  async function paidFlow(number: string, amount: number) {
    const pm = await v2CardMethod(client, number);
    const flow = await ok(v2.createPaymentFlow({ client, body: { amount, currency: 'jpy', payment_method_id: pm.id, confirm: true } }));
    expect(flow).toMatchObject({ status: 'succeeded', amount_received: amount });
    return flow;
  }

  /** What the refunds moved: refund rows and the captures' refunded amounts of the flow. */
  async function money(flowId: string) {
    const db = server.ctx.db;
    const captures = await db.selectFrom('charges').select(['charge_id', 'amount_refunded', 'refunded']).where('account_id', '=', 'acct_http_a').where('payment_flow_id', '=', flowId).execute();
    const refunds = await db.selectFrom('refunds').select('amount').where('account_id', '=', 'acct_http_a').where('charge_id', 'in', captures.map((c) => c.charge_id)).execute();
    return { refunded: captures.reduce((sum, c) => sum + c.amount_refunded, 0), refundRows: refunds.map((r) => r.amount) };
  }

  async function refundTransactions(flowId: string, refundIds: readonly string[]) {
    const listed = await ok(v2.getAllPaymentTransactions({ client, query: { type: 'refund', limit: 100 } as never }));
    return listed.data.filter((t) => refundIds.includes((t as { resource_id: string }).resource_id) || (t as { resource_id: string }).resource_id === flowId);
  }

  it('a refund to the refundFails card ends failed with refund.failed; nothing moves, and a later refund is refused again', async () => {
    const flow = await paidFlow(TEST_CARDS.refundFails.number, 6_000);
    const refund = await ok(v2.createPaymentRefund({ client, body: { payment_flow_id: flow.id, amount: 2_500, reason: 'requested_by_customer' } }));
    expect(refund).toMatchObject({ object: 'payment_refund', payment_flow_id: flow.id, amount: 2_500, status: 'failed' });
    expect(await ok(v2.getPaymentRefund({ client, path: { payment_refund_id: refund.id } }))).toMatchObject({ status: 'failed' });
    expect(await v2EventTypes(client, refund.id)).toEqual(['refund.failed']);
    const [failedEvent] = (await ok(v2.getAllEvents({ client, query: { type: 'refund.failed', resource_id: refund.id } }))).data;
    expect(failedEvent).toMatchObject({ type: 'refund.failed', data: { id: refund.id, status: 'failed', amount: 2_500 } });
    expect(await money(flow.id)).toEqual({ refunded: 0, refundRows: [] });
    expect(await refundTransactions(flow.id, [refund.id])).toEqual([]);
    // A failed refund reserves nothing: the whole payment can still be asked for, and is refused again.
    const whole = await ok(v2.createPaymentRefund({ client, body: { payment_flow_id: flow.id } }));
    expect(whole).toMatchObject({ amount: 6_000, status: 'failed' });
    expect(await money(flow.id)).toEqual({ refunded: 0, refundRows: [] });
  });

  it('the same refund to a Visa card succeeds with refund.created and moves the money', async () => {
    const flow = await paidFlow(TEST_CARDS.visa.number, 6_000);
    const refund = await ok(v2.createPaymentRefund({ client, body: { payment_flow_id: flow.id, amount: 2_500 } }));
    expect(refund).toMatchObject({ amount: 2_500, status: 'succeeded' });
    expect(await v2EventTypes(client, refund.id)).toEqual(['refund.created']);
    expect(await money(flow.id)).toEqual({ refunded: 2_500, refundRows: [2_500] });
    expect((await refundTransactions(flow.id, [refund.id])).map((t) => t.amount)).toEqual([-2_500]);
  });

  it('a refund whose request died at the network: pending, its amount reserved; after the lease the next refund request finishes it once, then makes its own', async () => {
    const flow = await paidFlow(TEST_CARDS.visa.number, 5_000);
    const asked: string[] = [];
    const plain = simulatedCardNetwork();
    const dying: CardNetwork = {
      ...plain,
      refund: async (requests) => {
        asked.push(...requests.map((r) => r.reference));
        throw new Error('the process died at the network');
      },
    };
    const caller = { accountId: 'acct_http_a', livemode: false, kind: 'secret' } as const;
    const at = server.ctx.clock.now();
    const crashed = { ...testContext(server.ctx.store, { at, seed: 71 }), processor: dying };
    await expect(createPaymentRefund(crashed, caller, { payment_flow_id: flow.id, amount: 2_000 })).rejects.toThrow('the process died');
    const [pending] = (await ok(v2.getPaymentFlowRefunds({ client, path: { payment_flow_id: flow.id } }))).data as { id: string; status: string; amount: number }[];
    expect(pending).toMatchObject({ status: 'pending', amount: 2_000 });
    // Reserved while the claim is fresh: only 3,000 is left to refund.
    const fresh = { ...testContext(server.ctx.store, { at: new Date(at.getTime() + 1_000), seed: 72 }), processor: plain };
    await expect(createPaymentRefund(fresh, caller, { payment_flow_id: flow.id, amount: 3_001 })).rejects.toMatchObject({ code: 'refund_amount_gt_net' });
    const counting: CardNetwork = { ...plain, refund: async (requests) => (asked.push(...requests.map((r) => r.reference)), plain.refund(requests)) };
    const later = { ...testContext(server.ctx.store, { at: new Date(at.getTime() + NETWORK_CLAIM_LEASE_MS), seed: 73 }), processor: counting };
    const own = await createPaymentRefund(later, caller, { payment_flow_id: flow.id, amount: 1_000 });
    expect(own).toMatchObject({ status: 'succeeded', amount: 1_000 });
    expect(await ok(v2.getPaymentRefund({ client, path: { payment_refund_id: pending!.id } }))).toMatchObject({ status: 'succeeded', amount: 2_000 });
    // The taken-over refund was asked again under its own reference, then the new one once.
    expect(asked).toEqual([pending!.id, pending!.id, own.id]);
    expect(await money(flow.id)).toEqual({ refunded: 3_000, refundRows: [2_000, 1_000] });
    expect(await v2EventTypes(client, pending!.id)).toEqual(['refund.created']);
  });

  it('a refund whose request died at the network and nobody came back: the hold-expiry job finishes it once after the lease, and counts it', async () => {
    const flow = await paidFlow(TEST_CARDS.visa.number, 4_000);
    const asked: string[] = [];
    const plain = simulatedCardNetwork();
    const dying: CardNetwork = { ...plain, refund: async () => Promise.reject(new Error('the process died at the network')) };
    const counting: CardNetwork = { ...plain, refund: async (requests) => (asked.push(...requests.map((r) => r.reference)), plain.refund(requests)) };
    const caller = { accountId: 'acct_http_a', livemode: false, kind: 'secret' } as const;
    const at = server.ctx.clock.now();
    await expect(createPaymentRefund({ ...testContext(server.ctx.store, { at, seed: 81 }), processor: dying }, caller, { payment_flow_id: flow.id, amount: 1_500 })).rejects.toThrow('the process died');
    const [pending] = (await ok(v2.getPaymentFlowRefunds({ client, path: { payment_flow_id: flow.id } }))).data as { id: string }[];
    const runAt = async (ms: number) => {
      const slot = new Date(at.getTime() + ms);
      const ctx = { ...testContext(server.ctx.store, { at: slot, seed: 82 + ms }), processor: counting };
      const outcome = await new Scheduler(ctx, [holdExpiryJob], { owner: `refund-claims-${ms}` }).runSlot(holdExpiryJob.name, slot);
      return outcome.status === 'succeeded' ? outcome.counts : outcome;
    };
    expect(await runAt(0)).not.toHaveProperty('claims_recovered');
    expect(await ok(v2.getPaymentRefund({ client, path: { payment_refund_id: pending!.id } }))).toMatchObject({ status: 'pending' });
    expect(await runAt(NETWORK_CLAIM_LEASE_MS)).toMatchObject({ claims_recovered: 1 });
    expect(await runAt(2 * NETWORK_CLAIM_LEASE_MS)).not.toHaveProperty('claims_recovered');
    expect(asked).toEqual([pending!.id]);
    expect(await ok(v2.getPaymentRefund({ client, path: { payment_refund_id: pending!.id } }))).toMatchObject({ status: 'succeeded', amount: 1_500 });
    expect(await money(flow.id)).toEqual({ refunded: 1_500, refundRows: [1_500] });
    expect(await v2EventTypes(client, pending!.id)).toEqual(['refund.created']);
    // Finished: the flow's next refund request has nothing to take over and makes only its own.
    const own = await createPaymentRefund({ ...testContext(server.ctx.store, { at: new Date(at.getTime() + 3 * NETWORK_CLAIM_LEASE_MS), seed: 89 }), processor: counting }, caller, { payment_flow_id: flow.id, amount: 500 });
    expect(asked).toEqual([pending!.id, own.id]);
    expect(await money(flow.id)).toEqual({ refunded: 2_000, refundRows: [1_500, 500] });
  });
});

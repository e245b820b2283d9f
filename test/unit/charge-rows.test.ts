/**
 * buildChargeRows (src/charges/charges.ts), prepareCharges' pure step: the rows of authorized
 * charge requests, without a database or a network.
 */
import { describe, expect, it } from 'vitest';
import { buildChargeRows, type ChargeCard, type ChargeRequest } from '../../src/charges/charges';
import type { AuthorizationResult } from '../../src/processor/card-network';

const at = new Date('2027-02-01T00:00:00.000Z');
const card: ChargeCard = {
  card_id: 'car_1',
  livemode: false,
  created_at: at,
  brand: 'Visa',
  last4: '4242',
  exp_month: 12,
  exp_year: 2030,
  fingerprint: 'fp_1',
  name: null,
  country: 'JP',
  cvc_check: 'passed',
};
const request = (amount: number, extra: Partial<ChargeRequest> = {}): ChargeRequest => ({ accountId: 'acct_1', livemode: false, customerId: 'cus_1', card, amount, at, kind: 'renewal', ...extra });

describe('buildChargeRows', () => {
  const requests = [request(1000, { subscriptionId: 'sub_1', periodStart: at, description: 'Gold 月額' }), request(500)];
  const results: AuthorizationResult[] = [
    { reference: 'r1', approved: true, authorizationCode: '123456' },
    { reference: 'r2', approved: false, code: 'card_declined', message: 'The card was declined.', retryable: false },
  ];
  const rows = buildChargeRows(requests, ['ch_1', 'ch_2'], results, ['3.25', '2.59'], new Map([[0, { fee: 32, term_id: 'tm_1' }]]));

  it('an approved charge is paid and captured at its instant, with its settlement (fee, term)', () => {
    expect(rows[0]).toMatchObject({
      charge_id: 'ch_1',
      amount: 1000,
      paid: true,
      captured: true,
      captured_at: at,
      amount_captured: 1000,
      failure_code: null,
      fee_rate: '3.25',
      fee: 32,
      term_id: 'tm_1',
      subscription_id: 'sub_1',
      period_start: at,
      description: 'Gold 月額',
      created_at: at,
      updated_at: at,
    });
  });

  it('a declined charge is recorded unpaid with the network\'s failure, unsettled', () => {
    expect(rows[1]).toMatchObject({
      charge_id: 'ch_2',
      paid: false,
      captured: false,
      captured_at: null,
      amount_captured: null,
      failure_code: 'card_declined',
      failure_message: 'The card was declined.',
      fee_rate: '2.59',
      fee: null,
      term_id: null,
      subscription_id: null,
      period_start: null,
      description: null,
    });
  });
});

/**
 * One source of truth for the v1 charge: a field added to the field list shows in
 * every renderer derived from it — the JS object, the printed text and the SQL json_build_object.
 */
import { describe, expect, it } from 'vitest';
import {
  CHARGE_FIELDS, chargeObjectSqlText, chargeRenderer, chargeTextRenderer, renderCharge, type ChargeField, type ChargeObjectColumns,
} from '../../src/charges/charges';

const at = new Date('2027-03-01T00:00:00.500Z');
const row: ChargeObjectColumns = {
  charge_id: 'ch_1', livemode: false, created_at: at, amount: 1000, currency: 'jpy', paid: true, expired_at: null, captured: true,
  captured_at: at, customer_id: 'cus_1', description: null, failure_code: null, failure_message: null, fee_rate: '3.25', refunded: false,
  amount_refunded: 0, refund_reason: null, subscription_id: 'sub_1', metadata: {}, platform_fee: null, tenant_id: null,
  platform_fee_rate: null, total_platform_fee: 0, three_d_secure_status: null, term_id: 'tm_1',
};

const extra: ChargeField = { name: 'amount_captured', js: (r) => (r.captured ? r.amount : 0), sql: 'CASE WHEN c.captured THEN c.amount ELSE 0 END' };
const withExtra = [...CHARGE_FIELDS, extra];

describe('the charge field list', () => {
  it('renderCharge is the list, in order', () => {
    expect(Object.keys(renderCharge(row, null))).toEqual(CHARGE_FIELDS.map((f) => f.name));
  });

  it('an added field shows in the object, the text and the SQL', () => {
    const object = chargeRenderer(withExtra)(row, null);
    expect(object.amount_captured).toBe(1000);
    expect(Object.keys(object).at(-1)).toBe('amount_captured');
    const text = chargeTextRenderer(chargeRenderer(withExtra))(row, '{"id":"car_1"}');
    expect(JSON.parse(text)).toMatchObject({ amount_captured: 1000, card: { id: 'car_1' } });
    expect(text.endsWith(',"amount_captured":1000}')).toBe(true);
    const sqlText = chargeObjectSqlText(withExtra, 'CARD_OBJECT');
    expect(sqlText).toContain("'amount_captured', CASE WHEN c.captured THEN c.amount ELSE 0 END)");
    expect(sqlText).toContain("'card', CARD_OBJECT,");
    expect(chargeObjectSqlText(CHARGE_FIELDS, 'X')).not.toContain('amount_captured');
  });
});

import { describe, expect, it } from 'vitest';
import { KessaiError } from '../../src/domain/errors';
import { PROBLEM_MEDIA_TYPE, toProblemDocument, v2Field } from '../../src/domain/problem-details';

describe('v2 problem documents (service rules §3: RFC 9457, application/problem+json; official-sdks.md §3 titles)', () => {
  it('"validation errors use 422 (validation_error)" with the field in v2 syntax and the SDK title Validation Error', () => {
    const problem = toProblemDocument(new KessaiError('invalid_metadata_key', { param: 'metadata[k]', message: 'too long' }));
    expect(problem).toEqual({ type: expect.stringContaining('validation_error'), title: 'Validation Error', status: 422, detail: 'too long', code: 'validation_error', errors: [{ field: 'metadata.k', message: 'too long' }] });
    expect(PROBLEM_MEDIA_TYPE).toBe('application/problem+json');
  });

  it('"a wrong state 400 (invalid_status)", "authentication 401, unknown resource 404, card failure 402"', () => {
    expect(toProblemDocument(new KessaiError('invalid_status'))).toMatchObject({ status: 400, code: 'invalid_status', title: 'Invalid Status', errors: [] });
    expect(toProblemDocument(new KessaiError('charge_expired'))).toMatchObject({ status: 400, code: 'invalid_status', title: 'Payment Flow Expired' });
    expect(toProblemDocument(new KessaiError('invalid_api_key'))).toMatchObject({ status: 401, code: 'unauthorized', title: 'Unauthorized' });
    expect(toProblemDocument(new KessaiError('invalid_id', { param: 'id' }))).toMatchObject({ status: 404, code: 'not_found', title: 'Not Found', errors: [{ field: 'id' }] });
    expect(toProblemDocument(new KessaiError('card_declined'))).toMatchObject({ status: 402, code: 'card_declined', title: 'Payment Failed' });
    expect(toProblemDocument(new KessaiError('pg_wrong'))).toMatchObject({ status: 500, code: 'server_error' });
  });

  it('the SDK named 400 titles: by code, by the parameter of a general code, and an unknown cursor as Resource Missing', () => {
    const title = (error: KessaiError) => [toProblemDocument(error).status, toProblemDocument(error).title];
    expect(title(new KessaiError('too_many_metadata_keys', { param: 'metadata' }))).toEqual([400, 'Metadata Limit Exceeded']);
    expect(title(new KessaiError('extended_authorization_not_available'))).toEqual([400, 'Extended Authorization Not Available']);
    expect(title(new KessaiError('refund_amount_gt_net', { param: 'amount' }))).toEqual([400, 'Refund Exceeds Payment']);
    expect(title(new KessaiError('already_exist_id', { param: 'id' }))).toEqual([400, 'Already Exists ID']);
    expect(title(new KessaiError('no_allowed_param', { param: 'payment_method_type' }))).toEqual([400, 'Payment Method Type Not Allowed']);
    expect(title(new KessaiError('no_allowed_param', { param: 'type' }))).toEqual([422, 'Validation Error']);
    expect(title(new KessaiError('missing_param', { param: 'payment_method' }))).toEqual([400, 'Missing Payment Method']);
    expect(title(new KessaiError('missing_param', { param: 'amount' }))).toEqual([422, 'Validation Error']);
    expect(title(new KessaiError('invalid_id', { param: 'starting_after' }))).toEqual([400, 'Resource Missing']);
    expect(title(new KessaiError('invalid_id', { param: 'ending_before' }))).toEqual([400, 'Resource Missing']);
  });

  it('turns form-syntax parameters into dotted fields', () => {
    expect(v2Field('payment_method_options[card][request_extended_authorization]')).toBe('payment_method_options.card.request_extended_authorization');
    expect(v2Field('line_items[0][price]')).toBe('line_items.0.price');
    expect(v2Field('amount')).toBe('amount');
  });
});

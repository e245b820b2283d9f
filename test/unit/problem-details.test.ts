import { describe, expect, it } from 'vitest';
import { KessaiError } from '../../src/domain/errors';
import { PROBLEM_MEDIA_TYPE, toProblemDocument, v2Field } from '../../src/domain/problem-details';

describe('v2 problem documents (service rules §3: RFC 9457, application/problem+json)', () => {
  it('"validation errors use 422 (validation_error)" with the field in v2 syntax', () => {
    const problem = toProblemDocument(new KessaiError('invalid_metadata_key', { param: 'metadata[k]', message: 'too long' }));
    expect(problem).toEqual({ type: expect.stringContaining('validation_error'), title: expect.any(String), status: 422, detail: 'too long', code: 'validation_error', errors: [{ field: 'metadata.k', message: 'too long' }] });
    expect(PROBLEM_MEDIA_TYPE).toBe('application/problem+json');
  });

  it('"a wrong state 400 (invalid_status)", "authentication 401, unknown resource 404, card failure 402"', () => {
    expect(toProblemDocument(new KessaiError('invalid_status'))).toMatchObject({ status: 400, code: 'invalid_status', errors: [] });
    expect(toProblemDocument(new KessaiError('charge_expired'))).toMatchObject({ status: 400, code: 'invalid_status' });
    expect(toProblemDocument(new KessaiError('invalid_api_key'))).toMatchObject({ status: 401, code: 'unauthorized' });
    expect(toProblemDocument(new KessaiError('invalid_id', { param: 'id' }))).toMatchObject({ status: 404, code: 'not_found', errors: [{ field: 'id' }] });
    expect(toProblemDocument(new KessaiError('card_declined'))).toMatchObject({ status: 402, code: 'card_declined' });
    expect(toProblemDocument(new KessaiError('pg_wrong'))).toMatchObject({ status: 500, code: 'server_error' });
  });

  it('turns form-syntax parameters into dotted fields', () => {
    expect(v2Field('payment_method_options[card][request_extended_authorization]')).toBe('payment_method_options.card.request_extended_authorization');
    expect(v2Field('line_items[0][price]')).toBe('line_items.0.price');
    expect(v2Field('amount')).toBe('amount');
  });
});

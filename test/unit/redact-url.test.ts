/**
 * The URL of a log line (src/engine/redact-url.ts, applied by the logger to every `url` field):
 * card data, keys, tokens and client secrets are redacted wherever they sit in the URL; ids and
 * ordinary parameters are kept, so the log still says what was asked.
 */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/engine/logger';
import { redactUrl } from '../../src/engine/redact-url';

describe('redactUrl', () => {
  it.each([
    ['/v1/tokens?card[number]=4242424242424242&card[cvc]=123&card[exp_month]=12', '/v1/tokens?card[number]=[redacted]&card[cvc]=[redacted]&card[exp_month]=[redacted]'],
    ['/v1/tokens?card%5Bnumber%5D=4242424242424242&card%5Bcvc%5D=987', '/v1/tokens?card%5Bnumber%5D=[redacted]&card%5Bcvc%5D=[redacted]'],
    ['/v1/charges?key=sk_test_abc123&limit=3', '/v1/charges?key=[redacted]&limit=3'],
    ['/v1/charges?q=x%20sk_live_abc123', '/v1/charges?q=[redacted]'],
    ['/v1/charges/sk_test_abc123', '/v1/charges/[redacted]'],
    ['/v1/charges/pk%5Flive%5Fabc123', '/v1/charges/[redacted]'],
    ['/v1/charges?sk_test_abc123', '/v1/charges?[redacted]'],
    ['/v1/customers?metadata[pk_test_abc]=1', '/v1/customers?[redacted]'],
    ['/v2/webhooks?secret_token=whook_abc123', '/v2/webhooks?secret_token=[redacted]'],
    ['/v1/tokens/tok_0123abcd', '/v1/tokens/[redacted]'],
    ['/v2/payment_flows/pfw_1a2b?client_secret=pfw_1a2b_secret_9f8e', '/v2/payment_flows/pfw_1a2b?client_secret=[redacted]'],
    ['/v2/payment_flows/pfw_1a2b_secret_9f8e', '/v2/payment_flows/[redacted]'],
    ['/return?s=pfw_1a2b_secret_9f8e&payment_flow_client_secret=anything', '/return?s=[redacted]&payment_flow_client_secret=[redacted]'],
    ['/v2/js/wallet?key=pk_test_x1&setup_flow_id=sfw_1&client_secret=opaque', '/v2/js/wallet?key=[redacted]&setup_flow_id=sfw_1&client_secret=[redacted]'],
    ['/v1/tds/ch_1/start?publickey=anything&back_url=https%3A%2F%2Fshop.example%2Fback', '/v1/tds/ch_1/start?publickey=[redacted]&back_url=https%3A%2F%2Fshop.example%2Fback'],
    ['/v1/statements/download?token=eyJhIjoiYSJ9.c2ln', '/v1/statements/download?token=[redacted]'],
    ['/v1/customers?description=4242+4242+4242+4242', '/v1/customers?description=[redacted]'],
    ['/v1/customers?description=card-4242-4242-4242-4242', '/v1/customers?description=[redacted]'],
    ['/v1/customers/4242424242424242/cards', '/v1/customers/[redacted]/cards'],
  ])('%s', (url, expected) => {
    expect(redactUrl(url)).toBe(expected);
  });

  it.each([
    '/v1/charges?limit=10&offset=20&since=1798761600',
    '/v1/customers/cus_9190299ec1017b27e3af522f7d71fb/cards/car_5a2b',
    '/v2/payment_flows/pfw_1a2b?expand=payment_method',
    '/v1/charges?amount=9999999&customer=cus_1&description=stock%20tokens',
    '/health',
    '/v1/charges?bad=%E0%A4%A',
  ])('keeps %s as it is', (url) => {
    expect(redactUrl(url)).toBe(url);
  });
});

it('the logger redacts every `url` field with it, in child loggers too', () => {
  let written = '';
  const destination = new Writable({ write: (chunk, _encoding, done) => ((written += String(chunk)), done()) });
  const log = createLogger({ level: 'info', destination: destination as never });
  log.child({ request_id: 'req_1' }).info({ url: '/v1/tokens?card[number]=4242424242424242&limit=2' }, 'request');
  log.info({ url: '/v1/charges/sk_live_abc' }, 'request');
  expect(written).toContain('"url":"/v1/tokens?card[number]=[redacted]&limit=2"');
  expect(written).toContain('"url":"/v1/charges/[redacted]"');
  expect(written).not.toContain('4242424242424242');
});

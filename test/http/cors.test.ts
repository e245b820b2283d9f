/**
 * CORS only for what the public key may do (docs/decisions/http-server.md, "CORS: only what the public key may
 * do"): a browser on a merchant's page may create tokens (v1 §5) and read and confirm a payment or
 * setup flow with its client secret (v2 §4.8); every other route is the secret key's, for the
 * merchant's server, and a browser's preflight for it gets no CORS answer. The real server,
 * called as a browser would (an Origin header, preflights before non-simple requests).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { V1_ROUTES } from '../../src/api/v1/routes';
import { V2_PREFIX } from '../../src/api/v2/codec';
import { V2_ROUTES } from '../../src/api/v2/routes';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { startTestServer, type TestServer } from '../support/http-server';

const ORIGIN = 'https://shop.example';
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer('harness');
});
afterAll(() => server?.close());

async function preflight(method: string, path: string): Promise<Response> {
  return fetch(`${server.baseUrl}${path}`, { method: 'OPTIONS', headers: { origin: ORIGIN, 'access-control-request-method': method, 'access-control-request-headers': 'authorization, content-type' } });
}

function call(method: string, path: string, key: string, body?: { form?: string; json?: object }): Promise<Response> {
  const headers: Record<string, string> = { origin: ORIGIN, authorization: path.startsWith('/v2') ? `Bearer ${key}` : `Basic ${Buffer.from(`${key}:`).toString('base64')}` };
  if (body?.form !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
  if (body?.json !== undefined) headers['content-type'] = 'application/json';
  return fetch(`${server.baseUrl}${path}`, { method, headers, ...(body === undefined ? {} : { body: body.form ?? JSON.stringify(body.json) }) });
}

const CARD_FORM = `card[number]=${TEST_CARDS.visa.number}&card[exp_month]=12&card[exp_year]=2035&card[cvc]=123`;

describe('CORS', () => {
  it('a preflight is answered on exactly the routes of the public key — tokens, and the flow reads and confirmations of v2 §4.8 — over every route of both tables', async () => {
    const answered: string[] = [];
    const routes = [...V1_ROUTES.map((r) => ({ method: r.method, path: r.path })), ...V2_ROUTES.map((r) => ({ method: r.method, path: `${V2_PREFIX}${r.path}` }))];
    for (const route of routes) {
      const response = await preflight(route.method, route.path.replace(/:[a-z_]+/g, 'x_1'));
      const allowOrigin = response.headers.get('access-control-allow-origin');
      if (allowOrigin !== null) {
        expect(response.status).toBe(204);
        expect(allowOrigin).toBe('*');
        expect(response.headers.get('access-control-allow-methods')).toBe(route.method);
        expect(response.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
        answered.push(`${route.method} ${route.path}`);
      } else {
        expect(response.headers.get('access-control-allow-methods')).toBeNull();
        expect(response.status).not.toBe(204);
      }
    }
    expect(answered.sort()).toEqual(
      [
        'POST /v1/tokens',
        'GET /v2/payment_flows/:payment_flow_id',
        'POST /v2/payment_flows/:payment_flow_id/confirm',
        'POST /v2/payment_flows/:payment_flow_id/complete_action',
        'GET /v2/setup_flows/:setup_flow_id',
        'POST /v2/setup_flows/:setup_flow_id/confirm',
        'POST /v2/setup_flows/:setup_flow_id/complete_action',
      ].sort(),
    );
    expect(routes.length).toBeGreaterThan(100);
  });

  it('a secret-key route gets no CORS answer: not its preflight, not the request itself', async () => {
    for (const [method, path] of [['POST', '/v1/charges'], ['GET', '/v1/customers'], ['DELETE', '/v1/customers/cus_x'], ['POST', '/v2/payment_flows'], ['POST', '/v2/payment_flows/pfw_x'], ['POST', '/v2/payment_flows/pfw_x/capture'], ['GET', '/v2/customers']] as const) {
      const response = await preflight(method, path);
      expect(response.headers.get('access-control-allow-origin'), `${method} ${path}`).toBeNull();
      expect(response.status).not.toBe(204);
    }
    const listed = await call('GET', '/v1/customers', server.keys.a.test.secret);
    expect(listed.status).toBe(200);
    expect(listed.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('the public key from a browser gets CORS on its calls and their refusals; the secret key on the same routes does not', async () => {
    const token = await call('POST', '/v1/tokens', server.keys.a.test.public, { form: CARD_FORM });
    expect(token.status).toBe(200);
    expect(token.headers.get('access-control-allow-origin')).toBe('*');
    // A refusal is readable by the page's script too (a wrong key, a bad card).
    const refused = await call('POST', '/v1/tokens', 'pk_test_not_a_key', { form: CARD_FORM });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('access-control-allow-origin')).toBe('*');

    const flow = (await (await call('POST', '/v2/payment_flows', server.keys.a.test.secret, { json: { amount: 1000, currency: 'jpy' } })).json()) as { id: string; client_secret: string };
    const read = await call('GET', `/v2/payment_flows/${flow.id}?client_secret=${flow.client_secret}`, server.keys.a.test.public);
    expect(read.status).toBe(200);
    expect(read.headers.get('access-control-allow-origin')).toBe('*');
    // The secret key sent from a page: the server answers, the browser may not read it.
    const bySecret = await call('GET', `/v2/payment_flows/${flow.id}`, server.keys.a.test.secret);
    expect(bySecret.status).toBe(200);
    expect(bySecret.headers.get('access-control-allow-origin')).toBeNull();
    // Secret-key creation of a token (the SDK's direct-generation header) is no browser call.
    const direct = await fetch(`${server.baseUrl}/v1/tokens`, { method: 'POST', headers: { origin: ORIGIN, authorization: `Basic ${Buffer.from(`${server.keys.a.test.secret}:`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded', 'x-payjp-direct-token-generate': 'true' }, body: CARD_FORM });
    expect(direct.status).toBe(200);
    expect(direct.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('a request without an Origin (a server, the SDKs) carries no CORS header', async () => {
    const response = await fetch(`${server.baseUrl}/v1/tokens`, { method: 'POST', headers: { authorization: `Basic ${Buffer.from(`${server.keys.a.test.public}:`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' }, body: CARD_FORM });
    expect(response.status).toBe(200);
    expect(response.headers.get('access-control-allow-origin')).toBeNull();
  });
});

/**
 * The official v2 SDK (`@payjp/payjpv2`) pointed at a test server, and what tests assert of its
 * answers: the SDK does not throw on HTTP errors (official-sdks.md §1 "Result shape"), it resolves
 * to `{ data }` or `{ error, response }`.
 */
import { createClient, createPaymentMethod, getAllEvents, type Client, type PaymentMethodResponse } from '@payjp/payjpv2';
import type { TestServer } from './http-server';

export function v2Client(server: TestServer, apiKey: string): Client {
  return createClient({ apiKey, baseUrl: server.baseUrl });
}

interface SdkResult {
  readonly data?: unknown;
  readonly error?: unknown;
  readonly response?: Response;
}

/** The data of a successful call; anything else fails the test with the problem document. */
export async function ok<T>(call: Promise<SdkResult & { data?: T }>): Promise<T> {
  const result = await call;
  if (result.error !== undefined || result.response?.status !== 200) {
    throw new Error(`expected 200, got ${result.response?.status}: ${JSON.stringify(result.error)}`);
  }
  if (result.response.headers.get('content-type') !== 'application/json; charset=utf-8') throw new Error(`content type ${result.response.headers.get('content-type')}`);
  return result.data as T;
}

export interface Problem {
  readonly status: number;
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  readonly code: string;
  readonly errors: readonly { readonly field: string; readonly message: string }[];
  readonly contentType: string | null;
}

/** The problem document of a refused call, checked against the HTTP status. */
export async function problem(call: Promise<SdkResult>): Promise<Problem> {
  const result = await call;
  if (result.error === undefined || result.response === undefined) throw new Error(`expected a refusal, got ${result.response?.status}: ${JSON.stringify(result.data)}`);
  const body = result.error as Omit<Problem, 'contentType'>;
  if (body.status !== result.response.status) throw new Error(`problem status ${body.status} differs from HTTP ${result.response.status}`);
  return { ...body, contentType: result.response.headers.get('content-type') };
}

/** A card payment method made through the SDK (test mode only, as the SDK documents). */
export async function v2CardMethod(client: Client, number: string): Promise<PaymentMethodResponse> {
  return ok(createPaymentMethod({ client, body: { type: 'card', card: { number, exp_month: 12, exp_year: 2035, cvc: '123' }, billing_details: { email: 'buyer@example.com' } } }));
}

/** The types of the v2 events about a resource, oldest first, read through the events API. */
export async function v2EventTypes(client: Client, resourceId: string): Promise<string[]> {
  const events = await ok(getAllEvents({ client, query: { resource_id: resourceId, limit: 100 } }));
  return events.data.map((e) => e.type as string).reverse();
}

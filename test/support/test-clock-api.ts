/**
 * The test clock API (`/_kessai/v1/test_clocks`, kessai's own prefix: the official SDKs have no
 * test-clock functions) over plain fetch, as a merchant's test suite calls it: form bodies, the
 * secret key as a Bearer token.
 */
import { TEST_CLOCKS_PATH } from '../../src/api/test-clock-routes';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the API answers are read field by field
export type Json = Record<string, any>;

/** One call: `path` below the test clocks path (e.g. `/clock_…/advance`). */
export async function callTestClocks(baseUrl: string, key: string, method: string, path: string, body?: Record<string, string>): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${baseUrl}${TEST_CLOCKS_PATH}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
    ...(body ? { body: new URLSearchParams(body).toString() } : {}),
  });
  return { status: response.status, body: (await response.json()) as Json };
}

/** Waits (a bounded number of reads) until the clock says ready, and answers it. */
export async function untilClockReady(baseUrl: string, key: string, id: string): Promise<Json> {
  for (let i = 0; i < 600; i += 1) {
    const { body } = await callTestClocks(baseUrl, key, 'GET', `/${id}`);
    if (body.status === 'ready') return body;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`test clock ${id} did not become ready`);
}

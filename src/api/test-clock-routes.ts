/**
 * The test clock API, under TEST_CLOCKS_PATH: kessai's own, outside the service's /v1 and /v2 (the
 * official SDKs have no test-clock functions; merchants call it with plain HTTP). Authenticated
 * with the account's test-mode secret key like v1 (Basic or Bearer); form bodies; answers are JSON
 * objects with UNIX-second instants and refusals the v1 error body.
 *
 *   POST   /_kessai/v1/test_clocks                 frozen_time, name?      → the clock (ready)
 *   GET    /_kessai/v1/test_clocks                 limit?                  → { object: 'list', data }
 *   GET    /_kessai/v1/test_clocks/:id                                     → the clock
 *   DELETE /_kessai/v1/test_clocks/:id                                     → { id, deleted: true }
 *   POST   /_kessai/v1/test_clocks/:id/advance     frozen_time             → the clock (advancing)
 *   POST   /_kessai/v1/default_test_clock          test_clock ('' clears)  → { default_test_clock }
 */
import { hostname } from 'node:os';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { KessaiError } from '../domain/errors';
import type { Context } from '../engine/context';
import type { JobDefinition } from '../engine/job';
import { startAdvance } from '../test-clocks/advance';
import { createTestClock, deleteTestClock, instantParam, listTestClocks, retrieveTestClock, setDefaultTestClock } from '../test-clocks/test-clocks';

export const TEST_CLOCKS_PATH = '/_kessai/v1/test_clocks';
export const DEFAULT_TEST_CLOCK_PATH = '/_kessai/v1/default_test_clock';

type Fields = Record<string, unknown>;

function fieldsOf(request: FastifyRequest, allowed: readonly string[]): Fields {
  const fields = (request.method === 'GET' || request.method === 'DELETE' ? request.query : request.body ?? {}) as Fields;
  const unknown = Object.keys(fields).find((name) => !allowed.includes(name));
  if (unknown !== undefined) throw new KessaiError('invalid_param_key', { param: unknown, message: `unknown parameter ${unknown}; this route takes ${allowed.join(', ') || 'no parameters'}` });
  return fields;
}

function optionalText(fields: Fields, name: string): string | undefined {
  const value = fields[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new KessaiError('invalid_param_key', { param: name, message: `${name} must be a string` });
  return value;
}

export interface TestClockRouteOptions {
  readonly ctx: Context;
  /** The worker's jobs, in registry order: an advance runs them over the clock's objects. */
  readonly jobs: readonly JobDefinition[];
}

/**
 * Registers the routes. An advance is claimed in the request (refusals answered at once), then run
 * in this process after the answer; `advances` holds the runs in flight, so a server that stops
 * can wait for them (an advance cut short by a stop resumes on the clock's next advance).
 */
export function registerTestClockRoutes(app: FastifyInstance, options: TestClockRouteOptions): { readonly advances: Set<Promise<unknown>> } {
  const { ctx, jobs } = options;
  const advances = new Set<Promise<unknown>>();
  const owner = `${hostname()}:${process.pid}`;
  app.post(TEST_CLOCKS_PATH, async (request) => {
    const fields = fieldsOf(request, ['frozen_time', 'name']);
    if (fields.frozen_time === undefined) throw new KessaiError('missing_param', { param: 'frozen_time', message: 'frozen_time is required' });
    return createTestClock(ctx, request.caller!, { frozenTime: instantParam(fields.frozen_time, 'frozen_time'), name: optionalText(fields, 'name') });
  });
  app.get(TEST_CLOCKS_PATH, async (request) => {
    const limit = optionalText(fieldsOf(request, ['limit']), 'limit');
    return listTestClocks(ctx, request.caller!, limit === undefined ? undefined : /^\d{1,3}$/.test(limit) ? Number(limit) : Number.NaN);
  });
  app.get(`${TEST_CLOCKS_PATH}/:id`, async (request) => {
    fieldsOf(request, []);
    return retrieveTestClock(ctx, request.caller!, (request.params as { id: string }).id);
  });
  app.delete(`${TEST_CLOCKS_PATH}/:id`, async (request) => {
    fieldsOf(request, []);
    return deleteTestClock(ctx, request.caller!, (request.params as { id: string }).id);
  });
  app.post(`${TEST_CLOCKS_PATH}/:id/advance`, async (request) => {
    const fields = fieldsOf(request, ['frozen_time']);
    if (fields.frozen_time === undefined) throw new KessaiError('missing_param', { param: 'frozen_time', message: 'frozen_time is required' });
    const { clock, done } = await startAdvance(ctx, ctx.clock, request.caller!, (request.params as { id: string }).id, fields.frozen_time, jobs, `${owner}:${request.id}`);
    advances.add(done);
    void done.finally(() => advances.delete(done));
    return clock;
  });
  app.post(DEFAULT_TEST_CLOCK_PATH, async (request) => {
    const id = optionalText(fieldsOf(request, ['test_clock']), 'test_clock');
    if (id === undefined) throw new KessaiError('missing_param', { param: 'test_clock', message: 'test_clock is required ("" clears the default)' });
    return setDefaultTestClock(ctx, request.caller!, id === '' ? null : id);
  });
  return { advances };
}

/**
 * The operator API (`/admin`): JSON over HTTP for the people who run kessai, apart from the
 * merchant APIs. Every route needs an operator token (`Authorization: Bearer …`, operator-tokens.ts;
 * a merchant key is refused with 401) and answers over TLS or on loopback only. Bodies are JSON;
 * answers are the operator's results as JSON (camelCase fields, ISO 8601 instants in UTC); a
 * refusal is the v1 error body with the catalogue's code and the parameter named.
 *
 * Each route calls the one implementation (operator.ts) that the CLI calls too.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { KessaiError } from '../../domain/errors';
import { parseInstant } from '../../domain/time';
import { toV1Error } from '../v1/codec';
import type { Operator } from './operator';
import { operatorOf, type OperatorTokens } from './operator-tokens';

export const ADMIN_PREFIX = '/admin';

declare module 'fastify' {
  interface FastifyRequest {
    /** The operator token's name on the operator surfaces (null elsewhere). */
    operator: string | null;
  }
}

export interface OperatorApiOptions {
  readonly tokens: OperatorTokens;
  /** The operator's actions on behalf of a named operator (recorded as who). */
  readonly operatorFor: (who: string) => Operator;
}

type Body = Record<string, unknown>;

function bodyOf(request: FastifyRequest): Body {
  const body = request.body ?? {};
  if (typeof body !== 'object' || Array.isArray(body)) throw new KessaiError('invalid_param_key', { message: 'the body must be a JSON object' });
  return body as Body;
}

function allowOnly(body: Body, names: readonly string[]): void {
  const unknown = Object.keys(body).find((name) => !names.includes(name));
  if (unknown !== undefined) throw new KessaiError('invalid_param_key', { param: unknown, message: `unknown parameter ${unknown}; this route takes ${names.join(', ') || 'no parameters'}` });
}

function text(body: Body, name: string): string | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new KessaiError('invalid_param_key', { param: name, message: `${name} must be a string` });
  return value;
}

function requiredText(body: Body, name: string): string {
  const value = text(body, name);
  if (value === undefined) throw new KessaiError('invalid_param_key', { param: name, message: `${name} is required` });
  return value;
}

function flag(body: Body, name: string): boolean | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw new KessaiError('invalid_param_key', { param: name, message: `${name} must be true or false` });
  return value;
}

function whole(body: Body, name: string): number | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new KessaiError('invalid_param_key', { param: name, message: `${name} must be a whole number` });
  return value;
}

/** The mode of a read whose query takes `livemode` only (test mode by default). */
function modeOnly(query: Body): { livemode: boolean } {
  allowOnly(query, ['livemode']);
  return { livemode: livemodeOf(query) };
}

function livemodeOf(query: Body): boolean {
  const livemode = text(query, 'livemode');
  if (livemode !== undefined && livemode !== 'true' && livemode !== 'false') throw new KessaiError('invalid_param_key', { param: 'livemode', message: 'livemode must be true or false' });
  return livemode === 'true';
}

function textList(body: Body, name: string): string[] | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || value.some((item) => typeof item !== 'string') || value.length > 100) throw new KessaiError('invalid_param_key', { param: name, message: `${name} must be a list of at most 100 strings` });
  return value as string[];
}

function stringMap(body: Body, name: string): Record<string, string> | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'object' || Array.isArray(value) || Object.values(value).some((item) => typeof item !== 'string')) throw new KessaiError('invalid_param_key', { param: name, message: `${name} must be an object of strings` });
  return value as Record<string, string>;
}

function instant(value: string | undefined, name: string): Date | undefined {
  if (value === undefined) return undefined;
  try {
    return parseInstant(value);
  } catch (error) {
    throw new KessaiError('invalid_param_key', { param: name, message: (error as Error).message });
  }
}

function limitOf(query: Body): number | undefined {
  const value = text(query, 'limit');
  if (value === undefined) return undefined;
  if (!/^\d{1,4}$/.test(value)) throw new KessaiError('invalid_param_key', { param: 'limit', message: 'limit must be a whole number' });
  return Number(value);
}

/** The request key of a re-send: its Idempotency-Key header, else the attempt count the caller saw given up. */
function resendKey(request: FastifyRequest, body: Body, single: boolean): string {
  const header = request.headers['idempotency-key'];
  if (typeof header === 'string' && header.length > 0) return header;
  const seen = body.after_attempt;
  if (single && typeof seen === 'number' && Number.isInteger(seen) && seen > 0) return `after-attempt-${seen}`;
  throw new KessaiError('invalid_param_key', { param: 'idempotency_key', message: 'a re-send needs an Idempotency-Key header (or, for one delivery, after_attempt: the attempt count it was given up after), so that a retried request re-sends nothing more' });
}

export async function registerOperatorApi(app: FastifyInstance, options: OperatorApiOptions): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, (body as string).trim() === '' ? {} : JSON.parse(body as string));
    } catch {
      done(new KessaiError('invalid_param_key', { message: 'the body is not valid JSON' }), undefined);
    }
  });
  app.decorateRequest('operator', null);
  app.setErrorHandler((error, request, reply) => {
    const refusal = toV1Error(error);
    if (refusal.status >= 500) request.log.error({ err: error }, 'operator request failed');
    return reply.status(refusal.status).type('application/json; charset=utf-8').send(refusal.toV1());
  });
  app.setNotFoundHandler(async (request) => {
    request.operator = operatorOf(options.tokens, request);
    throw new KessaiError('not_found', { message: 'Unrecognized operator API URL.' });
  });
  app.addHook('onRequest', async (request) => {
    request.operator = operatorOf(options.tokens, request);
  });
  const op = (request: FastifyRequest): Operator => options.operatorFor(request.operator!);
  const params = (request: FastifyRequest) => request.params as Record<string, string>;
  const query = (request: FastifyRequest) => request.query as Body;
  const route = { config: { public: true } } as const;

  // Accounts and their keys.
  app.get('/accounts', route, async (request) => ({ data: await op(request).accounts.list() }));
  app.post('/accounts', route, async (request) => {
    const body = bodyOf(request);
    allowOnly(body, ['name', 'id', 'liveEnabled', 'termCycle', 'feeRates']);
    const termCycle = text(body, 'termCycle');
    if (termCycle !== undefined && termCycle !== 'monthly' && termCycle !== 'semi_monthly') throw new KessaiError('invalid_param_key', { param: 'termCycle', message: 'termCycle must be monthly or semi_monthly' });
    const id = text(body, 'id');
    const feeRates = stringMap(body, 'feeRates');
    return op(request).accounts.create({ name: requiredText(body, 'name'), liveEnabled: flag(body, 'liveEnabled') ?? false, ...(id === undefined ? {} : { id }), ...(termCycle === undefined ? {} : { termCycle }), ...(feeRates === undefined ? {} : { feeRates }) });
  });
  app.get('/accounts/:account/keys', route, async (request) => ({ data: await op(request).accounts.keys(params(request).account!) }));
  app.post('/accounts/:account/keys', route, async (request) => {
    const body = bodyOf(request);
    allowOnly(body, ['kind', 'livemode']);
    const kind = requiredText(body, 'kind');
    if (kind !== 'secret' && kind !== 'public') throw new KessaiError('invalid_param_key', { param: 'kind', message: 'kind must be secret or public' });
    return op(request).accounts.createKey(params(request).account!, { kind, livemode: flag(body, 'livemode') ?? false });
  });
  app.post('/accounts/:account/keys/:key/revoke', route, async (request) => op(request).accounts.revokeKey(params(request).account!, params(request).key!));
  // Scheduled reauthorization of held charges, and the account's own paid plan of the service.
  app.get('/accounts/:account/reauth', route, async (request) => op(request).accounts.reauth(params(request).account!, {}));
  app.post('/accounts/:account/reauth', route, async (request) => {
    const body = bodyOf(request);
    allowOnly(body, ['enabled', 'leadHours', 'maxCount']);
    const enabled = flag(body, 'enabled');
    const leadHours = whole(body, 'leadHours');
    const maxCount = whole(body, 'maxCount');
    return op(request).accounts.reauth(params(request).account!, { ...(enabled === undefined ? {} : { enabled }), ...(leadHours === undefined ? {} : { leadHours }), ...(maxCount === undefined ? {} : { maxCount }) });
  });
  // An account's events and settlement (terms, statements, balances), read only.
  app.get('/accounts/:account/events', route, async (request) => ({ data: await op(request).accounts.events(params(request).account!, modeOnly(query(request))) }));
  app.get('/accounts/:account/settlement', route, async (request) => op(request).accounts.settlement(params(request).account!, modeOnly(query(request))));
  app.get('/accounts/:account/statements/:statement/csv', route, async (request) => ({ csv: await op(request).accounts.statementCsv(params(request).account!, { ...modeOnly(query(request)), statementId: params(request).statement! }) }));
  app.get('/accounts/:account/service_plans', route, async (request) => ({ data: await op(request).accounts.servicePlans(params(request).account!, modeOnly(query(request))) }));
  app.post('/accounts/:account/service_plans', route, async (request) => {
    const body = bodyOf(request);
    allowOnly(body, ['subject', 'monthlyFee', 'from', 'livemode']);
    const monthlyFee = whole(body, 'monthlyFee');
    if (monthlyFee === undefined) throw new KessaiError('invalid_param_key', { param: 'monthlyFee', message: 'monthlyFee is required' });
    const from = instant(text(body, 'from'), 'from');
    return op(request).accounts.setServicePlan(params(request).account!, { livemode: flag(body, 'livemode') ?? false, subject: requiredText(body, 'subject'), monthlyFee, ...(from === undefined ? {} : { from }) });
  });

  // Webhook endpoints and their deliveries.
  app.get('/accounts/:account/webhook_endpoints', route, async (request) => ({ data: await op(request).webhooks.list(params(request).account!) }));
  app.post('/accounts/:account/webhook_endpoints', route, async (request) => {
    const body = bodyOf(request);
    allowOnly(body, ['url', 'livemode', 'apiVersion', 'eventTypes']);
    const apiVersion = text(body, 'apiVersion');
    if (apiVersion !== undefined && apiVersion !== 'v1' && apiVersion !== 'v2') throw new KessaiError('invalid_param_key', { param: 'apiVersion', message: 'apiVersion must be v1 or v2' });
    return op(request).webhooks.add({ accountId: params(request).account!, url: requiredText(body, 'url'), livemode: flag(body, 'livemode') ?? false, apiVersion: apiVersion ?? null, eventTypes: textList(body, 'eventTypes') ?? null });
  });
  app.post('/accounts/:account/webhook_endpoints/:endpoint/disable', route, async (request) => op(request).webhooks.setEnabled(params(request).account!, params(request).endpoint!, false));
  app.post('/accounts/:account/webhook_endpoints/:endpoint/enable', route, async (request) => op(request).webhooks.setEnabled(params(request).account!, params(request).endpoint!, true));
  app.post('/accounts/:account/webhook_endpoints/:endpoint/rotate_token', route, async (request) => op(request).webhooks.rotateToken(params(request).account!, params(request).endpoint!));
  app.post('/accounts/:account/webhook_endpoints/:endpoint/test', route, async (request) => op(request).webhooks.test(params(request).account!, params(request).endpoint!));
  app.delete('/accounts/:account/webhook_endpoints/:endpoint', route, async (request) => op(request).webhooks.remove(params(request).account!, params(request).endpoint!));
  app.get('/accounts/:account/webhook_endpoints/:endpoint/deliveries', route, async (request) => {
    const q = query(request);
    allowOnly(q, ['status', 'limit']);
    const status = text(q, 'status');
    const limit = limitOf(q);
    return { data: await op(request).webhooks.deliveries(params(request).account!, params(request).endpoint!, { ...(status === undefined ? {} : { status }), ...(limit === undefined ? {} : { limit }) }) };
  });
  app.get('/accounts/:account/webhook_endpoints/:endpoint/deliveries/:event/attempts', route, async (request) => ({ data: await op(request).webhooks.attempts(params(request).account!, params(request).endpoint!, params(request).event!) }));
  app.post('/accounts/:account/webhook_endpoints/:endpoint/deliveries/:event/resend', route, async (request) => {
    const body = bodyOf(request);
    allowOnly(body, ['after_attempt']);
    return op(request).webhooks.resend(params(request).account!, params(request).endpoint!, { eventId: params(request).event!, requestKey: resendKey(request, body, true) });
  });
  app.post('/accounts/:account/webhook_endpoints/:endpoint/resend_given_up', route, async (request) => {
    const body = bodyOf(request);
    allowOnly(body, []);
    return op(request).webhooks.resend(params(request).account!, params(request).endpoint!, { requestKey: resendKey(request, body, false) });
  });

  // The job ledger and the statements.
  app.get('/jobs', route, async (request) => ({ data: await op(request).jobs.states() }));
  app.get('/jobs/slots', route, async (request) => {
    const q = query(request);
    allowOnly(q, ['job', 'status', 'limit']);
    const job = text(q, 'job');
    const status = text(q, 'status');
    const limit = limitOf(q);
    return { data: await op(request).jobs.slots({ ...(job === undefined ? {} : { job }), ...(status === undefined ? {} : { status }), ...(limit === undefined ? {} : { limit }) }) };
  });
  app.post('/jobs/:job/run', route, async (request) => {
    const body = bodyOf(request);
    allowOnly(body, ['slot']);
    return op(request).jobs.run(params(request).job!, instant(requiredText(body, 'slot'), 'slot')!);
  });
  app.post('/statements/run', route, async (request) => {
    const body = bodyOf(request);
    allowOnly(body, ['at']);
    return { data: await op(request).jobs.runStatements(instant(text(body, 'at'), 'at')) };
  });

  // An account's test clocks (test mode): an advance is answered `advancing` and runs in this server.
  app.get('/accounts/:account/test_clocks', route, async (request) => ({ data: await op(request).testClocks.list(params(request).account!) }));
  app.post('/accounts/:account/test_clocks', route, async (request) => {
    const body = bodyOf(request);
    allowOnly(body, ['frozenTime', 'name']);
    const name = text(body, 'name');
    return op(request).testClocks.create(params(request).account!, { frozenTime: instant(requiredText(body, 'frozenTime'), 'frozenTime')!, ...(name === undefined ? {} : { name }) });
  });
  app.post('/accounts/:account/test_clocks/:clock/advance', route, async (request) => {
    const body = bodyOf(request);
    allowOnly(body, ['to']);
    return op(request).testClocks.advance(params(request).account!, params(request).clock!, instant(requiredText(body, 'to'), 'to')!);
  });
  app.delete('/accounts/:account/test_clocks/:clock', route, async (request) => op(request).testClocks.delete(params(request).account!, params(request).clock!));

  // Adjustments of a balance (settlement): the Idempotency-Key header, when sent, books once.
  app.get('/accounts/:account/adjustments', route, async (request) => ({ data: await op(request).adjustments.list(params(request).account!, modeOnly(query(request))) }));
  app.post('/accounts/:account/adjustments', route, async (request) => {
    const body = bodyOf(request);
    allowOnly(body, ['amount', 'subject', 'reason', 'owner', 'livemode']);
    const amount = body.amount;
    if (typeof amount !== 'number') throw new KessaiError('invalid_amount', { param: 'amount', message: 'amount must be a whole number of yen (positive: paid to the owner, negative: billed)' });
    const header = request.headers['idempotency-key'];
    const owner = text(body, 'owner');
    return op(request).adjustments.book(params(request).account!, {
      livemode: flag(body, 'livemode') ?? false,
      amount,
      subject: requiredText(body, 'subject'),
      reason: requiredText(body, 'reason'),
      ...(owner === undefined ? {} : { owner }),
      ...(typeof header === 'string' ? { requestKey: header } : {}),
    });
  });
}

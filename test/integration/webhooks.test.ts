/**
 * Webhook delivery (v2 §6.2): real receivers on 127.0.0.1, the real database, a manual
 * clock for the retry schedule, and real worker processes for the crash and two-worker cases.
 */
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ALL_JOBS } from '../../jobs/index';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { createLogger } from '../../src/engine/logger';
import { Scheduler } from '../../src/engine/scheduler';
import { listEvents, renderEvent, type StoredEvent } from '../../src/events/outbox';
import { runOperation } from '../../src/api/operations';
import { deliverDueWebhooks, sendTestEvent } from '../../src/webhooks/delivery';
import { addEndpoint, checkEndpointUrl, listEndpoints, removeEndpoint, rotateEndpointToken, setEndpointEnabled } from '../../src/webhooks/endpoints';
import type { WebhookTransport } from '../../src/engine/context';
import { httpWebhookTransport } from '../../src/webhooks/transport';
import { createTestDatabase, isPostgres, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';
import { spawnWorker } from '../support/spawn-worker';
import { answer, refusedPort, startReceiver, type Receiver } from '../support/webhook-receiver';

const MINUTE = 60_000;
let database: TestDatabase;
let transport: WebhookTransport;
/** For the one test of the transport's own timeout, against an endpoint that never answers. */
let hangingTransport: WebhookTransport;
const receivers: Receiver[] = [];
let accountSeq = 0;

beforeAll(async () => {
  database = await createTestDatabase();
  // The spec's 10 s: an endpoint that answers is never timed out on a slow machine. Tests of hanging
  // endpoints release them through the receiver's gate, except the test of the timeout itself.
  transport = httpWebhookTransport();
  // Against an endpoint that never answers, a short timeout is a timeout however slow the machine.
  hangingTransport = httpWebhookTransport({ timeoutMs: 400 });
});
afterAll(async () => {
  await transport.close();
  await hangingTransport.close();
  await database?.drop();
});
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

async function receiver(...args: Parameters<typeof startReceiver>): Promise<Receiver> {
  const r = await startReceiver(...args);
  receivers.push(r);
  return r;
}

/** A fresh account (so counts are per test), a context on a manual clock, and its caller. */
async function setup(seed = 1, webhookTransport: WebhookTransport = transport) {
  const base = testContext(database.store, { seed: seed * 1000 + (accountSeq += 1) });
  const ctx = { ...base, webhookTransport };
  const caller: Caller = { accountId: `acct_wh${accountSeq}`, livemode: false, kind: 'secret' };
  await createAccount(ctx, { name: 'Webhook Shop', id: caller.accountId });
  const customer = async (): Promise<StoredEvent> => {
    const created = (await runOperation(ctx, caller, 'customers.create', { email: 'a@example.com' })) as { id: string };
    const [event] = await listEvents(ctx.db, caller.accountId, { resourceId: created.id });
    return event!;
  };
  const pending = async (eventId: string) => (await listEvents(ctx.db, caller.accountId)).find((e) => e.id === eventId)!.pendingWebhooks;
  return { ctx, caller, customer, pending, deliver: () => deliverDueWebhooks(ctx, { owner: 'test' }) };
}

describe('webhook endpoints', () => {
  it('refuses URLs that are not http(s), naming the parameter, and adds nothing', async () => {
    const { ctx, caller } = await setup();
    for (const url of ['ftp://127.0.0.1/hook', 'file:///etc/passwd', 'javascript:alert(1)', 'not a url', 'http://user:pw@127.0.0.1/']) {
      await expect(addEndpoint(ctx, { accountId: caller.accountId, url })).rejects.toMatchObject({ code: 'invalid_param_key', param: 'url' });
    }
    expect(await listEndpoints(ctx.db, caller.accountId)).toEqual([]);
    expect(checkEndpointUrl('https://example.com/hooks?x=1')).toBe('https://example.com/hooks?x=1');
  });

  it('add shows a whook_ token once; rotate, disable, enable and remove change the endpoint; unknown ids are refused', async () => {
    const { ctx, caller } = await setup();
    const { endpoint, token } = await addEndpoint(ctx, { accountId: caller.accountId, url: 'http://127.0.0.1:9/hook', eventTypes: ['customer.created'] });
    expect(token).toMatch(/^whook_[0-9a-f]{30}$/);
    expect(endpoint).toMatchObject({ id: expect.stringMatching(/^we_/), status: 'enabled', eventTypes: ['customer.created'], livemode: false });
    expect(JSON.stringify(await listEndpoints(ctx.db, caller.accountId))).not.toContain(token);
    const rotated = await rotateEndpointToken(ctx, caller.accountId, endpoint.id);
    expect(rotated.token).not.toBe(token);
    expect((await setEndpointEnabled(ctx, caller.accountId, endpoint.id, false)).status).toBe('disabled');
    expect((await setEndpointEnabled(ctx, caller.accountId, endpoint.id, true)).status).toBe('enabled');
    await removeEndpoint(ctx, caller.accountId, endpoint.id);
    expect(await listEndpoints(ctx.db, caller.accountId)).toEqual([]);
    await expect(setEndpointEnabled(ctx, caller.accountId, endpoint.id, true)).rejects.toMatchObject({ code: 'invalid_id', param: 'endpoint' });
    await expect(addEndpoint(ctx, { accountId: 'acct_nobody', url: 'http://127.0.0.1/' })).rejects.toMatchObject({ code: 'invalid_id', param: 'account' });
    await expect(addEndpoint(ctx, { accountId: caller.accountId, url: 'http://127.0.0.1/', livemode: true })).rejects.toMatchObject({ code: 'not_activated_account' });
  });

  it('an event gets one delivery per matching enabled endpoint of its account and mode; pending_webhooks counts them', async () => {
    const { ctx, caller, customer } = await setup();
    const other = await setup();
    await addEndpoint(ctx, { accountId: caller.accountId, url: 'http://127.0.0.1:9/all' });
    await addEndpoint(ctx, { accountId: caller.accountId, url: 'http://127.0.0.1:9/customers', eventTypes: ['customer.created'] });
    await addEndpoint(ctx, { accountId: caller.accountId, url: 'http://127.0.0.1:9/charges', eventTypes: ['charge.succeeded'] });
    await addEndpoint(ctx, { accountId: caller.accountId, url: 'http://127.0.0.1:9/v2', apiVersion: 'v2' });
    const disabled = await addEndpoint(ctx, { accountId: caller.accountId, url: 'http://127.0.0.1:9/off' });
    await setEndpointEnabled(ctx, caller.accountId, disabled.endpoint.id, false);
    await addEndpoint(other.ctx, { accountId: other.caller.accountId, url: 'http://127.0.0.1:9/other' });
    const event = await customer();
    expect(event.pendingWebhooks).toBe(2);
    const rows = await ctx.db.selectFrom('webhook_deliveries').selectAll().where('account_id', '=', caller.accountId).execute();
    expect(rows).toHaveLength(2);
    expect(rows.every((row) => row.event_id === event.id && row.next_attempt_at.getTime() === event.createdAt.getTime())).toBe(true);
    // Nothing listens on these URLs: out of the way of the delivery tests.
    for (const endpoint of [...(await listEndpoints(ctx.db, caller.accountId)), ...(await listEndpoints(ctx.db, other.caller.accountId))]) await removeEndpoint(ctx, endpoint.accountId, endpoint.id);
  });
});

describe('webhook delivery', () => {
  it('succeeds on the first attempt: the body is the events API object, both headers are sent, pending_webhooks goes to 0', async () => {
    const { ctx, caller, customer, pending } = await setup();
    const r = await receiver();
    const { endpoint, token } = await addEndpoint(ctx, { accountId: caller.accountId, url: `${r.url}/hooks?shop=1` });
    const event = await customer();
    expect(event.pendingWebhooks).toBe(1);
    const expected = renderEvent(event);

    // Through the scheduler, as the worker runs it: the job is registered and delivers at its slot.
    const outcome = await new Scheduler(ctx, ALL_JOBS, { owner: 'w1' }).runSlot('webhooks.deliver', REFERENCE_INSTANT);
    expect(outcome).toMatchObject({ status: 'succeeded', counts: { delivered: 1, retrying: 0, given_up: 0 } });

    expect(r.received).toHaveLength(1);
    const [request] = r.received;
    expect(request!.method).toBe('POST');
    expect(request!.path).toBe('/hooks?shop=1');
    expect(request!.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(request!.headers['x-service-webhook-token']).toBe(token);
    expect(JSON.parse(request!.body)).toEqual(expected);
    expect(await pending(event.id)).toBe(0);
    const [listed] = await listEndpoints(ctx.db, caller.accountId);
    expect(listed!.counts).toEqual({ delivered: 1, failing: 0, waiting: 0, givenUp: 0 });
    const attempts = await ctx.db.selectFrom('webhook_attempts').selectAll().where('endpoint_id', '=', endpoint.id).execute();
    expect(attempts).toMatchObject([{ attempt: 1, succeeded: true, http_status: 200, error: null, attempted_at: REFERENCE_INSTANT }]);
    // Nothing more to send.
    expect(await deliverDueWebhooks(ctx, { owner: 'test' })).toMatchObject({ delivered: 0 });
    expect(r.received).toHaveLength(1);
  });

  // An account's rows answer as a worker node that is down would (SQLSTATE 08006): refused at its
  // claim, or at the recording of its attempts after they were sent.
  const unreachable: [string, string, number][] = [
    ['its claim', 'BEFORE UPDATE ON webhook_deliveries FOR EACH ROW WHEN (OLD.account_id', 1],
    ['the recording of its attempts', 'BEFORE INSERT ON webhook_attempts FOR EACH ROW WHEN (NEW.account_id', 2],
  ];
  it.runIf(isPostgres()).each(unreachable)('an account whose database node fails %s is skipped: the slot succeeds with the other account delivered, and a later slot delivers it, once', async (_name, trigger, sends) => {
    const up = await setup();
    const down = await setup();
    const start = new Date(REFERENCE_INSTANT.getTime() + 600 * MINUTE);
    up.ctx.clock.set(start);
    down.ctx.clock.set(start);
    const r = await receiver();
    await addEndpoint(up.ctx, { accountId: up.caller.accountId, url: `${r.url}/up` });
    await addEndpoint(down.ctx, { accountId: down.caller.accountId, url: `${r.url}/down` });
    const upEvent = await up.customer();
    const downEvent = await down.customer();
    await sql`CREATE FUNCTION refuse_webhook_node() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'node down (test)' USING ERRCODE = '08006'; END $$`.execute(up.ctx.db);
    await sql.raw(`CREATE TRIGGER refuse_webhook_node ${trigger} = '${down.caller.accountId}') EXECUTE FUNCTION refuse_webhook_node()`).execute(up.ctx.db);
    const table = trigger.includes('webhook_attempts') ? 'webhook_attempts' : 'webhook_deliveries';
    try {
      const outcome = await new Scheduler(up.ctx, ALL_JOBS, { owner: 'w-node' }).runSlot('webhooks.deliver', start);
      expect(outcome.status, outcome.status === 'failed' ? outcome.error : '').toBe('succeeded');
      expect(await up.pending(upEvent.id)).toBe(0);
      expect(await down.pending(downEvent.id)).toBe(1);
      expect(r.received.filter((request) => request.path === '/up')).toHaveLength(1);
      expect(r.received.filter((request) => request.path === '/down')).toHaveLength(sends - 1);
    } finally {
      await sql.raw(`DROP TRIGGER refuse_webhook_node ON ${table}`).execute(up.ctx.db);
      await sql`DROP FUNCTION refuse_webhook_node()`.execute(up.ctx.db);
    }
    // The node is back: a slot after any lease of the skipped pass has lapsed delivers the rest.
    const later = new Date(start.getTime() + up.ctx.config.leaseMs + MINUTE);
    up.ctx.clock.set(later);
    const outcome = await new Scheduler(up.ctx, ALL_JOBS, { owner: 'w-node' }).runSlot('webhooks.deliver', later);
    expect(outcome.status).toBe('succeeded');
    expect(await down.pending(downEvent.id)).toBe(0);
    expect(r.received.filter((request) => request.path === '/up')).toHaveLength(1);
    expect(r.received.filter((request) => request.path === '/down')).toHaveLength(sends);
    for (const accountId of [up.caller.accountId, down.caller.accountId]) {
      const attempts = await up.ctx.db.selectFrom('webhook_attempts').select(['attempt', 'succeeded']).where('account_id', '=', accountId).execute();
      expect(attempts).toEqual([{ attempt: 1, succeeded: true }]);
    }
  });

  const failures: [string, (r: Receiver) => void, { status: number | null; error: string | null }][] = [
    ['500', (r) => (r.respond = answer(500, 'boom')), { status: 500, error: null }],
    ['404', (r) => (r.respond = answer(404)), { status: 404, error: null }],
    ['a timeout', (r) => (r.respond = () => 'hang'), { status: null, error: 'timeout' }],
    ['a redirect (never followed)', (r) => (r.respond = answer(302, '', { location: `${r.url}/elsewhere` })), { status: 302, error: null }],
  ];
  it.each(failures)('%s is retried at +3, +6 and +9 minutes, then delivery stops; pending_webhooks stays', async (_name, arrange, outcome) => {
    const { ctx, caller, customer, pending, deliver } = await setup(1, outcome.error === 'timeout' ? hangingTransport : transport);
    const r = await receiver();
    arrange(r);
    const { endpoint } = await addEndpoint(ctx, { accountId: caller.accountId, url: `${r.url}/hook` });
    const event = await customer();
    const sentAt: number[] = [];
    for (const minute of [0, 2, 3, 5, 6, 8, 9, 12, 15, 30]) {
      ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + minute * MINUTE));
      const before = r.received.length;
      await deliver();
      if (r.received.length > before) sentAt.push(minute);
    }
    expect(sentAt).toEqual([0, 3, 6, 9]);
    expect(r.received.every((request) => request.path === '/hook')).toBe(true);
    expect(await pending(event.id)).toBe(1);
    const attempts = await ctx.db.selectFrom('webhook_attempts').selectAll().where('endpoint_id', '=', endpoint.id).orderBy('attempt').execute();
    expect(attempts.map((a) => [a.attempt, (a.attempted_at.getTime() - REFERENCE_INSTANT.getTime()) / MINUTE, a.succeeded, a.http_status, a.error])).toEqual(
      [0, 3, 6, 9].map((minute, i) => [i + 1, minute, false, outcome.status, outcome.error]),
    );
    const [listed] = await listEndpoints(ctx.db, caller.accountId);
    expect(listed!.counts).toEqual({ delivered: 0, failing: 0, waiting: 0, givenUp: 1 });
  });

  it('a refused connection is retried at +3, +6 and +9 minutes, then delivery stops', async () => {
    const { ctx, caller, customer, pending, deliver } = await setup();
    const { endpoint } = await addEndpoint(ctx, { accountId: caller.accountId, url: `http://127.0.0.1:${await refusedPort()}/hook` });
    const event = await customer();
    for (const minute of [0, 2, 3, 6, 9, 12, 20]) {
      ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + minute * MINUTE));
      await deliver();
    }
    const attempts = await ctx.db.selectFrom('webhook_attempts').selectAll().where('endpoint_id', '=', endpoint.id).orderBy('attempt').execute();
    expect(attempts.map((a) => [(a.attempted_at.getTime() - REFERENCE_INSTANT.getTime()) / MINUTE, a.http_status, a.error])).toEqual(
      [0, 3, 6, 9].map((minute) => [minute, null, 'ECONNREFUSED']),
    );
    expect(await pending(event.id)).toBe(1);
  });

  it('a failure followed by a 2xx: delivered on the retry, pending_webhooks goes to 0', async () => {
    const { ctx, caller, customer, pending, deliver } = await setup();
    const r = await receiver(answer(503));
    await addEndpoint(ctx, { accountId: caller.accountId, url: r.url });
    const event = await customer();
    await deliver();
    expect(await pending(event.id)).toBe(1);
    r.respond = answer(204);
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 3 * MINUTE));
    expect(await deliver()).toMatchObject({ delivered: 1 });
    expect(await pending(event.id)).toBe(0);
    expect(r.received.map((request) => JSON.parse(request.body).id)).toEqual([event.id, event.id]);
  });

  it('two endpoints, one failing: the other is delivered, and each counts right', async () => {
    const { ctx, caller, customer, pending, deliver } = await setup();
    const good = await receiver();
    const bad = await receiver(answer(500));
    const ok = await addEndpoint(ctx, { accountId: caller.accountId, url: good.url });
    const failing = await addEndpoint(ctx, { accountId: caller.accountId, url: bad.url });
    const events = [await customer(), await customer()];
    expect(events.map((e) => e.pendingWebhooks)).toEqual([2, 2]);
    expect(await deliver()).toEqual({ delivered: 2, retrying: 2, given_up: 0, released: 0 });
    expect(good.received).toHaveLength(2);
    expect(bad.received).toHaveLength(2);
    for (const event of events) expect(await pending(event.id)).toBe(1);
    const listed = new Map((await listEndpoints(ctx.db, caller.accountId)).map((e) => [e.id, e.counts]));
    expect(listed.get(ok.endpoint.id)).toEqual({ delivered: 2, failing: 0, waiting: 0, givenUp: 0 });
    expect(listed.get(failing.endpoint.id)).toEqual({ delivered: 0, failing: 2, waiting: 0, givenUp: 0 });
  });

  it('a hanging endpoint never holds up the others: they are delivered while it hangs', async () => {
    const { ctx, caller, customer, deliver } = await setup();
    const good = await receiver();
    const dead = await receiver(() => 'hang');
    await addEndpoint(ctx, { accountId: caller.accountId, url: good.url });
    await addEndpoint(ctx, { accountId: caller.accountId, url: dead.url });
    for (let i = 0; i < 40; i += 1) await customer();
    const pass = deliver();
    // The dead endpoint hangs until the test lets its connections fail: all 40 deliveries to the good
    // one arrive meanwhile (a pass that waited on the dead one would never get there).
    await Promise.all([good.until(40), dead.until(1)]);
    dead.dropHanging();
    const counts = await pass;
    // One failure wave, not one per delivery: after the first failure the dead endpoint's other
    // claimed deliveries are released unsent, for a later pass.
    expect(counts.delivered).toBe(40);
    expect(good.received).toHaveLength(40);
    expect(counts.retrying + counts.released).toBe(40);
    expect(dead.received.length).toBeLessThanOrEqual(16);
  });

  it('caps the response body it reads: an endless 200 answer is delivered, not waited for', async () => {
    const { ctx, caller, customer, deliver } = await setup();
    const r = await receiver((_request, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const chunk = 'x'.repeat(64 * 1024);
      const pump = (): void => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    await addEndpoint(ctx, { accountId: caller.accountId, url: r.url });
    await customer();
    expect(await deliver()).toMatchObject({ delivered: 1 });
  });

  it('a disabled endpoint is not sent to until enabled again; a removed one never', async () => {
    const { ctx, caller, customer, deliver } = await setup();
    const r = await receiver();
    const { endpoint } = await addEndpoint(ctx, { accountId: caller.accountId, url: r.url });
    await customer();
    await setEndpointEnabled(ctx, caller.accountId, endpoint.id, false);
    await deliver();
    expect(r.received).toHaveLength(0);
    await setEndpointEnabled(ctx, caller.accountId, endpoint.id, true);
    await deliver();
    expect(r.received).toHaveLength(1);
    await customer();
    await removeEndpoint(ctx, caller.accountId, endpoint.id);
    await deliver();
    expect(r.received).toHaveLength(1);
  });

  it('logs each attempt with its status and duration, never the token', async () => {
    const lines: string[] = [];
    const log = createLogger({ level: 'info', destination: new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(chunk.toString()), done()) }) as never });
    const { ctx, caller, customer } = await setup();
    const r = await receiver(answer(500));
    const { token } = await addEndpoint(ctx, { accountId: caller.accountId, url: r.url });
    const event = await customer();
    await deliverDueWebhooks({ ...ctx, log }, { owner: 'test' });
    await sendTestEvent({ ...ctx, log }, caller.accountId, (await listEndpoints(ctx.db, caller.accountId))[0]!.id);
    const attempt = lines.map((line) => JSON.parse(line) as Record<string, unknown>).find((line) => line.msg === 'webhook attempt failed');
    expect(attempt).toMatchObject({ event: event.id, attempt: 1, status: 500, duration_ms: expect.any(Number) });
    expect(lines.join('')).not.toContain(token);
    expect(r.received.every((request) => request.headers['x-service-webhook-token'] === token)).toBe(true);
  });

  it('`webhooks test` sends one webhook.test event to one endpoint, stores nothing', async () => {
    const { ctx, caller } = await setup();
    const r = await receiver();
    const { endpoint, token } = await addEndpoint(ctx, { accountId: caller.accountId, url: r.url, apiVersion: 'v2' });
    const { event, result } = await sendTestEvent(ctx, caller.accountId, endpoint.id);
    expect(result).toMatchObject({ ok: true, status: 200 });
    expect(JSON.parse(r.received[0]!.body)).toEqual(event);
    expect(event).toMatchObject({ object: 'event', type: 'webhook.test', id: expect.stringMatching(/^evt_/), data: { id: endpoint.id, object: 'webhook_endpoint' } });
    expect(r.received[0]!.headers['x-service-webhook-token']).toBe(token);
    expect(await listEvents(ctx.db, caller.accountId)).toEqual([]);
  });
});

// Real crashes and real concurrency need separate processes on one server (PostgreSQL only).
describe.runIf(isPostgres())('webhook delivery across processes (PostgreSQL)', () => {
  const workerScript = fileURLToPath(new URL('../support/webhook-worker-process.ts', import.meta.url));

  /** N events on a fresh account with one endpoint on a receiver that answers after `delayMs`. */
  async function seed(n: number, delayMs: number) {
    const { ctx, caller, customer } = await setup(3);
    const r = await receiver((_request, res) => void setTimeout(() => (res.writeHead(200), res.end()), delayMs));
    const { endpoint } = await addEndpoint(ctx, { accountId: caller.accountId, url: r.url });
    for (let i = 0; i < n; i += 1) await customer();
    const eventIds = (await listEvents(ctx.db, caller.accountId)).map((e) => e.id);
    expect(eventIds).toHaveLength(n);
    return { ctx, caller, r, endpoint, eventIds, customer };
  }

  const bodyIds = (r: Receiver) => r.received.map((request) => (JSON.parse(request.body) as { id: string }).id);

  async function deliveryState(accountId: string) {
    const rows = await sql<{ delivered: number; attempts: number; recorded: number; pending_sum: number }>`
      SELECT (SELECT count(*) FROM webhook_deliveries WHERE account_id = ${accountId} AND status = 'delivered')::int AS delivered,
             (SELECT coalesce(sum(attempts), 0) FROM webhook_deliveries WHERE account_id = ${accountId})::int AS attempts,
             (SELECT count(*) FROM webhook_attempts WHERE account_id = ${accountId})::int AS recorded,
             (SELECT coalesce(sum(pending_webhooks), 0) FROM events WHERE account_id = ${accountId})::int AS pending_sum`.execute(database.store.db);
    return rows.rows[0]!;
  }

  it('a worker killed with SIGKILL mid-batch: every delivery is eventually sent, none recorded twice', async () => {
    const n = 300;
    const { caller, r, eventIds } = await seed(n, 5);
    const at = REFERENCE_INSTANT.toISOString();
    const victim = spawnWorker(workerScript, database.url!, { KESSAI_AT: at, KESSAI_OWNER: 'victim', KESSAI_LEASE_MS: '60000', KESSAI_CONCURRENCY: '8' });
    // Killed once it has sent some and recorded some: some sent deliveries are unrecorded. From
    // that moment the receiver leaves every request unanswered, so the victim cannot finish the
    // pass before the kill lands (a gate, not a race); the kill lands well inside the worker's 5 s
    // timeout, so it records no timeout either.
    const killable = () => r.received.length >= 100 && victim.output().includes('recorded');
    const answering = r.respond;
    r.respond = (request, res) => (killable() ? 'hang' : answering(request, res));
    await new Promise<void>((resolve, reject) => {
      const timer = setInterval(() => {
        if (killable()) {
          clearInterval(timer);
          victim.child.kill('SIGKILL');
          resolve();
        }
      }, 5);
      void victim.exited.then(() => (clearInterval(timer), reject(new Error(`the worker finished before it was killed: ${victim.errors()}`))));
    });
    expect(await victim.exited).toMatchObject({ signal: 'SIGKILL' });
    const afterKill = await deliveryState(caller.accountId);
    expect(afterKill.delivered).toBeLessThan(n);
    r.respond = answering;

    // Before the lease lapses, nothing claimed by the dead worker is taken.
    const early = spawnWorker(workerScript, database.url!, { KESSAI_AT: new Date(REFERENCE_INSTANT.getTime() + 30_000).toISOString(), KESSAI_OWNER: 'early' });
    expect(await early.exited, early.errors()).toEqual({ code: 0, signal: null });
    // After it lapses, another worker takes the rest over.
    const heir = spawnWorker(workerScript, database.url!, { KESSAI_AT: new Date(REFERENCE_INSTANT.getTime() + 61_000).toISOString(), KESSAI_OWNER: 'heir' });
    expect(await heir.exited, heir.errors()).toEqual({ code: 0, signal: null });

    const final = await deliveryState(caller.accountId);
    expect(final).toEqual({ delivered: n, attempts: n, recorded: n, pending_sum: 0 });
    // Every event reached the receiver; the ones sent but not recorded by the victim, twice.
    expect(new Set(bodyIds(r))).toEqual(new Set(eventIds));
    expect(r.received.length).toBeGreaterThanOrEqual(n);
  });

  it('two workers on one PostgreSQL never send the same attempt twice', async () => {
    const n = 400;
    const { caller, r, eventIds } = await seed(n, 2);
    const env = { KESSAI_AT: REFERENCE_INSTANT.toISOString(), KESSAI_CONCURRENCY: '8' };
    const workers = [spawnWorker(workerScript, database.url!, { ...env, KESSAI_OWNER: 'a' }), spawnWorker(workerScript, database.url!, { ...env, KESSAI_OWNER: 'b' })];
    const results = await Promise.all(workers.map((w) => w.exited));
    for (const [i, result] of results.entries()) expect(result, workers[i]!.errors()).toEqual({ code: 0, signal: null });
    const ids = bodyIds(r);
    expect(ids).toHaveLength(n);
    expect(new Set(ids)).toEqual(new Set(eventIds));
    expect(await deliveryState(caller.accountId)).toEqual({ delivered: n, attempts: n, recorded: n, pending_sum: 0 });
    const delivered = workers.map((w) => (JSON.parse(w.output().trim().split('\n').at(-1)!) as { counts: { delivered: number } }).counts.delivered);
    expect(delivered[0]! + delivered[1]!).toBe(n);
  });
});

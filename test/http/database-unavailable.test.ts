/**
 * A request whose database cannot be reached is a temporary failure, not a fault: 503
 * `service_unavailable` with Retry-After (src/db/errors.ts isDatabaseUnavailable), on v1 and v2, and
 * the same requests succeed once the database is back. On Citus this is the answer for accounts whose
 * worker node is down (test/integration/citus.test.ts stops a node); here the server's connections
 * go through a TCP relay that the test cuts, so the driver sees what it sees when a server goes away
 * (refused connections, connections reset mid-use). PostgreSQL only: PGlite has no connection to cut.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import Payjp from 'payjp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, type AccountKeys } from '../../src/accounts/accounts';
import { openStore, type Store } from '../../src/db/connect';
import { isDatabaseUnavailable, UNAVAILABLE_RETRY_AFTER_SECONDS } from '../../src/db/errors';
import { createTestDatabase, isPostgres, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';
import { sdkError, serveOn, type Served } from '../support/http-server';

/** A TCP relay to the database that can be cut (every connection reset, new ones refused) and restored. */
class Relay {
  #server: Server | null = null;
  readonly #sockets = new Set<Socket>();
  port = 0;
  constructor(private readonly target: { host: string; port: number }) {}

  async up(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.target.port, this.target.host);
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket);
        socket.on('close', () => this.#sockets.delete(socket));
        socket.on('error', () => socket.destroy());
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    this.#server = server;
  }

  async down(): Promise<void> {
    const server = this.#server;
    this.#server = null;
    for (const socket of this.#sockets) socket.resetAndDestroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

describe.runIf(isPostgres())('a database that cannot be reached: 503 with Retry-After, not 500', () => {
  let database: TestDatabase;
  let relay: Relay;
  let store: Store;
  let served: Served;
  let keys: AccountKeys;
  let relayUrl: string;

  beforeAll(async () => {
    database = await createTestDatabase();
    const url = new URL(database.url!);
    relay = new Relay({ host: url.hostname, port: Number(url.port || 5432) });
    await relay.up();
    url.hostname = '127.0.0.1';
    url.port = String(relay.port);
    relayUrl = url.toString();
    store = await openStore({ databaseUrl: relayUrl, poolSize: 2 });
    const ctx = testContext(store, { seed: 41, at: REFERENCE_INSTANT });
    keys = (await createAccount(ctx, { name: 'Unreachable Shop', id: 'acct_unreachable' })).keys;
    served = await serveOn(ctx, 'postgres');
  });
  afterAll(async () => {
    await served?.close();
    await relay?.down();
    await store?.close().catch(() => undefined);
    await database?.drop();
  });

  const sdk = () => Payjp(keys.test.secret, { apibase: served.apibase });
  const raw = (path: string) => fetch(`${served.baseUrl}${path}`, { headers: { authorization: `Basic ${Buffer.from(`${keys.test.secret}:`).toString('base64')}` } });

  it('answers normally, then 503 service_unavailable with Retry-After on v1 and v2 while the database is cut, then normally again', async () => {
    const before = await sdk().customers.create({ email: 'before@example.com' });
    expect(before.id).toMatch(/^cus_/);

    await relay.down();
    // Connections in the pool are reset, new ones refused: reads and writes alike.
    expect(await sdkError(sdk().customers.create({ email: 'during@example.com' }))).toMatchObject({ status: 503, type: 'server_error', code: 'service_unavailable' });
    expect(await sdkError(sdk().customers.retrieve(before.id))).toMatchObject({ status: 503, code: 'service_unavailable' });
    const v1 = await raw(`/v1/customers/${before.id}`);
    expect(v1.status).toBe(503);
    expect(v1.headers.get('retry-after')).toBe(String(UNAVAILABLE_RETRY_AFTER_SECONDS));
    const v2 = await raw('/v2/customers');
    expect(v2.status).toBe(503);
    expect(v2.headers.get('retry-after')).toBe(String(UNAVAILABLE_RETRY_AFTER_SECONDS));
    expect(v2.headers.get('content-type')).toMatch(/application\/problem\+json/);

    await relay.up();
    const after = await sdk().customers.create({ email: 'after@example.com' });
    expect(after.id).toMatch(/^cus_/);
    expect((await sdk().customers.retrieve(before.id)).id).toBe(before.id);
    // The refused create did nothing: the account has the two customers made while the database answered.
    expect((await sdk().customers.list({ limit: 10 })).data.map((c) => c.email).sort()).toEqual(['after@example.com', 'before@example.com']);
  });

  it('recognises the errors the driver really raises: a refused connection and a terminated session', async () => {
    const refused = await openStore({ databaseUrl: relayUrl, poolSize: 1 });
    await relay.down();
    try {
      const error = await refused.db.selectNoFrom((eb) => eb.lit(1).as('one')).execute().then(() => undefined, (e: unknown) => e);
      expect(error).toBeDefined();
      expect(isDatabaseUnavailable(error)).toBe(true);
    } finally {
      await refused.close().catch(() => undefined);
      await relay.up();
    }
    // A session the server ends (SQLSTATE 57P01, as on a node's shutdown).
    const victim = await database.openAnother();
    try {
      // In one transaction, so the query after the termination runs on the ended session (the pool
      // would otherwise hand out a fresh connection once it noticed the end).
      const error = await victim.db
        .transaction()
        .execute(async (trx) => {
          const pid = (await trx.selectNoFrom((eb) => eb.fn<number>('pg_backend_pid', []).as('pid')).executeTakeFirstOrThrow()).pid;
          await database.store.db.selectNoFrom((eb) => eb.fn<boolean>('pg_terminate_backend', [eb.val(pid)]).as('ended')).execute();
          await trx.selectNoFrom((eb) => eb.lit(1).as('one')).execute();
        })
        .then(() => undefined, (e: unknown) => e);
      expect(error).toBeDefined();
      expect(isDatabaseUnavailable(error)).toBe(true);
    } finally {
      await victim.close().catch(() => undefined);
    }
  });
});

describe('what counts as an unreachable database', () => {
  it('connection exceptions and shutdowns, along the cause chain; not a constraint, a lost race or a plain error', () => {
    expect(isDatabaseUnavailable({ code: '08006' })).toBe(true);
    expect(isDatabaseUnavailable({ code: '08001' })).toBe(true);
    expect(isDatabaseUnavailable({ code: '57P01' })).toBe(true);
    expect(isDatabaseUnavailable(new Error('wrapped', { cause: { code: '08006' } }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9701'), { code: 'ECONNREFUSED' }))).toBe(true);
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    for (const code of ['23505', '40001', '40P01', '55P03', '42P01']) expect(isDatabaseUnavailable({ code })).toBe(false);
    expect(isDatabaseUnavailable(new Error('boom'))).toBe(false);
    expect(isDatabaseUnavailable(null)).toBe(false);
  });
});

/**
 * An adjustment's booking is audited once even when two requests with the same Idempotency-Key
 * race (a retry sent while the first is still being answered), on PostgreSQL and on the embedded
 * database, through the real operator API. The race is gated, not left to timing: the server's
 * database holds every insert into operator_audit until both requests have reached it, so both
 * have booked (the same adjustment) before either writes its audit row. The detector is proved:
 * with the unique index operator_audit_once_per_booking dropped, the same race writes two rows.
 */
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/schema';
import { serveOn, startTestServer, type Backend, type Served, type TestServer } from '../support/http-server';

const OPERATOR = { name: 'ops-race', token: 'kop_race_operator_token_0123456789' };

/** A gate that lets its callers through together once `parties` of them are waiting (or after `timeoutMs`, noted). */
function gate(parties: number, timeoutMs = 15_000) {
  let waiting = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const state = { together: 0, timedOut: false };
  const timer = setTimeout(() => {
    state.timedOut = true;
    open();
  }, timeoutMs);
  return {
    state,
    async pass(): Promise<void> {
      waiting += 1;
      if (waiting === parties) {
        state.together = waiting;
        clearTimeout(timer);
        open();
      }
      await opened;
    },
    close: () => clearTimeout(timer),
  };
}

/** `db` whose inserts into `table` wait at `hold` before they run (every other query as it is). */
function holdingInserts(db: Kysely<Database>, table: string, hold: () => Promise<void>): Kysely<Database> {
  const EXECUTES = new Set(['execute', 'executeTakeFirst', 'executeTakeFirstOrThrow']);
  const wrap = <T extends object>(builder: T): T =>
    new Proxy(builder, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (typeof value !== 'function') return value;
        if (EXECUTES.has(String(prop))) {
          return async (...args: unknown[]) => {
            await hold();
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        return (...args: unknown[]) => {
          const result = (value as (...a: unknown[]) => unknown).apply(target, args);
          return result !== null && typeof result === 'object' && 'execute' in result ? wrap(result) : result;
        };
      },
    });
  return new Proxy(db, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (typeof value !== 'function') return value;
      if (prop === 'insertInto') return (name: string) => (name === table ? wrap(target.insertInto(name as 'operator_audit')) : target.insertInto(name as 'operator_audit'));
      return (value as (...a: unknown[]) => unknown).bind(target);
    },
  });
}

describe.each<Backend>(['harness', 'pglite'])('the audit of a booking on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend, { operatorTokens: [OPERATOR] });
  });
  afterAll(async () => {
    await server?.close();
  });

  /** Two bookings with one key, at once, through a server whose audit inserts wait for each other; the booking's audit rows after. */
  async function race(key: string) {
    const held = gate(2);
    const gated: Served = await serveOn({ ...server.ctx, db: holdingInserts(server.ctx.db, 'operator_audit', held.pass) }, server.kind === 'postgres' ? 'postgres' : 'pglite', { operatorTokens: [OPERATOR] });
    try {
      const book = () =>
        fetch(`${gated.baseUrl}/admin/accounts/acct_http_a/adjustments`, {
          method: 'POST',
          headers: { authorization: `Bearer ${OPERATOR.token}`, 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify({ amount: -700, subject: 'other', reason: 'card fee returned' }),
        }).then(async (response) => ({ status: response.status, body: (await response.json()) as { id: string } }));
      const answers = await Promise.all([book(), book()]);
      expect(answers.map((a) => a.status)).toEqual([200, 200]);
      expect(answers[1]!.body.id).toBe(answers[0]!.body.id);
      // Both requests were at the audit insert together: the race happened.
      expect(held.state).toEqual({ together: 2, timedOut: false });
      const adjustments = await server.ctx.db.selectFrom('adjustments').select('adjustment_id').where('account_id', '=', 'acct_http_a').where('request_key', '=', key).execute();
      expect(adjustments.map((a) => a.adjustment_id)).toEqual([answers[0]!.body.id]);
      return server.ctx.db.selectFrom('operator_audit').selectAll().where('action', '=', 'adjustment.book').where('target', '=', answers[0]!.body.id).execute();
    } finally {
      held.close();
      await gated.close();
    }
  }

  it('two racing requests with one key book once and write one audit row', async () => {
    const rows = await race('race-key-1');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ operator: 'ops-race', account: 'acct_http_a' });
  });

  it('the detector sees the race: without the unique index the same race writes two rows', async () => {
    await sql`DROP INDEX operator_audit_once_per_booking`.execute(server.ctx.db);
    const rows = await race('race-key-2');
    expect(rows).toHaveLength(2);
  });
});

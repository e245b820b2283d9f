/**
 * `kessai simulate --source`: the forecast of a live book equals what the worker then
 * does, the source is never written, the copy is one snapshot, card outcomes, and bad inputs.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_JOBS } from '../../jobs/index';
import { createAccount } from '../../src/accounts/accounts';
import { openStore, type Store } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import { Scheduler } from '../../src/engine/scheduler';
import { runOperation } from '../../src/api/operations';
import { declineRateOf, openForecast } from '../../src/simulation/forecast';
import { simulate } from '../../src/simulation/simulate';
import { overlayScenario, parseScenario, planSteps } from '../../src/simulation/scenario';
import { operationNames } from '../../src/api/operations';
import { openSource } from '../../src/simulation/source-copy';
import { createTestDatabase, isPostgres, testContext, type TestDatabase } from '../support/database';
import { formatJst } from '../../src/domain/time';

const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'kessai-forecast-'));
const ACCOUNT = 'acct_book';
const OTHER = 'acct_other';
/** T: the instant the source's worker has reached when the forecast is taken. */
const T = new Date('2027-02-15T00:00:00Z');
const END = new Date('2027-05-15T00:00:00Z');
const DAY = 86_400_000;

/**
 * Wakes the worker every day at 00:00 JST (the daily jobs' slot) from `from` to `to`: with a
 * one-minute backfill window each wake runs that slot, which processes everything due before it.
 */
async function daily(wakeAt: (at: Date) => Promise<void>, from: Date, to: Date): Promise<void> {
  for (let at = Math.ceil((from.getTime() - 15 * 3_600_000) / DAY) * DAY + 15 * 3_600_000; at < to.getTime(); at += DAY) await wakeAt(new Date(at));
  await wakeAt(to);
}

/** Where the worker of a source that is behind stopped: it has run nothing since. */
const WORKER_STOPPED = new Date('2027-01-31T00:00:00Z');

/**
 * Builds a small live book by operations and the worker (manual clock) up to T. `behind`: the
 * worker stops at WORKER_STOPPED instead, the book's account closes its terms semi-monthly and
 * holds a one-day hold from 2027-02-06, so at T the term that ended with January (JST), its
 * February 10 renewals and that hold's expiry are overdue.
 */
async function buildBook(store: Store, options: { behind?: boolean } = {}) {
  const ctx = testContext(store, { at: new Date('2027-01-10T01:00:00Z'), seed: 1, config: { backfillWindowMs: 60_000 } });
  const scheduler = new Scheduler(ctx, ALL_JOBS, { owner: 'test-worker' });
  const wakeAt = async (at: Date) => {
    ctx.clock.set(at);
    for (const outcome of await scheduler.tick()) expect(outcome.status).toBe('succeeded');
  };
  for (const id of [ACCOUNT, OTHER]) await createAccount(ctx, { id, name: id, ...(options.behind && id === ACCOUNT ? { termCycle: 'semi_monthly' as const } : {}) });
  const caller = (accountId: string) => ({ accountId, livemode: false, kind: 'secret' as const });
  const subscribe = async (accountId: string, plan: string, card: { number: string; exp_month: number; exp_year: number }) => {
    const token = (await runOperation(ctx, caller(accountId), 'tokens.create', { card })) as { id: string };
    const customer = (await runOperation(ctx, caller(accountId), 'customers.create', { card: token.id })) as { id: string };
    return (await runOperation(ctx, caller(accountId), 'subscriptions.create', { customer: customer.id, plan })) as { id: string };
  };
  const monthly = (await runOperation(ctx, caller(ACCOUNT), 'plans.create', { amount: 1980, currency: 'jpy', interval: 'month' })) as { id: string };
  const other = (await runOperation(ctx, caller(OTHER), 'plans.create', { amount: 500, currency: 'jpy', interval: 'month' })) as { id: string };
  const good = await subscribe(ACCOUNT, monthly.id, { number: '4242424242424242', exp_month: 12, exp_year: 2032 });
  // Good through March 2027: its April renewal must fail with expired_card.
  const expiring = await subscribe(ACCOUNT, monthly.id, { number: '4242424242424242', exp_month: 3, exp_year: 2027 });
  await wakeAt(new Date('2027-01-20T03:00:00Z'));
  ctx.clock.set(new Date('2027-01-20T03:00:00Z'));
  const late = await subscribe(ACCOUNT, monthly.id, { number: '5555555555554444', exp_month: 12, exp_year: 2032 });
  await subscribe(OTHER, other.id, { number: '4242424242424242', exp_month: 12, exp_year: 2032 });
  if (!options.behind) {
    await daily(wakeAt, new Date('2027-01-20T03:00:01Z'), T);
    return { ctx, wakeAt, plan: monthly.id, subscriptions: { good: good.id, expiring: expiring.id, late: late.id }, hold: undefined };
  }
  await daily(wakeAt, new Date('2027-01-20T03:00:01Z'), WORKER_STOPPED);
  ctx.clock.set(new Date('2027-02-06T00:00:00Z'));
  const hold = (await runOperation(ctx, caller(ACCOUNT), 'charges.create', { amount: 3000, currency: 'jpy', card: (await runOperation(ctx, caller(ACCOUNT), 'tokens.create', { card: { number: '4242424242424242', exp_month: 12, exp_year: 2032, cvc: '123' } }) as { id: string }).id, capture: false, expiry_days: 1 })) as { id: string };
  // The newest row of the book: the snapshot's instant is T.
  ctx.clock.set(T);
  await runOperation(ctx, caller(ACCOUNT), 'customers.create', { description: 'signed up at T' });
  return { ctx, wakeAt, plan: monthly.id, subscriptions: { good: good.id, expiring: expiring.id, late: late.id }, hold: hold.id };
}

/** A checksum of every table of a database, the ledgers included. */
async function checksums(store: Store): Promise<Record<string, string>> {
  const tables = await sql<{ name: string }>`SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`.execute(store.db);
  const sums: Record<string, string> = {};
  for (const { name } of tables.rows) {
    const row = await sql<{ sum: string | null }>`SELECT md5(string_agg(t::text, E'\n' ORDER BY t::text)) AS sum FROM ${sql.table(name)} t`.execute(store.db);
    sums[name] = row.rows[0]!.sum ?? 'empty';
  }
  return sums;
}

interface ChargeKey {
  subscription: string | null;
  at: string;
  amount: number;
  paid: boolean;
  failure: string | null;
}

async function chargesFrom(store: Pick<Store, 'db'>, from: Date): Promise<ChargeKey[]> {
  const rows = await store.db.selectFrom('charges').select(['subscription_id', 'created_at', 'amount', 'paid', 'failure_code']).where('created_at', '>=', from).execute();
  return rows
    .map((row) => ({ subscription: row.subscription_id, at: row.created_at.toISOString(), amount: Number(row.amount), paid: row.paid, failure: row.failure_code }))
    .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
}

async function statementsFrom(store: Pick<Store, 'db'>, from: Date): Promise<unknown[]> {
  const rows = await store.db.selectFrom('statements').select(['account_id', 'owner', 'owner_ref', 'type', 'title', 'net', 'created_at']).where('created_at', '>=', from).execute();
  return rows.map((row) => JSON.stringify({ ...row, net: Number(row.net), created_at: row.created_at.toISOString() })).sort();
}

function kessai(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', cwd: scratch, env: { ...process.env, DATABASE_URL: '' } });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe.runIf(isPostgres())('simulate --source on a PostgreSQL book', () => {
  let source: TestDatabase;
  let book: Awaited<ReturnType<typeof buildBook>>;
  beforeAll(async () => {
    source = await createTestDatabase();
    book = await buildBook(source.store);
  }, 120_000);
  afterAll(async () => source?.drop());

  // First: the tests after it move the source past T.
  it('a what-if overlay reaches the real subscribers (for_each over subscriptions.list) and generators add sign-ups on top', async () => {
    const overlay = parseScenario(
      JSON.stringify({
        accounts: [{ id: ACCOUNT, fee_rates: { Visa: '2.50' } }],
        timeline: [
          { at: '2027-03-20T10:00:00+09:00', account: ACCOUNT, op: 'plans.create', params: { amount: 2480, currency: 'jpy', interval: 'month' }, ref: 'dearer' },
          {
            at: '2027-03-20T10:05:00+09:00',
            account: ACCOUNT,
            op: 'subscriptions.update',
            for_each: { op: 'subscriptions.list', params: { plan: book.plan } },
            params: { id: '$item', next_cycle_plan: '$dearer' },
          },
        ],
        generators: [{ generate: 'subscribers', account: ACCOUNT, count: 4, plan: book.plan, from: '2027-03-01', to: '2027-03-10' }],
      }),
      'overlay',
    );
    const forecast = await openForecast({ source: source.url!, from: T, accounts: [ACCOUNT], scenario: overlay });
    const steps = planSteps(forecast.scenario, { from: forecast.from, to: new Date('2027-05-01T00:00:00Z'), seed: 2, operations: operationNames() });
    const result = await simulate({ scenario: forecast.scenario, steps, from: forecast.from, to: new Date('2027-05-01T00:00:00Z'), seed: 2, jobs: ALL_JOBS, source: forecast.snapshot }, async (world) => ({
      outcomes: world.outcomes,
      charges: await chargesFrom(world.ctx, T),
    }));
    await forecast.snapshot.close();
    expect(result.outcomes.filter((outcome) => outcome.error !== null)).toEqual([]);
    // Every subscriber of the plan was updated: the three real ones and the four generated before.
    const updated = result.outcomes.filter((outcome) => outcome.op === 'subscriptions.update').map((outcome) => outcome.result?.id);
    expect(updated).toHaveLength(7);
    expect(updated).toEqual(expect.arrayContaining(Object.values(book.subscriptions)));
    const good = result.charges.filter((charge) => charge.subscription === book.subscriptions.good);
    expect(good.map((charge) => [charge.at.slice(0, 7), charge.amount])).toEqual([
      ['2027-03', 1980],
      ['2027-04', 2480],
    ]);
    const generated = result.charges.filter((charge) => !Object.values(book.subscriptions).includes(charge.subscription ?? ''));
    expect(generated.length).toBeGreaterThanOrEqual(4);
  }, 180_000);

  it('dated account settings of an overlay take effect on the copied book at their date, in a --scenario file and in a what-if', async () => {
    const end = new Date('2027-05-01T00:00:00Z');
    // Visa charges of the book's account: 3.00 % before April, 2.50 % from April 1 (JST).
    const dated = { accounts: [{ id: ACCOUNT, from: '2027-04-01', fee_rates: { Visa: '2.50' }, options: { reauth_lead_hours: 48 } }] };
    const feeRates = async (store: Pick<Store, 'db'>) =>
      (
        await store.db.selectFrom('charges').select(['created_at', 'fee_rate']).where('subscription_id', 'in', [book.subscriptions.good, book.subscriptions.expiring]).where('created_at', '>=', T).orderBy('created_at').execute()
      ).map((row) => [row.created_at.toISOString().slice(0, 7), Number(row.fee_rate)]);
    const run = async (scenario: ReturnType<typeof parseScenario> | undefined, whatIf: ReturnType<typeof parseScenario> | undefined) => {
      const forecast = await openForecast({ source: source.url!, from: 'now', accounts: [ACCOUNT], ...(scenario ? { scenario } : {}) });
      try {
        const planned = whatIf ? overlayScenario(forecast.scenario, whatIf) : forecast.scenario;
        const steps = planSteps(planned, { from: forecast.from, to: end, seed: 2, operations: operationNames() });
        return await simulate({ scenario: planned, steps, from: forecast.from, to: end, seed: 2, jobs: ALL_JOBS, source: forecast.snapshot }, async (world) => ({
          fees: await feeRates(world.ctx),
          leadHours: (await world.ctx.db.selectFrom('accounts').select('reauth_lead_hours').where('account_id', '=', ACCOUNT).executeTakeFirstOrThrow()).reauth_lead_hours,
          failed: world.outcomes.filter((outcome) => outcome.error !== null),
        }));
      } finally {
        await forecast.snapshot.close();
      }
    };
    const asWhatIf = await run(undefined, parseScenario(JSON.stringify(dated), 'what-if'));
    const inScenario = await run(parseScenario(JSON.stringify(dated), 'scenario'), undefined);
    const unchanged = await run(undefined, undefined);
    expect(asWhatIf.failed).toEqual([]);
    // Two Visa subscribers renew in March and April; the copied book's rate before, the new one after.
    expect(unchanged.fees).toEqual([
      ['2027-03', 3],
      ['2027-03', 3],
      ['2027-04', 3],
      ['2027-04', 3],
    ]);
    expect(asWhatIf.fees).toEqual([
      ['2027-03', 3],
      ['2027-03', 3],
      ['2027-04', 2.5],
      ['2027-04', 2.5],
    ]);
    expect(asWhatIf.leadHours).toBe(48);
    expect(unchanged.leadHours).not.toBe(48);
    expect(inScenario).toEqual(asWhatIf);
  }, 180_000);

  it('the forecast from T equals what the worker then does, and the source is unchanged byte for byte', async () => {
    const before = await checksums(source.store);
    const forecast = await openForecast({ source: source.url!, from: 'now', accounts: [ACCOUNT, OTHER] });
    expect(forecast.from.toISOString()).toBe(T.toISOString());
    const forecasted = await simulate(
      { scenario: forecast.scenario, steps: [], from: forecast.from, to: END, seed: 7, jobs: ALL_JOBS, source: forecast.snapshot },
      async (world) => ({ charges: await chargesFrom(world.ctx, T), statements: await statementsFrom(world.ctx, T), accounts: world.accounts }),
    );
    await forecast.snapshot.close();
    expect(await checksums(source.store)).toEqual(before);
    expect(forecasted.accounts).toEqual([ACCOUNT, OTHER]);

    // The expiring card's April renewal fails with expired_card, its March one is paid.
    const expiring = forecasted.charges.filter((charge) => charge.subscription === book.subscriptions.expiring);
    expect(expiring.map((charge) => [charge.at.slice(0, 7), charge.paid, charge.failure])).toEqual([
      ['2027-03', true, null],
      ['2027-04', false, 'expired_card'],
    ]);

    // What happens: the worker on the source, advanced over the same range.
    await daily(book.wakeAt, new Date(T.getTime() + 1), new Date(END.getTime() - 1));
    const happened = { charges: await chargesFrom(source.store, T), statements: await statementsFrom(source.store, T) };
    expect(forecasted.charges.length).toBeGreaterThanOrEqual(10);
    expect(forecasted.statements.length).toBeGreaterThan(0);
    expect(forecasted.charges).toEqual(happened.charges);
    expect(forecasted.statements).toEqual(happened.statements);
  }, 180_000);

  it('copies one snapshot: rows the worker writes after the snapshot is taken are not in the copy', async () => {
    const snapshot = await openSource(source.url!, { accounts: [ACCOUNT] });
    const counted = async (store: Pick<Store, 'db'>) =>
      Number((await sql<{ n: string }>`SELECT count(*)::text AS n FROM customers WHERE account_id = ${ACCOUNT}`.execute(store.db)).rows[0]!.n);
    const atSnapshot = await counted(source.store);
    // Another process writes to the source meanwhile.
    const writer = await source.openAnother();
    const ctx = testContext(writer, { at: new Date('2027-06-01T00:00:00Z'), seed: 99 });
    await runOperation(ctx, { accountId: ACCOUNT, livemode: false, kind: 'secret' }, 'customers.create', { description: 'after the snapshot' });
    expect(await counted(source.store)).toBe(atSnapshot + 1);
    const target = await openStore({ dataDir: 'memory://' });
    try {
      await migrate(target);
      const copied = await snapshot.copyInto(target);
      expect(copied.customers).toBe(atSnapshot);
      expect(await counted(target)).toBe(atSnapshot);
      expect(Object.keys(copied)).not.toContain('job_runs');
      expect(Object.keys(copied)).toContain('subscriptions');
      // The book's size, which places a large forecast's database in a folder, counts the chosen account's subscriptions.
      expect(snapshot.subscriptions).toBe(copied.subscriptions);
      expect(snapshot.subscriptions).toBeGreaterThan(0);
      // Only the chosen account.
      const others = await sql<{ n: string }>`SELECT count(*)::text AS n FROM subscriptions WHERE account_id <> ${ACCOUNT}`.execute(target.db);
      expect(others.rows[0]!.n).toBe('0');
    } finally {
      await snapshot.close();
      await target.close();
    }
  }, 60_000);

  it('the decline rate, a scenario field or the command-line option (which wins), is deterministic under a seed', async () => {
    const run = async (seed: number, scenario: ReturnType<typeof parseScenario>, commandLine?: number) => {
      const forecast = await openForecast({ source: source.url!, from: 'now', accounts: [ACCOUNT], scenario });
      const decline = declineRateOf(commandLine, forecast.scenario);
      try {
        const charges = await simulate(
          { scenario: forecast.scenario, steps: [], from: forecast.from, to: new Date('2027-12-01T00:00:00Z'), seed, jobs: ALL_JOBS, source: forecast.snapshot, ...(commandLine !== undefined ? { declineRate: commandLine } : {}) },
          (world) => chargesFrom(world.ctx, forecast.from),
        );
        return { charges, decline };
      } finally {
        await forecast.snapshot.close();
      }
    };
    const half = parseScenario(JSON.stringify({ decline_rate: 0.5 }), 'scenario');
    const [a, b, other] = [await run(3, half), await run(3, half), await run(4, half)];
    expect(a).toEqual(b);
    expect(a.decline).toEqual({ rate: 0.5, from: 'scenario (decline_rate)' });
    const declined = (charges: ChargeKey[]) => charges.filter((charge) => charge.failure === 'card_declined').map((charge) => `${charge.subscription} ${charge.at}`);
    expect(declined(a.charges).length).toBeGreaterThan(0);
    // Another seed, other draws (the renewals after a decline differ too: the subscription pauses).
    expect(other.charges).not.toEqual(a.charges);
    // The command line wins: 0 there declines nothing whatever the scenario says.
    const none = await run(3, half, 0);
    expect(none.decline).toEqual({ rate: 0, from: 'command line (--decline-rate)' });
    expect(declined(none.charges)).toEqual([]);
  }, 240_000);

  describe('bad input: one clear line, nothing written anywhere', () => {
    const out = join(scratch, 'out');
    const marker = join(out, 'keep.txt');
    // The simulation's database is on a server that does not answer: had a refusal come after
    // the scratch database was made, the message would be that server's, not the refusal's.
    const serverUrl = () => 'postgres://postgres@127.0.0.1:2/kessai';
    const refused = async (args: string[], message: RegExp, database: Store = source.store) => {
      mkdirSync(out, { recursive: true });
      writeFileSync(marker, 'mine');
      const before = await checksums(database);
      const result = kessai(['--database-url', serverUrl(), 'simulate', '--to', '2027-06-01', '--out', out, ...args]);
      expect(result.status, result.stderr).toBe(1);
      const lines = result.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(message);
      expect(result.stderr).not.toContain('secret');
      expect(readFileSync(marker, 'utf8')).toBe('mine');
      expect(readdirSync(out)).toEqual(['keep.txt']);
      expect(await checksums(database)).toEqual(before);
    };

    it('an unreachable source', async () => {
      await refused(['--source', 'postgres://postgres:secret@127.0.0.1:1/nowhere', '--from', 'now'], /^kessai: cannot connect to the source 127\.0\.0\.1:1\/nowhere: /);
    }, 60_000);

    it('an unknown account', async () => {
      await refused(['--source', source.url!, '--from', 'now', '--account', ACCOUNT, '--account', 'acct_nobody'], /^kessai: the source .* has no account "acct_nobody"$/);
    }, 60_000);

    it('a --from before the snapshot', async () => {
      await refused(['--source', source.url!, '--from', '2027-01-01'], /^kessai: --from 2026-12-31T15:00:00\.000Z is before the snapshot of .*: .*use --from now$/);
    }, 60_000);

    it('a source whose migrations are newer or older than this kessai', async () => {
      const newer = await createTestDatabase();
      const older = await createTestDatabase();
      try {
        await sql`INSERT INTO kessai_migrations (name, checksum) VALUES ('999999_from_the_future.sql', 'x')`.execute(newer.store.db);
        const last = await sql<{ name: string }>`SELECT max(name) AS name FROM kessai_migrations`.execute(older.store.db);
        await sql`DELETE FROM kessai_migrations WHERE name = ${last.rows[0]!.name}`.execute(older.store.db);
        await refused(['--source', newer.url!, '--from', 'now'], /^kessai: the source .* is newer than this kessai: it has migrations this kessai lacks \(999999_from_the_future\.sql\)/, newer.store);
        await refused(['--source', older.url!, '--from', 'now'], /^kessai: the source .* is older than this kessai: migrations .* are not applied there/, older.store);
      } finally {
        await newer.drop();
        await older.drop();
      }
    }, 60_000);
  });
});

describe.runIf(isPostgres())('simulate --source on a book whose worker is behind', () => {
  let source: TestDatabase;
  let book: Awaited<ReturnType<typeof buildBook>>;
  beforeAll(async () => {
    source = await createTestDatabase();
    book = await buildBook(source.store, { behind: true });
  }, 120_000);
  afterAll(async () => source?.drop());

  it('work overdue at --from runs at its first slot, as the worker runs it when it catches up', async () => {
    const end = new Date('2027-04-01T00:00:00Z');
    const holdState = async (store: Pick<Store, 'db'>) =>
      store.db.selectFrom('charges').select(['amount_refunded', 'captured']).select(sql<string | null>`to_char(released_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')`.as('released')).where('amount', '=', 3000).where('account_id', '=', ACCOUNT).execute();
    const forecast = await openForecast({ source: source.url!, from: 'now', accounts: [ACCOUNT, OTHER] });
    expect(forecast.from.toISOString()).toBe(T.toISOString());
    const forecasted = await simulate({ scenario: forecast.scenario, steps: [], from: forecast.from, to: end, seed: 7, jobs: ALL_JOBS, source: forecast.snapshot }, async (world) => ({
      charges: await chargesFrom(world.ctx, WORKER_STOPPED),
      statements: await statementsFrom(world.ctx, WORKER_STOPPED),
      hold: await holdState(world.ctx),
    }));
    await forecast.snapshot.close();
    // Overdue at T: the February 10 renewals, dated at their own due instant,
    const renewals = forecasted.charges.filter((charge) => charge.at.startsWith('2027-02-10'));
    expect(renewals.map((charge) => charge.subscription).sort()).toEqual([book.subscriptions.expiring, book.subscriptions.good].sort());
    // the hold past its expiry, released,
    expect(forecasted.hold).toHaveLength(1);
    expect(forecasted.hold[0]!.released).not.toBeNull();
    // and the term that ended with January, closed at its end.
    expect(forecasted.statements.some((line) => (JSON.parse(line as string) as { created_at: string }).created_at === '2027-01-31T15:00:00.000Z')).toBe(true);

    // What happens: the worker catches up at its next wake-up after T, then runs on.
    await daily(book.wakeAt, new Date(T.getTime() + 1), new Date(end.getTime() - 1));
    expect(forecasted.charges).toEqual(await chargesFrom(source.store, WORKER_STOPPED));
    expect(forecasted.statements).toEqual(await statementsFrom(source.store, WORKER_STOPPED));
    expect(forecasted.hold).toEqual(await holdState(source.store));
  }, 240_000);
});

/** Every file of a folder with its sha-256, for "never written". */
function folderChecksums(dir: string): Record<string, string> {
  const sums: Record<string, string> = {};
  const walk = (at: string) => {
    for (const name of readdirSync(at)) {
      const path = join(at, name);
      if (statSync(path).isDirectory()) walk(path);
      else sums[path.slice(dir.length)] = `${statSync(path).mtimeMs}:${createHash('sha256').update(readFileSync(path)).digest('hex')}`;
    }
  };
  walk(dir);
  return sums;
}

describe('simulate --source on an embedded data folder', () => {
  it('forecasts from the folder, reads it without writing a byte, and names it in the report', async () => {
    const dir = join(scratch, 'book');
    const store = await openStore({ dataDir: dir });
    await migrate(store);
    await buildBook(store);
    await store.close();
    const before = folderChecksums(dir);
    const out = join(scratch, 'embedded-out');
    // The expected decline rate as a field: the scenario's for the baseline, the what-if's for the variant.
    writeFileSync(join(scratch, 'declines.json'), JSON.stringify({ decline_rate: 0.01 }));
    writeFileSync(join(scratch, 'more-declines.json'), JSON.stringify({ name: 'more declines', decline_rate: 0.5 }));
    const result = kessai(['simulate', '--source', dir, '--from', 'now', '--to', '2027-05-15', '--out', out, '--scenario', join(scratch, 'declines.json'), '--what-if', join(scratch, 'more-declines.json')]);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain(`Forecast of embedded ${dir} (accounts ${ACCOUNT}, ${OTHER}), snapshot at ${formatJst(T)}`);
    expect(folderChecksums(dir)).toEqual(before);
    type Report = { source: { name: string; snapshot_instant: string; assumptions: Record<string, unknown> }; charges: { failure_code: string | null }[] };
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as Report;
    const variant = JSON.parse(readFileSync(join(out, 'variant', 'report.json'), 'utf8')) as Report;
    expect(report.source.assumptions).toMatchObject({ decline_rate: 0.01, decline_rate_from: 'scenario (decline_rate)' });
    expect(variant.source.assumptions).toMatchObject({ decline_rate: 0.5, decline_rate_from: 'what-if (decline_rate)' });
    expect(report.source.name).toBe(`embedded ${dir}`);
    expect(report.source.snapshot_instant).toBe('2027-02-15T00:00:00Z');
    expect(report.charges.some((charge) => charge.failure_code === 'expired_card')).toBe(true);
    // The copied history (January's charges) is in report.json, the summary starts at --from.
    expect(report.charges.length).toBeGreaterThan(0);
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as { baseline: { months: { month: string; mrr_yen: number; subscriptions: { active: number } }[] } };
    expect(summary.baseline.months.map((m) => m.month)).toEqual(['2027-02', '2027-03', '2027-04', '2027-05']);
    // February, the month --from falls in, has its month-end figures like the others.
    const [february] = summary.baseline.months;
    expect(february!.subscriptions.active).toBeGreaterThan(0);
    expect(february!.mrr_yen).toBeGreaterThan(0);
  }, 240_000);
});

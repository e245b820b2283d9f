/**
 * `kessai simulate`: determinism, agreement with the worker, and clear errors for bad
 * scenario files. The golden replays are in test/replay.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_JOBS } from '../../jobs/index';
import { createAccount } from '../../src/accounts/accounts';
import { parseInstant } from '../../src/domain/time';
import { Scheduler } from '../../src/engine/scheduler';
import { LIST_ONLY_INDEXES, resolveParams, simulate } from '../../src/simulation/simulate';
import { operationNames, runOperation } from '../../src/api/operations';
import { writeReport, type Summary } from '../../src/simulation/report';
import { DEFAULT_ACCOUNT_ID, loadScenario, overlayScenario, parseScenario, planSteps, ScenarioError, type Scenario } from '../../src/simulation/scenario';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';

const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));
const CASES = fileURLToPath(new URL('../replay/cases/', import.meta.url));
const databaseUrl = process.env.DATABASE_URL;
const scratch = mkdtempSync(join(tmpdir(), 'kessai-simulate-'));

interface Run {
  readonly report: string;
  readonly summary: Summary;
}

async function run(scenario: Scenario, from: string, to: string, seed: number): Promise<Run> {
  const range = { from: parseInstant(from), to: parseInstant(to) };
  const steps = planSteps(scenario, { ...range, seed, operations: operationNames() });
  const dir = mkdtempSync(join(scratch, 'run-'));
  const { summary } = await simulate({ scenario, steps, ...range, seed, jobs: ALL_JOBS, databaseUrl }, (world) =>
    writeReport(world, { scenario: scenario.name ?? null, ...range, seed }, dir),
  );
  return { report: readFileSync(join(dir, 'report.json'), 'utf8'), summary };
}

/** The pause-resume replay case over its range (2027-01 → 2027-05), planned with seed 1. */
function pauseResume() {
  const scenario = loadScenario(join(CASES, 'pause-resume.json'));
  const range = { from: parseInstant('2027-01-01'), to: parseInstant('2027-05-01') };
  return { scenario, range, steps: planSteps(scenario, { ...range, seed: 1, operations: operationNames() }) };
}

describe('determinism', () => {
  const scenario = loadScenario(join(CASES, 'pause-resume.json'));

  it('the same scenario, range and seed give a byte-identical report.json', async () => {
    const [a, b] = [await run(scenario, '2027-01-01', '2027-05-01', 3), await run(scenario, '2027-01-01', '2027-05-01', 3)];
    expect(a.report.length).toBeGreaterThan(1000);
    expect(a.report).toBe(b.report);
  }, 120_000);

  it('a different seed gives different ids and the same money (outcomes here come from the card table alone)', async () => {
    const [a, b] = [await run(scenario, '2027-01-01', '2027-05-01', 3), await run(scenario, '2027-01-01', '2027-05-01', 4)];
    const ids = (report: string) => (JSON.parse(report) as { charges: { id: string }[] }).charges.map((charge) => charge.id);
    expect(ids(a.report)).toHaveLength(7);
    expect(ids(a.report).filter((id) => ids(b.report).includes(id))).toEqual([]);
    expect(a.summary.months).toEqual(b.summary.months);
    expect(a.summary.totals.captured_yen).toBe(1980 * 6);
  }, 120_000);
});

describe('the embedded simulation database', () => {
  it('is in memory with unlogged tables (no write-ahead log for a database that dies with the run)', async () => {
    const { scenario, range, steps } = pauseResume();
    // Twice: the first run may build the cached snapshot, the second starts from it.
    await simulate({ scenario, steps, ...range, seed: 1, jobs: ALL_JOBS }, async () => undefined);
    const persistence = await simulate({ scenario, steps, ...range, seed: 1, jobs: ALL_JOBS }, async (world) => {
      const tables = await sql<{ name: string; persistence: string }>`
        SELECT c.relname AS name, c.relpersistence AS persistence FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i')`.execute(world.ctx.db);
      return tables.rows;
    });
    expect(persistence.map((t) => t.name)).toEqual(expect.arrayContaining(['charges', 'events', 'subscriptions', 'charges_pkey']));
    expect(persistence.filter((t) => t.persistence !== 'u').map((t) => t.name).sort()).toEqual(['kessai_migrations', 'kessai_migrations_pkey']);
  }, 120_000);
});

describe('the simulation database, embedded or scratch', () => {
  it('sorts text by bytes (collation C), so the report\'s order does not depend on the server\'s locale', async () => {
    const { scenario, range, steps } = pauseResume();
    const collation = await simulate({ scenario, steps, ...range, seed: 1, jobs: ALL_JOBS, databaseUrl }, async (world) => {
      const result = await sql<{ collate: string; sorted: string }>`
        SELECT (SELECT datcollate FROM pg_database WHERE datname = current_database()) AS collate,
               (SELECT string_agg(x, ' ' ORDER BY x) FROM (VALUES ('b'), ('_a'), ('B'), ('a'), ('é')) AS v(x)) AS sorted`.execute(world.ctx.db);
      return result.rows[0]!;
    });
    expect(collation).toEqual({ collate: 'C', sorted: 'B _a a b é' });
  }, 120_000);

  it('has no index that only the API\'s lists read, and a list call still answers in full and in order', async () => {
    const { scenario, range, steps } = pauseResume();
    const seen = await simulate({ scenario, steps, ...range, seed: 1, jobs: ALL_JOBS, databaseUrl }, async (world) => {
      const indexes = await sql<{ name: string }>`SELECT indexname AS name FROM pg_indexes WHERE schemaname = current_schema()`.execute(world.ctx.db);
      const caller = { accountId: DEFAULT_ACCOUNT_ID, livemode: false, kind: 'secret' as const };
      const customer = (await sql<{ id: string }>`SELECT customer_id AS id FROM charges GROUP BY customer_id ORDER BY count(*) DESC, customer_id LIMIT 1`.execute(world.ctx.db)).rows[0]!.id;
      const listed = (await runOperation(world.ctx, caller, 'charges.list', { customer, limit: 100 })) as { data: { id: string }[] };
      const stored = await sql<{ id: string }>`SELECT charge_id AS id FROM charges WHERE customer_id = ${customer} ORDER BY created_at DESC, charge_id DESC`.execute(world.ctx.db);
      return { indexes: indexes.rows.map((row) => row.name), listed: listed.data.map((charge) => charge.id), stored: stored.rows.map((row) => row.id) };
    });
    expect(seen.indexes.filter((name) => (LIST_ONLY_INDEXES as readonly string[]).includes(name))).toEqual([]);
    // What the jobs and the report read stays: keys, due indexes, charges by term, events by creation.
    expect(seen.indexes).toEqual(expect.arrayContaining(['charges_pkey', 'charges_one_per_period', 'subscriptions_due', 'charges_by_term', 'charges_hold_due', 'events_by_created']));
    expect(seen.stored.length).toBeGreaterThan(2);
    expect(seen.listed).toEqual(seen.stored);
  }, 120_000);
});

describe('the report\'s events section (streamed by COPY on a server, a cursor on PGlite)', () => {
  it('is laid out like every other section: empty, one event, several', async () => {
    const token = (at: string) => ({ at, op: 'tokens.create', params: { card: { number: '4242424242424242', exp_month: 12, exp_year: 2032 } } });
    for (const timeline of [[], [token('2027-01-02T10:00:00+09:00')], [token('2027-01-02T10:00:00+09:00'), token('2027-01-03T10:00:00+09:00')]]) {
      const { report } = await run(parseScenario(JSON.stringify({ timeline }), 'events layout'), '2027-01-01', '2027-01-05', 1);
      const events = (JSON.parse(report) as { events: unknown[] }).events;
      expect(events).toHaveLength(timeline.length);
      const section = report.slice(report.indexOf('\n  "events": '));
      const lines = events.map((event) => `    ${JSON.stringify(event)}`).join(',\n');
      expect(section).toBe(`\n  "events": ${events.length === 0 ? '[]' : `[\n${lines}\n  ]`}\n}\n`);
    }
  }, 120_000);
});

describe('planner statistics of the simulation database', () => {
  it('are refreshed from a small sample (statistics target 10) as the tables grow', async () => {
    const scenario = parseScenario(
      JSON.stringify({
        plans: [{ ref: 'monthly', params: { amount: 980, currency: 'jpy', interval: 'month' } }],
        generators: [{ generate: 'subscribers', ref: 'gen', count: 60, plan: '$monthly', from: '2027-01-01', to: '2027-01-10' }],
      }),
      'statistics scenario',
    );
    const range = { from: parseInstant('2027-01-01'), to: parseInstant('2027-03-01') };
    const steps = planSteps(scenario, { ...range, seed: 1, operations: operationNames() });
    const stats = await simulate({ scenario, steps, ...range, seed: 1, jobs: ALL_JOBS, databaseUrl }, async (world) => {
      const result = await sql<{ table: string; buckets: number }>`
        SELECT tablename AS table, max(cardinality(histogram_bounds::text::text[]))::int AS buckets FROM pg_stats
        WHERE schemaname = current_schema() AND tablename IN ('customers', 'charges') AND attname IN ('customer_id', 'charge_id')
        GROUP BY tablename ORDER BY tablename`.execute(world.ctx.db);
      return result.rows;
    });
    // 60 distinct ids in each: a histogram of the default target would hold all 60 (and more).
    expect(stats).toEqual([
      { table: 'charges', buckets: 11 },
      { table: 'customers', buckets: 11 },
    ]);
  }, 120_000);
});

describe('simulation and worker agree', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => database?.drop());

  it('the worker\'s scheduler on a manual clock, fed the same timeline, writes the same charges as simulate', async () => {
    const scenario = loadScenario(join(CASES, 'proration.json'));
    const [from, to] = [parseInstant('2027-01-01'), parseInstant('2027-06-01')];
    const seed = 21;
    const steps = planSteps(scenario, { from, to, seed, operations: operationNames() });
    const simulated = JSON.parse((await run(scenario, '2027-01-01', '2027-06-01', seed)).report) as {
      steps: { ref: string | null; result: { id: string } | null }[];
      charges: { subscription: string | null; amount: number; created: number; paid: boolean; amount_refunded: number }[];
    };

    // The worker: a backfill window of one minute, so each wake-up runs the current slot, which
    // processes everything due before it — as after an outage.
    const ctx = testContext(database.store, { at: from, seed, config: { backfillWindowMs: 60_000 } });
    await createAccount(ctx, { id: DEFAULT_ACCOUNT_ID, name: 'Simulation' });
    const scheduler = new Scheduler(ctx, ALL_JOBS, { owner: 'test-worker' });
    const results = new Map<string, Record<string, unknown>>();
    const caller = { accountId: DEFAULT_ACCOUNT_ID, livemode: false, kind: 'secret' as const };
    const wakeAt = async (at: Date) => {
      ctx.clock.set(at);
      for (const outcome of await scheduler.tick()) expect(outcome.status).toBe('succeeded');
    };
    for (const step of steps) {
      await wakeAt(step.at);
      const result = (await runOperation(ctx, caller, step.op, resolveParams(step.params, results as never, step.entry))) as Record<string, unknown>;
      if (step.ref) results.set(step.ref, result);
    }
    for (let at = steps.at(-1)!.at.getTime() + 7 * 86_400_000; at < to.getTime(); at += 7 * 86_400_000) await wakeAt(new Date(at));
    await wakeAt(new Date(to.getTime() - 1));

    // Ids differ between the runs (the ledger and the ids interleave differently); compare by label.
    const labelOf = (pairs: [string, string][]) => new Map(pairs.map(([ref, id]) => [id, ref]));
    const simLabels = labelOf(simulated.steps.flatMap((s) => (s.ref && s.result ? [[s.ref, s.result.id] as [string, string]] : [])));
    const workerLabels = labelOf([...results].map(([ref, result]) => [ref, String(result.id)]));
    const workerRows = await ctx.db.selectFrom('charges').selectAll().orderBy('created_at').orderBy('charge_id').execute();
    const key = (c: { subscription: string; amount: number; created: number; paid: boolean; refunded: number }) => JSON.stringify(c);
    const fromSimulation = simulated.charges.map((c) => key({ subscription: simLabels.get(c.subscription!)!, amount: c.amount, created: c.created, paid: c.paid, refunded: c.amount_refunded })).sort();
    const fromWorker = workerRows
      .map((c) => key({ subscription: workerLabels.get(c.subscription_id!)!, amount: c.amount, created: Math.floor(c.created_at.getTime() / 1000), paid: c.paid, refunded: c.amount_refunded }))
      .sort();
    expect(fromSimulation.length).toBeGreaterThan(10);
    expect(fromWorker).toEqual(fromSimulation);
  }, 180_000);
});

describe('example scenarios (scripts/scenarios)', () => {
  const EXAMPLES = fileURLToPath(new URL('../../scripts/scenarios/', import.meta.url));
  const ranges: Record<string, [string, string]> = {
    'saas.json': ['2027-01-01', '2028-01-01'],
    'marketplace.json': ['2027-04-01', '2027-08-01'],
    'holds-shop.json': ['2027-03-01', '2027-05-01'],
  };

  it('match the committed JSON Schema and plan without errors over their documented ranges', () => {
    for (const [file, [from, to]] of Object.entries(ranges)) {
      const scenario = loadScenario(join(EXAMPLES, file));
      const steps = planSteps(scenario, { from: parseInstant(from), to: parseInstant(to), seed: 1, operations: operationNames() });
      expect(steps.length, file).toBeGreaterThan(5);
    }
    const saas = loadScenario(join(EXAMPLES, 'saas.json'));
    const overlay = loadScenario(join(EXAMPLES, 'saas-new-plan.what-if.json'));
    const variant = overlayScenario(saas, overlay);
    expect(variant.accounts).toEqual([{ ...saas.accounts![0], fee_rates: { Visa: '2.50' }, options: {} }]);
    expect(planSteps(variant, { from: parseInstant('2027-01-01'), to: parseInstant('2028-01-01'), seed: 1, operations: operationNames() }).length).toBe(
      planSteps(saas, { from: parseInstant('2027-01-01'), to: parseInstant('2028-01-01'), seed: 1, operations: operationNames() }).length + 2,
    );
  });
});

describe('bad scenario files', () => {
  const minimal = (timeline: unknown[]): Scenario =>
    parseScenario(JSON.stringify({ plans: [{ ref: 'p', params: { amount: 500, currency: 'jpy', interval: 'month' } }], timeline }), 'inline');
  const plan = (scenario: Scenario, from = '2027-01-01', to = '2027-02-01') =>
    planSteps(scenario, { from: parseInstant(from), to: parseInstant(to), seed: 1, operations: operationNames() });

  it('an unknown operation is named with its entry', () => {
    expect(() => plan(minimal([{ at: '2027-01-02', op: 'subscriptions.explode', params: {} }]))).toThrow(
      /timeline\[0\] \(subscriptions\.explode at 2027-01-02 00:00 \+09:00\): unknown operation "subscriptions\.explode"/,
    );
  });

  it('an unknown $label is named with its entry', () => {
    expect(() => plan(minimal([{ at: '2027-01-02', op: 'subscriptions.create', params: { plan: '$p', customer: '$nobody' } }]))).toThrow(/timeline\[0\].*\$nobody does not name an earlier entry/);
  });

  it('a label used before the entry that defines it is refused', () => {
    const scenario = minimal([
      { at: '2027-01-03', op: 'customers.create', params: {}, ref: 'late' },
      { at: '2027-01-02', op: 'subscriptions.create', params: { plan: '$p', customer: '$late' } },
    ]);
    expect(() => plan(scenario)).toThrow(/timeline\[1\].*\$late does not name an earlier entry/);
  });

  it('--from after --to, and entries outside the range, are refused', () => {
    expect(() => plan(minimal([]), '2027-02-01', '2027-01-01')).toThrow(ScenarioError);
    expect(() => plan(minimal([{ at: '2027-03-01', op: 'customers.create' }]))).toThrow(/timeline\[0\].*outside the simulated range/);
  });

  it('a file that does not match the schema names the field', () => {
    expect(() => parseScenario(JSON.stringify({ timeline: [{ at: '2027-01-02', params: {} }] }), 'bad.json')).toThrow(/bad\.json: timeline\[0\]: must have required property 'op'/);
    expect(() => parseScenario(JSON.stringify({ plans: [{ params: {}, colour: 'red' }] }), 'bad.json')).toThrow(/plans\[0\].*\(colour\)/);
  });

  function kessai(args: string[]) {
    const { DATABASE_URL: _ignored, ...env } = process.env;
    return spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', timeout: 120_000 });
  }

  it('the CLI exits non-zero with the entry named: bad params are run, reported, and exit 2; bad files exit 1 before anything runs', () => {
    const file = join(scratch, 'bad-params.json');
    writeFileSync(
      file,
      JSON.stringify({
        plans: [{ ref: 'p', params: { amount: 500, currency: 'jpy', interval: 'fortnight' } }],
        timeline: [{ at: '2027-01-02', op: 'customers.create', params: { email: 'x@example.com' } }],
      }),
    );
    const out = join(scratch, 'out-bad');
    const refused = kessai(['simulate', '--scenario', file, '--from', '2027-01-01', '--to', '2027-01-10', '--out', out]);
    expect(refused.status).toBe(2);
    expect(refused.stderr).toMatch(/plans\[0\] \(plans\.create at 2027-01-01 00:00 \+09:00\): invalid_interval \(param interval\)/);
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { steps: { entry: string; error: { code: string } | null }[] };
    expect(report.steps.map((s) => [s.entry, s.error?.code ?? null])).toEqual([
      ['plans[0]', 'invalid_interval'],
      ['timeline[0]', null],
    ]);

    const backwards = kessai(['simulate', '--scenario', file, '--from', '2027-02-01', '--to', '2027-01-01']);
    expect(backwards.status).toBe(1);
    // In JST, as typed.
    expect(backwards.stderr).toMatch(/--from \(2027-02-01 00:00 \+09:00\) must be before --to \(2027-01-01 00:00 \+09:00\); --to is exclusive/);

    writeFileSync(file, JSON.stringify({ timeline: [{ at: '2027-01-02', op: 'nope.nothing', params: {} }] }));
    const unknown = kessai(['simulate', '--scenario', file, '--from', '2027-01-01', '--to', '2027-01-10', '--out', join(scratch, 'never')]);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toMatch(/timeline\[0\] \(nope\.nothing at .*\): unknown operation/);
  }, 120_000);
});

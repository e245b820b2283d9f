/**
 * Generated subscribers signed up in bulk (src/subscriptions/new-subscribers.ts) give the world
 * their three calls one by one give: the same report but for ids. The scenario makes the bulk
 * batches meet every kind of cut: day-31 and billing-day-1 renewals and a term close falling
 * inside the sign-up range, trials ending within one run of sign-ups, a timeline entry between
 * the generated ones, other accounts.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ALL_JOBS } from '../../jobs/index';
import { parseInstant } from '../../src/domain/time';
import { simulate } from '../../src/simulation/simulate';
import { operationNames } from '../../src/api/operations';
import { writeReport } from '../../src/simulation/report';
import { parseScenario, planSteps, type Scenario } from '../../src/simulation/scenario';

const databaseUrl = process.env.DATABASE_URL;
const scratch = mkdtempSync(join(tmpdir(), 'kessai-new-subscribers-'));

const scenario: Scenario = parseScenario(
  JSON.stringify({
    name: 'bulk sign-ups',
    accounts: [{ id: 'acct_one' }, { id: 'acct_two', term_cycle: 'semi_monthly' }, { id: 'acct_three' }],
    plans: [
      { ref: 'monthly', params: { amount: 980, currency: 'jpy', interval: 'month' } },
      { ref: 'day31', params: { amount: 3100, currency: 'jpy', interval: 'month', billing_day: 31 } },
      { ref: 'weekly', account: 'acct_three', params: { amount: 700, currency: 'jpy', interval: 'month' } },
      { ref: 'day1', account: 'acct_two', params: { amount: 1500, currency: 'jpy', interval: 'month', billing_day: 1 } },
    ],
    generators: [
      { generate: 'subscribers', ref: 'm_', count: 60, plan: '$monthly', from: '2027-01-20', to: '2027-02-10', card_mix: { declined: 0.2, overseas: 0.2, debit: 0.2 } },
      { generate: 'subscribers', ref: 'd_', count: 40, plan: '$day31', from: '2027-01-25', to: '2027-02-05', params: { prorate: true, metadata: { cohort: 'd31' } } },
      { generate: 'subscribers', ref: 't_', count: 30, plan: '$day1', account: 'acct_two', from: '2027-01-10', to: '2027-01-20', params: { trial_end: 1_803_000_000 } },
      // Trials ending within the run of sign-ups (2027-05-11 09:00 JST): the bulk batch makes work
      // due before its own last subscriber and must be cut there. (Sign-ups after it are refused:
      // their trial_end has passed.)
      { generate: 'subscribers', ref: 'w_', count: 30, plan: '$weekly', account: 'acct_three', from: '2027-05-10', to: '2027-05-15', params: { trial_end: 1_809_993_600 } },
      // Thirty sign-ups within ten seconds: several at one second, whose calls interleave their events.
      { generate: 'subscribers', ref: 's_', count: 30, plan: '$monthly', from: '2027-02-20T10:00:00+09:00', to: '2027-02-20T10:00:10+09:00' },
      // Sign-ups naming an earlier generated subscriber, which a batch must not run before it exists.
      { generate: 'subscribers', ref: 'a_', count: 1, plan: '$day1', account: 'acct_two', from: '2027-01-21T10:00:00+09:00', to: '2027-01-21T10:01:00+09:00' },
      { generate: 'subscribers', ref: 'b_', count: 3, plan: '$day1', account: 'acct_two', from: '2027-01-21T11:00:00+09:00', to: '2027-01-21T12:00:00+09:00', params: { metadata: { friend: '$a_1' } } },
      // Refused parameters: every subscription of this one fails as its call would.
      { generate: 'subscribers', ref: 'bad_', count: 5, plan: '$monthly', from: '2027-01-28', to: '2027-01-29', params: { trial_end: 'soon' } },
    ],
    timeline: [
      { at: '2027-01-30T12:00:00+09:00', op: 'plans.update', params: { id: '$monthly', metadata: { note: 'between sign-ups' } } },
      { at: '2027-02-10T12:00:00+09:00', op: 'subscriptions.cancel', params: { id: '$m_3' } },
      { at: '2027-02-10T12:00:00+09:00', op: 'subscriptions.pause', params: { id: '$d_7' } },
    ],
  }),
  'bulk sign-ups',
);

async function report(bulkSubscribers: boolean): Promise<Record<string, unknown>> {
  const range = { from: parseInstant('2027-01-01'), to: parseInstant('2027-06-01') };
  const seed = 5;
  const steps = planSteps(scenario, { ...range, seed, operations: operationNames() });
  const dir = mkdtempSync(join(scratch, 'run-'));
  await simulate({ scenario, steps, ...range, seed, jobs: ALL_JOBS, databaseUrl, bulkSubscribers }, (world) =>
    writeReport(world, { scenario: scenario.name ?? null, ...range, seed }, dir),
  );
  return JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as Record<string, unknown>;
}

const ID = /\b(ch|cus|car|sub|tok|evnt|evt|tm|st|ba|re|rea)_[0-9a-f]{30}\b/g;

/** Every generated id, alone or inside a string (a url), replaced by its prefix. */
function withoutIds(value: unknown): unknown {
  if (typeof value === 'string') return value.replace(ID, '$1_');
  if (Array.isArray(value)) return value.map(withoutIds);
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, withoutIds(item)]));
  return value;
}

describe('generated subscribers in bulk', () => {
  it('record a refused card as its calls would and go on, not abort the run', async () => {
    // A card expiring more than 20 years after the sign-up is refused; the generator gives its
    // cards five years past --to.
    const refused = parseScenario(
      JSON.stringify({ plans: [{ ref: 'p', params: { amount: 500, currency: 'jpy', interval: 'month' } }], generators: [{ generate: 'subscribers', ref: 'r_', count: 4, plan: '$p', from: '2027-01-05', to: '2027-01-06' }] }),
      'refused cards',
    );
    const range = { from: parseInstant('2027-01-01'), to: parseInstant('2044-01-01') };
    const steps = planSteps(refused, { ...range, seed: 1, operations: operationNames() });
    const outcomes = async (bulkSubscribers: boolean) =>
      simulate({ scenario: refused, steps, ...range, seed: 1, jobs: ALL_JOBS, databaseUrl, bulkSubscribers }, async (world) => [...world.outcomes].map((o) => [o.entry, o.op, o.error?.code ?? 'ok', o.error?.message ?? '']));
    const [bulk, single] = [await outcomes(true), await outcomes(false)];
    expect(bulk).toHaveLength(13);
    expect(bulk.filter(([, op, code]) => op === 'tokens.create' && code === 'invalid_expiry_year')).toHaveLength(4);
    expect(bulk).toEqual(single);
  }, 300_000);

  it('sign up subscribers sharing an instant in one batch: a crowd costs the stops of one sign-up', async () => {
    const range = { from: parseInstant('2027-01-01'), to: parseInstant('2027-01-10') };
    const stops = async (count: number) => {
      const crowd = parseScenario(
        JSON.stringify({
          plans: [{ ref: 'p', params: { amount: 500, currency: 'jpy', interval: 'month' } }],
          generators: [{ generate: 'subscribers', ref: 'c_', count, plan: '$p', from: '2027-01-05T10:00:00+09:00', to: '2027-01-05T10:00:05+09:00' }],
        }),
        'crowd',
      );
      const steps = planSteps(crowd, { ...range, seed: 3, operations: operationNames() });
      const instants = new Set(steps.filter((step) => step.subscriber === 'token').map((step) => step.at.getTime()));
      return simulate({ scenario: crowd, steps, ...range, seed: 3, jobs: ALL_JOBS, databaseUrl }, async (world) => ({
        instants: instants.size,
        stops: world.stats.stops,
        created: world.outcomes.filter((o) => o.op === 'subscriptions.create' && o.error === null).length,
      }));
    };
    const [one, crowd] = [await stops(1), await stops(60)];
    // Sixty sign-ups over five seconds share their instants, and all of them are signed up.
    expect(crowd.instants).toBeLessThanOrEqual(6);
    expect(crowd.created).toBe(60);
    expect(crowd.stops).toBe(one.stops);
  }, 300_000);

  it('write the report the one-by-one calls write, ids aside', async () => {
    const [bulk, single] = [await report(true), await report(false)];
    const steps = bulk.steps as { op: string; error: { code: string } | null }[];
    // The scenario did what it is meant to: sign-ups, refusals, renewals, declines, term closes.
    expect(steps.filter((step) => step.op === 'subscriptions.create')).toHaveLength(199);
    expect(steps.filter((step) => step.error?.code === 'invalid_trial_end').length).toBeGreaterThan(5);
    const runs = bulk.job_runs as { job: string; counts: Record<string, number> }[];
    expect(runs.filter((run) => run.job === 'subscriptions.renew').reduce((n, run) => n + (run.counts.renewed ?? 0), 0)).toBeGreaterThan(100);
    expect(runs.filter((run) => run.job === 'subscriptions.renew').reduce((n, run) => n + (run.counts.failed ?? 0), 0)).toBeGreaterThan(0);
    expect(runs.filter((run) => run.job === 'terms.close').length).toBeGreaterThan(2);

    const friends = (bulk.subscriptions as { metadata: Record<string, string> }[]).filter((sub) => sub.metadata.friend !== undefined);
    expect(friends).toHaveLength(3);

    expect(Object.keys(bulk)).toEqual(Object.keys(single));
    for (const key of Object.keys(single)) {
      const [a, b] = [withoutIds(bulk[key]), withoutIds(single[key])];
      // Steps and job runs keep their order; rows sharing an instant are listed by id, so other
      // sections are compared as multisets.
      if (!Array.isArray(a) || key === 'steps' || key === 'job_runs') expect(a, key).toEqual(b);
      else expect((a as unknown[]).map((item) => JSON.stringify(item)).sort(), key).toEqual((b as unknown[]).map((item) => JSON.stringify(item)).sort());
    }
    // Where sign-ups happen, the events of an instant come in the order the calls write them.
    const signUps = (report: Record<string, unknown>) => {
      const byInstant = new Map<string, string[]>();
      for (const event of report.events as { created: number; type: string; data: { object: string } }[]) {
        const key = String(event.created);
        byInstant.set(key, [...(byInstant.get(key) ?? []), event.type]);
      }
      return [...byInstant].filter(([, types]) => types.includes('token.created'));
    };
    const collisions = signUps(bulk).filter(([, types]) => types.filter((type) => type === 'token.created').length > 1);
    expect(collisions.length).toBeGreaterThan(0);
    expect(signUps(bulk)).toEqual(signUps(single));
  }, 300_000);
});

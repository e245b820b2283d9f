/**
 * What the simulation leaves for an analyst: CSV that opens in a spreadsheet in Japan,
 * JST in the human-facing summary, and the business figures per month.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ALL_JOBS } from '../../jobs/index';
import { parseInstant } from '../../src/domain/time';
import { operationNames } from '../../src/api/operations';
import { diffSummaries, formatDiff, formatSummary, writeReport } from '../../src/simulation/report';
import { loadScenario, overlayScenario, parseScenario, planSteps, type Scenario } from '../../src/simulation/scenario';
import { simulate } from '../../src/simulation/simulate';

const CASES = fileURLToPath(new URL('../replay/cases/', import.meta.url));
const databaseUrl = process.env.DATABASE_URL;
const scratch = mkdtempSync(join(tmpdir(), 'kessai-simulate-report-'));

async function run(scenario: Scenario, from: string, to: string, seed = 1) {
  const range = { from: parseInstant(from), to: parseInstant(to) };
  const steps = planSteps(scenario, { ...range, seed, operations: operationNames() });
  const dir = mkdtempSync(join(scratch, 'run-'));
  const written = await simulate({ scenario, steps, ...range, seed, jobs: ALL_JOBS, databaseUrl }, (world) =>
    writeReport(world, { scenario: scenario.name ?? null, ...range, seed }, dir),
  );
  return { dir, ...written };
}

/** A CSV file's rows as objects by header (no quoted commas in the cells read here). */
function csvRows(text: string): Record<string, string>[] {
  const [head, ...lines] = text.replace(/^\uFEFF/, '').trimEnd().split('\n');
  const keys = head!.split(',');
  return lines.map((line) => Object.fromEntries(line.split(',').map((cell, i) => [keys[i]!, cell])));
}

describe('CSV exports for a spreadsheet in Japan', () => {
  it('start with a UTF-8 byte order mark, carry fee, card brand, subscription, the term\'s dates and the payout date, instants in JST', async () => {
    const { dir } = await run(loadScenario(join(CASES, 'term-close.json')), '2027-04-01', '2027-08-01', 16);
    const charges = readFileSync(join(dir, 'charges.csv'));
    const statements = readFileSync(join(dir, 'statements.csv'));
    for (const bytes of [charges, statements]) expect([...bytes.subarray(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);

    const chargeRows = csvRows(charges.toString('utf8'));
    expect(Object.keys(chargeRows[0]!)).toEqual(expect.arrayContaining(['subscription', 'card_brand', 'fee', 'fee_rate', 'platform_fee', 'tenant', 'created_at', 'captured_at']));
    const report = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as { charges: { id: string; created: number; card: { brand: string } | null; fee_rate: string; amount: number; captured: boolean }[] };
    expect(chargeRows.map((row) => row.id)).toEqual(report.charges.map((charge) => charge.id));
    for (const [i, charge] of report.charges.entries()) {
      const row = chargeRows[i]!;
      expect(row.card_brand).toBe(charge.card?.brand ?? '');
      expect(row.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+09:00$/);
      expect(new Date(row.created_at!).getTime()).toBe(charge.created * 1000);
    }
    // The worked example of the service rules (§4): ¥10,000 at 3.00% is a fee of ¥300.
    const example = chargeRows.find((row) => row.amount === '10000' && row.fee_rate === '3.00')!;
    expect(example).toMatchObject({ card_brand: 'Visa', fee: '300', platform_fee: '1000', tenant: 'ten_bakery' });

    const statementRows = csvRows(statements.toString('utf8'));
    expect(statementRows.length).toBeGreaterThan(0);
    // The first term of the range starts on 2027-04-01 00:00 JST; its end is exclusive.
    const april = statementRows.filter((row) => row.term_start === '2027-04-01T00:00:00+09:00');
    expect(april.length).toBeGreaterThan(0);
    expect(april.every((row) => row.term_end === '2027-05-01T00:00:00+09:00')).toBe(true);
    expect(statementRows.every((row) => /^ba_/.test(row.balance!))).toBe(true);
    const closed = statementRows.filter((row) => row.balance_closed_date !== '');
    expect(closed.length).toBeGreaterThan(0);
    for (const row of closed) expect(row.balance_payout_date).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    // Japanese titles survive as UTF-8.
    expect(statements.toString('utf8')).toContain('売上');
  }, 120_000);
});

describe('JST in the summary', () => {
  it('the header shows the range as typed, in JST with the offset; summary.json keeps UTC ISO', async () => {
    const { summary } = await run(loadScenario(join(CASES, 'pause-resume.json')), '2027-01-01', '2027-05-01');
    expect(summary.from).toBe('2026-12-31T15:00:00Z');
    expect(formatSummary(summary, 'Baseline').split('\n')[0]).toMatch(/^Baseline: .*, 2027-01-01 00:00 \+09:00 → 2027-05-01 00:00 \+09:00 \(exclusive\), seed 1$/);
  }, 120_000);
});

describe('business figures per JST month', () => {
  it('pause-resume, by hand: MRR and subscribers at month end, new, churned, recovered, failed renewals by reason', async () => {
    // Jan 10: Dave and Erin subscribe to ¥1,980 a month. Feb 10: Dave's card declines, his
    // subscription pauses; Feb 20 he adds a card and is resumed. Mar 1 Erin cancels; she is
    // deleted at her period end, Mar 10. Months run to the range's end (2027-05-01, exclusive).
    const { summary } = await run(loadScenario(join(CASES, 'pause-resume.json')), '2027-01-01', '2027-05-01');
    const figures = summary.months.map((m) => ({
      month: m.month,
      mrr: m.mrr_yen,
      ...m.subscriptions,
      new: m.new_subscriptions,
      churned: m.churned_subscriptions,
      recovered: m.recovered_subscriptions,
      failed: m.failed_renewals_by_reason,
    }));
    expect(figures).toEqual([
      { month: '2027-01', mrr: 3960, active: 2, trial: 0, paused: 0, canceled: 0, new: 2, churned: 0, recovered: 0, failed: {} },
      { month: '2027-02', mrr: 3960, active: 2, trial: 0, paused: 0, canceled: 0, new: 0, churned: 0, recovered: 1, failed: { card_declined: 1 } },
      { month: '2027-03', mrr: 1980, active: 1, trial: 0, paused: 0, canceled: 0, new: 0, churned: 1, recovered: 0, failed: {} },
      { month: '2027-04', mrr: 1980, active: 1, trial: 0, paused: 0, canceled: 0, new: 0, churned: 0, recovered: 0, failed: {} },
    ]);
    // The total row: events summed, month-end states those of the last month.
    expect(summary.totals).toMatchObject({ mrr_yen: 1980, new_subscriptions: 2, churned_subscriptions: 1, recovered_subscriptions: 1, failed_renewals_by_reason: { card_declined: 1 } });
  }, 120_000);

  it('a yearly plan counts a twelfth, trials and canceled-but-not-deleted subscriptions bring no MRR, rounded half up once', async () => {
    const card = { number: '4242424242424242', exp_month: 12, exp_year: 2032 };
    const scenario = parseScenario(
      JSON.stringify({
        plans: [
          { ref: 'monthly', params: { amount: 1000, currency: 'jpy', interval: 'month' } },
          { ref: 'yearly', params: { amount: 10006, currency: 'jpy', interval: 'year' } },
          { ref: 'trial', params: { amount: 500, currency: 'jpy', interval: 'month', trial_days: 60 } },
        ],
        customers: [
          { ref: 'a', card },
          { ref: 'b', card },
          { ref: 'c', card },
          { ref: 'd', card },
        ],
        timeline: [
          { at: '2027-01-05T10:00', op: 'subscriptions.create', params: { customer: '$a', plan: '$monthly' } },
          { at: '2027-01-05T10:00', op: 'subscriptions.create', params: { customer: '$b', plan: '$yearly' } },
          { at: '2027-01-05T10:00', op: 'subscriptions.create', params: { customer: '$c', plan: '$trial' } },
          { at: '2027-01-05T10:00', op: 'subscriptions.create', params: { customer: '$d', plan: '$monthly' }, ref: 'd_sub' },
          { at: '2027-01-20T10:00', op: 'subscriptions.cancel', params: { id: '$d_sub' } },
        ],
      }),
      'mrr scenario',
    );
    const { summary } = await run(scenario, '2027-01-01', '2027-02-01');
    const [january] = summary.months;
    // 1,000 + 10,006 / 12 = 1,833.83… → ¥1,834. D is canceled (deleted at Feb 5); C is on trial.
    expect(january).toMatchObject({ month: '2027-01', mrr_yen: 1834, subscriptions: { active: 2, trial: 1, paused: 0, canceled: 1 }, new_subscriptions: 4 });
    expect(summary.months).toHaveLength(1);
  }, 120_000);
});

describe('what-if with dates', () => {
  const card = { number: '4242424242424242', exp_month: 12, exp_year: 2032 };
  const baseline = parseScenario(
    JSON.stringify({
      accounts: [{ id: 'acct_shop', fee_rates: { Visa: '3.00' } }],
      plans: [{ ref: 'monthly', params: { amount: 1000, currency: 'jpy', interval: 'month' } }],
      customers: [{ ref: 'a', card }],
      timeline: [{ at: '2027-01-10T10:00', op: 'subscriptions.create', params: { customer: '$a', plan: '$monthly' } }],
    }),
    'dated baseline',
  );

  it('an overlay\'s fee rate takes effect from its date: months before it keep the baseline\'s fees', async () => {
    const overlay = parseScenario(JSON.stringify({ name: 'Visa 2 % from April', accounts: [{ id: 'acct_shop', from: '2027-04-01', fee_rates: { Visa: '2.00' } }] }), 'dated overlay');
    const variant = overlayScenario(baseline, overlay);
    const [base, other] = [await run(baseline, '2027-01-01', '2027-06-01'), await run(variant, '2027-01-01', '2027-06-01')];
    // One ¥1,000 charge a month (Jan 10, Feb 10, …): 3.00 % is ¥30; from April 2.00 % is ¥20.
    expect(base.summary.months.map((m) => m.fees_yen)).toEqual([30, 30, 30, 30, 30]);
    expect(other.summary.months.map((m) => m.fees_yen)).toEqual([30, 30, 30, 20, 20]);
    const diff = diffSummaries(base.summary, other.summary).filter((row) => row.delta !== 0);
    expect(diff).toEqual([
      { month: '2027-04', metric: 'fees_yen', baseline: 30, variant: 20, delta: -10 },
      { month: '2027-05', metric: 'fees_yen', baseline: 30, variant: 20, delta: -10 },
      // The merchant's balance stays under the payout minimum, carried: at the end of May it holds
      // the terms of January to April (closed at each next 1st): 4 × ¥970 against 3 × ¥970 + ¥980.
      { month: '2027-05', metric: 'carried:merchant', baseline: 3880, variant: 3890, delta: 10 },
    ]);
    expect(formatDiff(diff, overlay.name!)).toMatch(/^What-if "Visa 2 % from April" against the baseline/);
  }, 120_000);

  it('a dated setting for an account the baseline does not have, or outside the range, is refused', () => {
    const stranger = parseScenario(JSON.stringify({ accounts: [{ id: 'acct_other', from: '2027-04-01', fee_rates: { Visa: '2.00' } }] }), 'overlay');
    expect(() => overlayScenario(baseline, stranger)).toThrow(/what-if accounts\[0\]\.from: only settings of an account of the baseline/);
    const late = overlayScenario(baseline, parseScenario(JSON.stringify({ accounts: [{ id: 'acct_shop', from: '2028-01-01', fee_rates: { Visa: '2.00' } }] }), 'overlay'));
    expect(() => planSteps(late, { from: parseInstant('2027-01-01'), to: parseInstant('2027-06-01'), seed: 1, operations: operationNames() })).toThrow(
      /what-if accounts\[0\] \(simulation\.account_settings at 2028-01-01 00:00 \+09:00\): the instant is outside the simulated range/,
    );
    expect(() => planSteps(parseScenario(JSON.stringify({ accounts: [{ id: 'acct_x', from: '2027-02-01' }] }), 'base'), { from: parseInstant('2027-01-01'), to: parseInstant('2027-06-01'), seed: 1, operations: operationNames() })).toThrow(
      /accounts\[0\]\.from: only a what-if overlay's account settings/,
    );
  });
});

describe('plan fees and adjustments in a simulation, and a what-if that raises the plan fee', () => {
  const baseline = parseScenario(
    JSON.stringify({
      accounts: [{ id: 'acct_pro', service_plan: { subject: 'proplan', monthly_fee: 10_000 } }],
      plans: [{ ref: 'monthly', params: { amount: 30_000, currency: 'jpy', interval: 'month' } }],
      customers: [{ ref: 'a', card: { number: '4242424242424242', exp_month: 12, exp_year: 2032 } }],
      timeline: [
        { at: '2027-01-10T10:00', op: 'subscriptions.create', params: { customer: '$a', plan: '$monthly' } },
        { at: '2027-02-15T10:00', op: 'adjustments.add', params: { amount: 2_000, subject: 'reallocation', reason: 'sales moved from the old account' } },
        { at: '2027-02-16T10:00', op: 'adjustments.add', params: { amount: -500, subject: 'other', reason: 'bank charge' } },
      ],
    }),
    'plan baseline',
  );

  it('"what if our plan fee rises in April": the months from April bill the new fee, the diff shows it, statements.csv carries service_fee and misc items', async () => {
    const overlay = parseScenario(JSON.stringify({ name: 'Pro plan at 12,000 from April', accounts: [{ id: 'acct_pro', from: '2027-04-01', service_plan: { subject: 'proplan', monthly_fee: 12_000 } }] }), 'plan overlay');
    const variant = overlayScenario(baseline, overlay);
    const [base, other] = [await run(baseline, '2027-01-01', '2027-06-01'), await run(variant, '2027-01-01', '2027-06-01')];
    expect(base.summary.months.map((m) => m.service_fees_yen)).toEqual([10_000, 10_000, 10_000, 10_000, 10_000]);
    expect(other.summary.months.map((m) => m.service_fees_yen)).toEqual([10_000, 10_000, 10_000, 12_000, 12_000]);
    expect(base.summary.months.map((m) => m.adjustments_yen)).toEqual([0, 1_500, 0, 0, 0]);
    const diff = diffSummaries(base.summary, other.summary).filter((row) => row.metric === 'service_fees_yen' && row.delta !== 0);
    expect(diff).toEqual([
      { month: '2027-04', metric: 'service_fees_yen', baseline: 10_000, variant: 12_000, delta: 2_000 },
      { month: '2027-05', metric: 'service_fees_yen', baseline: 10_000, variant: 12_000, delta: 2_000 },
    ]);
    expect(formatSummary(other.summary)).toMatch(/plan fees ¥\s+adjustments ¥/);

    const rows = csvRows(readFileSync(join(other.dir, 'statements.csv'), 'utf8'));
    const items = (type: string) => rows.filter((row) => row.type === type).map((row) => [row.term_start!.slice(0, 7), row.subject, Number(row.amount)]);
    // Terms January to April closed within the range (May's closes on June 1).
    expect(items('service_fee')).toEqual(
      expect.arrayContaining([
        ['2027-01', 'proplan', -10_000],
        ['2027-03', 'proplan', -10_000],
        ['2027-04', 'proplan', -12_000],
      ]),
    );
    expect(items('misc')).toEqual([
      ['2027-02', 'reallocation', 2_000],
      ['2027-02', 'other', -500],
    ]);
    const report = JSON.parse(readFileSync(join(other.dir, 'report.json'), 'utf8')) as { adjustments: { reason: string; amount: number }[]; service_fees: { month: string; amount: number }[] };
    expect(report.adjustments.map((a) => [a.amount, a.reason])).toEqual([
      [2_000, 'sales moved from the old account'],
      [-500, 'bank charge'],
    ]);
    expect(report.service_fees.map((f) => [f.month, f.amount])).toEqual([
      ['2027-01', 10_000],
      ['2027-02', 10_000],
      ['2027-03', 10_000],
      ['2027-04', 12_000],
      ['2027-05', 12_000],
    ]);
  }, 120_000);
});

describe('debit cards in a simulation (service rules §2.1: debited at authorization)', () => {
  it('the month shows what debit holds took from buyers and gave back: the rest at a partial capture, all at a lapse or a cancel', async () => {
    const scenario = parseScenario(
      JSON.stringify({
        customers: [{ ref: 'd', card: { number: '4000056655665556', exp_month: 12, exp_year: 2032 } }],
        timeline: [
          { at: '2027-01-05T10:00', op: 'charges.create', ref: 'lapses', params: { amount: 5_000, currency: 'jpy', customer: '$d', capture: false, expiry_days: 2 } },
          { at: '2027-01-06T10:00', op: 'charges.create', ref: 'part', params: { amount: 8_000, currency: 'jpy', customer: '$d', capture: false } },
          { at: '2027-01-07T10:00', op: 'charges.capture', params: { id: '$part', amount: 6_000 } },
          { at: '2027-01-08T10:00', op: 'charges.create', ref: 'canceled', params: { amount: 3_000, currency: 'jpy', customer: '$d', capture: false } },
          { at: '2027-01-09T10:00', op: 'charges.refund', params: { id: '$canceled' } },
        ],
      }),
      'debit holds',
    );
    const { summary } = await run(scenario, '2027-01-01', '2027-02-01');
    expect(summary.failed_steps).toBe(0);
    expect(summary.months[0]!.holds).toMatchObject({ authorized: 3, captured: 1, released_at_expiry: 1, debited_yen: 16_000, debit_refunded_yen: 5_000 + 2_000 + 3_000 });
    expect(summary.months[0]!.captured_yen).toBe(6_000);
  }, 120_000);
});

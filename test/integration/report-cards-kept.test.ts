/**
 * The report's charges section keeps a bounded number of rendered cards (chargePages,
 * REPORT_CARDS_KEPT): past the bound it lets them go and reads them again. With a bound of one
 * card, a simulated world's charges must come out with the same cards as with every card kept.
 */
import { describe, expect, it } from 'vitest';
import { ALL_JOBS } from '../../jobs/index';
import { operationNames } from '../../src/api/operations';
import { parseInstant } from '../../src/domain/time';
import { chargePages, REPORT_CARDS_KEPT } from '../../src/simulation/report';
import { parseScenario, planSteps } from '../../src/simulation/scenario';
import { simulate } from '../../src/simulation/simulate';

describe('the report charges section with a bound on the cards it keeps', () => {
  it('lists every charge with the same card whether it keeps one card or all of them', async () => {
    // 500 subscribers renewed monthly for a quarter: ~2,000 charges, so pages after the first.
    const scenario = parseScenario(
      JSON.stringify({
        plans: [{ ref: 'monthly', params: { amount: 980, currency: 'jpy', interval: 'month' } }],
        generators: [{ generate: 'subscribers', ref: 'sub_', count: 500, plan: '$monthly', from: '2027-01-01', to: '2027-01-08', card_mix: { declined: 0.05, overseas: 0.2, debit: 0.2 } }],
      }),
      'cards kept',
    );
    const [from, to, seed] = [parseInstant('2027-01-01'), parseInstant('2027-04-15'), 1];
    const steps = planSteps(scenario, { from, to, seed, operations: operationNames() });
    const listed = new Map<number, { id: string; card: string | null; brand: string | null }[]>();
    await simulate({ scenario, steps, from, to, seed, jobs: ALL_JOBS, databaseUrl: process.env.DATABASE_URL }, async (world) => {
      for (const kept of [REPORT_CARDS_KEPT, 1]) {
        const charges: { id: string; card: string | null; brand: string | null }[] = [];
        await chargePages(world.ctx.db, kept)(async (page) => {
          for (const { row, cardText, brand } of page) charges.push({ id: row.charge_id, card: cardText, brand });
        });
        listed.set(kept, charges);
      }
    });
    const all = listed.get(REPORT_CARDS_KEPT)!;
    // Several cards, so that a bound of one lets cards go and reads them again.
    expect(all.length).toBeGreaterThan(1_000);
    expect(new Set(all.map((charge) => charge.card)).size).toBeGreaterThan(400);
    expect(all.every((charge) => charge.card !== null && charge.brand !== null)).toBe(true);
    expect(listed.get(1)).toEqual(all);
  });
});

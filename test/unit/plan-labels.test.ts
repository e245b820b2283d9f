/**
 * The plan's check of `$label`s when generated subscribers define most of them (their labels are
 * kept as bits of their generator, not as texts): defined, undefined and defined twice mean what
 * they mean for any other entry.
 */
import { describe, expect, it } from 'vitest';
import { operationNames } from '../../src/api/operations';
import { parseInstant } from '../../src/domain/time';
import { parseScenario, planSteps } from '../../src/simulation/scenario';

const PLAN = { ref: 'p', params: { amount: 500, currency: 'jpy', interval: 'month' } };

function plan(generators: unknown[], timeline: unknown[] = []) {
  const scenario = parseScenario(JSON.stringify({ plans: [PLAN], generators, timeline }), 'inline');
  return planSteps(scenario, { from: parseInstant('2027-01-01'), to: parseInstant('2027-03-01'), seed: 1, operations: operationNames() });
}

const generator = (ref: string, count: number, from = '2027-01-10', to = '2027-01-11') => ({ generate: 'subscribers', ref, count, plan: '$p', from, to });

describe('labels of generated subscribers in a plan', () => {
  it('are found by a later entry, each of the three', () => {
    const steps = plan([generator('g_', 3)], [{ at: '2027-01-20', op: 'subscriptions.pause', params: { id: '$g_2', note: '$g_3_customer', token: '$g_1_token' } }]);
    expect(steps).toHaveLength(2 + 9);
    expect(steps.at(-1)!.entry).toBe('timeline[0]');
  });

  it('are not defined before their sign-up, nor beyond the generator\'s count, nor written another way', () => {
    for (const label of ['$g_1', '$g_4', '$g_0', '$g_02', '$g_1_card', '$g_']) {
      const at = label === '$g_1' ? '2027-01-05' : '2027-01-20';
      expect(() => plan([generator('g_', 3)], [{ at, op: 'subscriptions.pause', params: { id: label } }]), label).toThrow(
        new RegExp(`timeline\\[0\\].*\\${label} does not name an earlier entry`),
      );
    }
  });

  it('a generator\'s plan or params naming a later entry is refused at its first subscription', () => {
    const scenario = parseScenario(
      JSON.stringify({
        generators: [{ generate: 'subscribers', ref: 'g_', count: 2, plan: '$late', from: '2027-01-10', to: '2027-01-11' }],
        timeline: [{ at: '2027-01-20', op: 'plans.create', params: { amount: 500, currency: 'jpy', interval: 'month' }, ref: 'late' }],
      }),
      'inline',
    );
    expect(() => planSteps(scenario, { from: parseInstant('2027-01-01'), to: parseInstant('2027-03-01'), seed: 1, operations: operationNames() })).toThrow(
      /generators\[0\] #\d \(subscriptions\.create at 2027-01-10 .*\): \$late does not name an earlier entry/,
    );
  });

  it('a label an entry and a generator both define is refused where the second one is', () => {
    expect(() => plan([generator('g_', 3)], [{ at: '2027-01-20', op: 'customers.create', params: {}, ref: 'g_2' }])).toThrow(/timeline\[0\].*the label g_2 is used twice/);
    expect(() => plan([generator('g_', 3)], [{ at: '2027-01-05', op: 'customers.create', params: {}, ref: 'g_2_token' }])).toThrow(
      /generators\[0\] #2 \(tokens\.create .*\): the label g_2_token is used twice/,
    );
  });

  it('two generators whose prefixes make the same label are refused; unrelated prefixes are not', () => {
    // `a` + 11 and `a1` + 1 are both a11.
    expect(() => plan([generator('a', 11), generator('a1', 1, '2027-01-12', '2027-01-13')])).toThrow(/generators\[1\] #1 \(tokens\.create .*\): the label a11_token is used twice/);
    expect(() => plan([generator('a', 10), generator('a1', 1, '2027-01-12', '2027-01-13')])).not.toThrow();
    expect(() => plan([generator('g_', 2), generator('g_', 2, '2027-01-12', '2027-01-13')])).toThrow(/generators\[1\] #(\d) .*the label g_\1_token is used twice/);
    const steps = plan([generator('m_', 5), generator('y_', 5)]);
    expect(new Set(steps.map((step) => step.ref)).size).toBe(steps.length);
  });

  it('keep the order of entries sharing an instant: a subscriber\'s three calls back to back, the timeline after', () => {
    const steps = plan([generator('g_', 50, '2027-01-10', '2027-01-10T00:00:03+09:00')], [{ at: '2027-01-10T00:00:01+09:00', op: 'customers.create', params: {}, ref: 'c' }]);
    const calls = steps.filter((step) => step.subscriber !== undefined);
    for (let k = 0; k < calls.length; k += 3) expect(calls.slice(k, k + 3).map((step) => step.subscriber)).toEqual(['token', 'customer', 'subscription']);
    for (let k = 1; k < steps.length; k += 1) expect(steps[k]!.at.getTime()).toBeGreaterThanOrEqual(steps[k - 1]!.at.getTime());
    const timelineAt = steps.findIndex((step) => step.entry === 'timeline[0]');
    const sameInstant = steps.filter((step) => step.at.getTime() === steps[timelineAt]!.at.getTime());
    expect(sameInstant.at(-1)!.entry).toBe('timeline[0]');
    expect(sameInstant.length).toBeGreaterThan(1);
  });
});

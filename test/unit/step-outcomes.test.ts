import { describe, expect, it } from 'vitest';
import type { Step } from '../../src/simulation/scenario';
import { StepOutcomes, type StepOutcome } from '../../src/simulation/step-outcomes';

const AT = new Date('2027-01-05T01:02:03Z');
const CALLS = ['token', 'customer', 'subscription'] as const;
const OPS = { token: 'tokens.create', customer: 'customers.create', subscription: 'subscriptions.create' } as const;

/** The three steps of `n` generated subscribers, back to back, as a plan holds them. */
function plan(n: number): Step[] {
  return Array.from({ length: 3 * n }, (_, i): Step => {
    const call = CALLS[i % 3]!;
    const person = Math.floor(i / 3) + 1;
    return { entry: `generators[0] #${person}`, at: AT, op: OPS[call], params: {}, ref: call === 'subscription' ? `gen${person}` : `gen${person}_${call}`, account: 'acct_default', livemode: false, subscriber: call };
  });
}

const idOf = (i: number) => `${['tok', 'cus', 'sub'][i % 3]}_${String(i).padStart(28, '0')}`;
const objectOf = (i: number) => CALLS[i % 3]!;

/** The outcome the driver recorded before outcomes were packed: one object a step. */
function expected(step: Step, id: string, object: string): StepOutcome {
  return { entry: step.entry, at: step.at, op: step.op, ref: step.ref ?? null, account: step.account, result: { id, object }, error: null };
}

describe('step outcomes', () => {
  it('gives back every signed-up call with its id and object, in order, around a refused call', () => {
    const steps = plan(4);
    const outcomes = new StepOutcomes();
    const refused: StepOutcome = { entry: steps[4]!.entry, at: AT, op: steps[4]!.op, ref: steps[4]!.ref!, account: 'acct_default', result: null, error: { code: 'card_declined', status: 402, type: 'card_error', param: null, message: 'declined' } };
    outcomes.addSignedUp(steps, 0, [0, 1, 2, 3].map((i) => ({ id: idOf(i), object: objectOf(i) })));
    outcomes.add(refused);
    outcomes.addSignedUp(steps, 5, [5, 6, 7, 8, 9, 10, 11].map((i) => ({ id: idOf(i), object: objectOf(i) })));
    expect(outcomes.length).toBe(12);
    const want = steps.map((step, i) => (i === 4 ? refused : expected(step, idOf(i), objectOf(i))));
    expect([...outcomes]).toEqual(want);
    expect(outcomes.filter((outcome) => outcome.error !== null)).toEqual([refused]);
  });

  it('keeps ids of different lengths, and a result that is not its call\'s object, exactly', () => {
    const steps = plan(2);
    const outcomes = new StepOutcomes();
    const results = [
      { id: 'tok_1', object: 'token' },
      { id: 'cus_22', object: 'customer' },
      { id: 'sub_333', object: 'subscription' },
    ];
    outcomes.addSignedUp(steps, 0, results);
    const odd = [
      { id: 'tok_4444', object: 'token' },
      { id: 'cus_5555', object: 'card' },
      { id: 'sub_6666', object: 'subscription' },
    ];
    outcomes.addSignedUp(steps, 3, odd);
    outcomes.addSignedUp(steps, 6, []);
    expect(outcomes.length).toBe(6);
    expect([...outcomes]).toEqual([...results, ...odd].map((result, i) => expected(steps[i]!, result.id, result.object)));
  });
});

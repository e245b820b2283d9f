/**
 * What the simulation's steps did, in step order, for the report's `steps` section and the CLI's
 * list of refused steps. A run keeps every outcome to its end, so at a large book this is the
 * simulation's biggest memory: three a generated subscriber. A bulk sign-up's successful calls
 * are therefore kept as a run of the plan's steps and their ids packed in one text, not as an
 * object and an id text each (a 1,000,000-subscription book: ~110 bytes a call less); every other
 * outcome is kept as it is. Outcomes are made whole only while they are read.
 */
import type { Step } from './scenario';

/** What one step did: its result's id, or the catalogue error it got. */
export interface StepOutcome {
  readonly entry: string;
  readonly at: Date;
  readonly op: string;
  readonly ref: string | null;
  readonly account: string;
  readonly result: { readonly id: string | null; readonly object: string | null } | null;
  readonly error: { readonly code: string; readonly status: number; readonly type: string; readonly param: string | null; readonly message: string } | null;
}

/** The outcome of `step`: its result (id and object) or its error. */
export function outcomeOf(step: Pick<Step, 'entry' | 'at' | 'op' | 'ref' | 'account'>, result: StepOutcome['result'], error: StepOutcome['error'] = null): StepOutcome {
  return { entry: step.entry, at: step.at, op: step.op, ref: step.ref ?? null, account: step.account, result, error };
}

/** The object a generated subscriber's call answers with, by call. */
const SIGNED_UP_OBJECT = { token: 'token', customer: 'customer', subscription: 'subscription' } as const;

/** Consecutive plan steps (`steps[first]` on) that succeeded, with their result ids packed in one text, each `width` long. */
class SignedUpRun {
  constructor(
    readonly steps: readonly Step[],
    readonly first: number,
    readonly packed: string,
    readonly width: number,
  ) {}

  *outcomes(): Generator<StepOutcome> {
    for (let k = 0; k * this.width < this.packed.length; k += 1) {
      const step = this.steps[this.first + k]!;
      const id = this.packed.slice(k * this.width, (k + 1) * this.width);
      yield outcomeOf(step, { id, object: SIGNED_UP_OBJECT[step.subscriber!] });
    }
  }
}

/** Every step's outcome, in step order (see the top of this file). */
export class StepOutcomes implements Iterable<StepOutcome> {
  readonly #parts: (StepOutcome | SignedUpRun)[] = [];
  #length = 0;

  /** How many outcomes there are. */
  get length(): number {
    return this.#length;
  }

  add(outcome: StepOutcome): void {
    this.#parts.push(outcome);
    this.#length += 1;
  }

  /**
   * Generated subscribers' calls `steps[first]`, `steps[first + 1]`, … that succeeded in a bulk
   * sign-up, with their results in that order: packed when every result is its call's object and
   * every id has one length (kessai's ids do), else kept one by one.
   */
  addSignedUp(steps: readonly Step[], first: number, results: readonly { readonly id: string; readonly object: string }[]): void {
    if (results.length === 0) return;
    const width = results[0]!.id.length;
    const packable = width > 0 && results.every((result, k) => {
      const call = steps[first + k]!.subscriber;
      return result.id.length === width && call !== undefined && SIGNED_UP_OBJECT[call] === result.object;
    });
    if (packable) {
      // join() makes one flat text: the ids' own texts are not kept.
      this.#parts.push(new SignedUpRun(steps, first, results.map((result) => result.id).join(''), width));
      this.#length += results.length;
      return;
    }
    results.forEach((result, k) => this.add(outcomeOf(steps[first + k]!, { id: result.id, object: result.object })));
  }

  *[Symbol.iterator](): Iterator<StepOutcome> {
    for (const part of this.#parts) {
      if (part instanceof SignedUpRun) yield* part.outcomes();
      else yield part;
    }
  }

  /** The outcomes `keep` says yes to, in order. */
  filter(keep: (outcome: StepOutcome) => boolean): StepOutcome[] {
    const kept: StepOutcome[] = [];
    for (const outcome of this) if (keep(outcome)) kept.push(outcome);
    return kept;
  }
}

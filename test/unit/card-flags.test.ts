/** v1 §7 `card_flagged`: "temporary lockout after repeated card-caused errors" — the rule's window and lockout. */
import { describe, expect, it } from 'vitest';
import { afterCardError, CARD_FLAG_LOCKOUT_MS, CARD_FLAG_THRESHOLD, CARD_FLAG_WINDOW_MS, isCardFlagged, type CardErrorWindow } from '../../src/domain/card-flags';

const T0 = new Date('2027-01-01T00:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);

function errorsAt(offsets: readonly number[]): CardErrorWindow | undefined {
  return offsets.reduce<CardErrorWindow | undefined>((window, offset) => afterCardError(window, at(offset)), undefined);
}

describe('card_flagged: temporary lockout after repeated card-caused errors', () => {
  it(`${CARD_FLAG_THRESHOLD} errors within the window lock the card out from the last one for the lockout`, () => {
    const offsets = Array.from({ length: CARD_FLAG_THRESHOLD }, (_, i) => i * 1000);
    const window = errorsAt(offsets);
    const last = offsets.at(-1)!;
    expect(window!.flaggedUntil).toEqual(at(last + CARD_FLAG_LOCKOUT_MS));
    expect(isCardFlagged(window, at(last + CARD_FLAG_LOCKOUT_MS - 1))).toBe(true);
    expect(isCardFlagged(window, at(last + CARD_FLAG_LOCKOUT_MS))).toBe(false);
  });

  it('one error fewer does not flag; errors spread wider than the window never add up', () => {
    expect(isCardFlagged(errorsAt(Array.from({ length: CARD_FLAG_THRESHOLD - 1 }, (_, i) => i)), at(10))).toBe(false);
    const spread = Array.from({ length: CARD_FLAG_THRESHOLD * 2 }, (_, i) => i * (CARD_FLAG_WINDOW_MS / (CARD_FLAG_THRESHOLD - 1)));
    expect(errorsAt(spread)!.flaggedUntil).toBeNull();
  });
});

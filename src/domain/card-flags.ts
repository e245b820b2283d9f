/**
 * `card_flagged` (v1 §7: "temporary lockout after repeated card-caused errors"): the rule. A card
 * (by fingerprint, per account and mode) that the issuer refused CARD_FLAG_THRESHOLD times within
 * CARD_FLAG_WINDOW_MS is locked out for CARD_FLAG_LOCKOUT_MS from the refusal that reached the
 * threshold; while locked out, token creation with it answers `card_flagged` (402) without asking
 * the network. Instants are the engine clock's.
 */
import type { ErrorCode } from './errors';

export const CARD_FLAG_THRESHOLD = 5;
export const CARD_FLAG_WINDOW_MS = 30 * 60_000;
export const CARD_FLAG_LOCKOUT_MS = 30 * 60_000;

/** The issuer's refusals of the card itself (not the network's faults, not the account's brand policy). */
export const CARD_CAUSED_ERRORS: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['card_declined', 'expired_card', 'incorrect_card_data']);

export interface CardErrorWindow {
  readonly windowStart: Date;
  readonly errors: number;
  readonly flaggedUntil: Date | null;
}

/** Whether the card is locked out at `at` (the lockout's end instant is free again). */
export function isCardFlagged(window: Pick<CardErrorWindow, 'flaggedUntil'> | undefined, at: Date): boolean {
  return window?.flaggedUntil != null && at.getTime() < window.flaggedUntil.getTime();
}

/**
 * The window after one more card-caused error at `at`: a window older than CARD_FLAG_WINDOW_MS
 * starts again; the error that reaches the threshold flags the card and starts a new count.
 */
export function afterCardError(window: CardErrorWindow | undefined, at: Date): CardErrorWindow {
  const current = window !== undefined && at.getTime() - window.windowStart.getTime() < CARD_FLAG_WINDOW_MS;
  const errors = current ? window.errors + 1 : 1;
  if (errors >= CARD_FLAG_THRESHOLD) return { windowStart: at, errors: 0, flaggedUntil: new Date(at.getTime() + CARD_FLAG_LOCKOUT_MS) };
  return { windowStart: current ? window.windowStart : at, errors, flaggedUntil: window?.flaggedUntil ?? null };
}

/**
 * `card_flagged` at token creation (the rule: src/domain/card-flags.ts). The window of a card is
 * kept per account, mode and fingerprint in `card_error_windows`: read by its key before the card
 * is tokenized, and counted, in a transaction of its own, when the issuer refuses the card (the
 * refused request itself writes nothing, so the count must commit without it).
 */
import type { Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database } from '../db/schema';
import { afterCardError, CARD_FLAG_LOCKOUT_MS, isCardFlagged, type CardErrorWindow } from '../domain/card-flags';
import { KessaiError } from '../domain/errors';

function windowOf(db: Kysely<Database>, caller: Caller, fingerprint: string) {
  return db.selectFrom('card_error_windows').where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('fingerprint', '=', fingerprint);
}

/** Refuses a card locked out at `at` with `card_flagged` (402), before the network is asked. */
export async function assertCardNotFlagged(db: Kysely<Database>, caller: Caller, fingerprint: string, at: Date): Promise<void> {
  const row = await windowOf(db, caller, fingerprint).select('flagged_until').executeTakeFirst();
  if (row !== undefined && isCardFlagged({ flaggedUntil: row.flagged_until }, at)) {
    throw new KessaiError('card_flagged', { message: `This card had repeated errors and is locked out until ${row.flagged_until!.toISOString()} (${CARD_FLAG_LOCKOUT_MS / 60_000} minutes).` });
  }
}

/** Counts one card-caused error at `at`; two at once are both counted (the row is locked). */
export async function recordCardError(db: Kysely<Database>, caller: Caller, fingerprint: string, at: Date): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('card_error_windows')
      .values({ account_id: caller.accountId, livemode: caller.livemode, fingerprint, window_start: at, errors: 0, flagged_until: null, updated_at: at })
      .onConflict((oc) => oc.columns(['account_id', 'livemode', 'fingerprint']).doNothing())
      .execute();
    const row = await windowOf(trx, caller, fingerprint).select(['window_start', 'errors', 'flagged_until']).forUpdate().executeTakeFirstOrThrow();
    const current: CardErrorWindow | undefined = row.errors === 0 && row.flagged_until === null ? undefined : { windowStart: row.window_start, errors: row.errors, flaggedUntil: row.flagged_until };
    const next = afterCardError(current, at);
    await trx
      .updateTable('card_error_windows')
      .set({ window_start: next.windowStart, errors: next.errors, flagged_until: next.flaggedUntil, updated_at: at })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('fingerprint', '=', fingerprint)
      .execute();
  });
}

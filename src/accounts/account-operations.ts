/**
 * `accounts.retrieve` (the SDK's `accounts.retrieve()`, GET /v1/accounts): the caller's own
 * account. The v1 documents do not show the object; kessai answers the fields it has (id, name,
 * live permission, term cycle, fee rates, created) under `object: "account"`.
 */
import type { Context } from '../engine/context';
import { toUnixSeconds } from '../domain/time';
import { defineOperation } from '../operations/define';
import { readParams } from '../operations/params';
import { getAccount, type Caller } from './accounts';

async function retrieveAccount(ctx: Context, caller: Caller, input: unknown): Promise<object> {
  readParams(input, []);
  const account = await getAccount(ctx, caller.accountId);
  return {
    id: account.id,
    object: 'account',
    livemode: caller.livemode,
    created: toUnixSeconds(account.createdAt),
    merchant: {
      object: 'merchant',
      name: account.name,
      livemode_enabled: account.liveEnabled,
      term_cycle: account.termCycle,
      fee_rates: account.feeRates,
    },
  };
}

export const ACCOUNT_OPERATIONS = [defineOperation('accounts.retrieve', retrieveAccount)] as const;

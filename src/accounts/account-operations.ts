/**
 * `accounts.retrieve` (the SDK's `accounts.retrieve()`, GET /v1/accounts): the caller's own
 * account, in the mode of the key that asked. The v1 codec (src/api/v1/accounts.ts) renders it.
 */
import type { Context } from '../engine/context';
import { getAccount, type Account, type Caller } from './accounts';

/** The caller's account and the mode of the key that asked for it. */
export interface CallerAccount {
  readonly account: Account;
  readonly livemode: boolean;
}

/** `accounts.retrieve` takes no parameters. */
export async function retrieveAccount(ctx: Context, caller: Caller, _command: Readonly<Record<string, never>>): Promise<CallerAccount> {
  return { account: await getAccount(ctx, caller.accountId), livemode: caller.livemode };
}

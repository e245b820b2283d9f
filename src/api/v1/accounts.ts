/**
 * The v1 codec of the account (GET /v1/accounts, the SDK's `accounts.retrieve()`): no parameters.
 * The v1 documents do not show the object; kessai answers the fields it has (id, name, live
 * permission, term cycle, fee rates, created) under `object: "account"`.
 */
import { retrieveAccount, type CallerAccount } from '../../accounts/account-operations';
import { toUnixSeconds } from '../../domain/time';
import { defineCommandOperation } from '../../operations/define';
import { readParams } from '../../operations/params';

function renderAccount({ account, livemode }: CallerAccount): object {
  return {
    id: account.id,
    object: 'account',
    livemode,
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

export const ACCOUNT_OPERATIONS = [
  defineCommandOperation('accounts.retrieve', {
    decode: (input): Readonly<Record<string, never>> => {
      readParams(input, []);
      return {};
    },
    execute: retrieveAccount,
    encode: renderAccount,
  }),
];

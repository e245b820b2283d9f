/**
 * How runBatches (src/engine/job.ts) packs the accounts of a round into batches: small
 * accounts share a batch of up to the batch size of due rows, only with accounts of their shard;
 * an account whose due rows fill a batch has batches of its own.
 */
import { describe, expect, it } from 'vitest';
import { packAccounts } from '../../src/engine/account-batches';

const oneShard = () => '';

describe('packAccounts', () => {
  it('packs small accounts, in order, into batches of at most the limit of due rows', () => {
    const accounts = [1, 2, 3, 4, 5].map((n) => ({ accountId: `acct_${n}`, due: 40 }));
    expect(packAccounts(accounts, 100, oneShard)).toEqual([['acct_1', 'acct_2'], ['acct_3', 'acct_4'], ['acct_5']]);
  });

  it('gives an account whose due rows fill a batch a batch of its own, without holding back the small ones', () => {
    const accounts = [
      { accountId: 'acct_a', due: 3 },
      { accountId: 'acct_big', due: 100 },
      { accountId: 'acct_c', due: 97 },
      { accountId: 'acct_d', due: 1 },
    ];
    expect(packAccounts(accounts, 100, oneShard)).toEqual([['acct_a', 'acct_c'], ['acct_big'], ['acct_d']]);
  });

  it('never puts accounts of two shards in one batch (Citus routes a batch to one shard)', () => {
    const shard: Record<string, string> = { acct_1: 's1', acct_2: 's2', acct_3: 's1', acct_4: 's2', acct_5: 's1' };
    const batches = packAccounts(
      Object.keys(shard).map((accountId) => ({ accountId, due: 10 })),
      100,
      (accountId) => shard[accountId]!,
    );
    expect(batches).toEqual([['acct_1', 'acct_3', 'acct_5'], ['acct_2', 'acct_4']]);
    // Every account exactly once.
    expect(batches.flat().sort()).toEqual(Object.keys(shard).sort());
  });
});

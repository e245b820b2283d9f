/**
 * `kessai statements run [--at <instant>]` (the nightly statement generation runs in the
 * worker and as a command): the real command on an embedded database seeded beforehand.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/accounts/accounts';
import { openStore } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import { seededIds } from '../../src/domain/ids';
import { FixedClock } from '../../src/engine/clock';
import { captureCharge } from '../support/settlement-seed';

const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), 'kessai-statements-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

function kessai(args: string[]) {
  const { DATABASE_URL: _ignored, ...base } = process.env;
  const result = spawnSync(process.execPath, [BIN, ...args], { env: { ...base, KESSAI_DATA_DIR: dataDir }, encoding: 'utf8', timeout: 120_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('kessai statements run', () => {
  it('closes the terms ended by the daily slot at or before --at, and a second run creates nothing', async () => {
    const store = await openStore({ dataDir });
    try {
      await migrate(store);
      const ctx = { db: store.db, clock: new FixedClock(new Date('2027-01-05T00:00:00Z')), ids: seededIds(3) };
      await createAccount(ctx, { name: 'CLI', id: 'acct_cli' });
      await captureCharge(store.db, ctx, { accountId: 'acct_cli', chargeId: 'ch_cli', amount: 20_000, at: new Date('2027-01-10T03:00:00Z') });
    } finally {
      await store.close();
    }
    // 2027-02-01T09:30 JST: the slot that runs is 2027-02-01 00:00 JST.
    const first = kessai(['statements', 'run', '--at', '2027-02-01T09:30']);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toBe(
      'terms.close @ 2027-01-31T15:00:00.000Z: succeeded {"terms_closed":1,"statements":2,"balances_fixed":1,"batches":1}\n' +
        'service_fees.bill @ 2027-01-31T15:00:00.000Z: succeeded {"billed":0,"batches":0}\n' +
        'balances.close @ 2027-01-31T15:00:00.000Z: succeeded {"balances_closed":0,"batches":0}\n',
    );
    // A replay creates nothing; the slot's counts in the ledger still say what its first run did.
    const again = kessai(['statements', 'run', '--at', '2027-02-01T00:00']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain(
      'terms.close @ 2027-01-31T15:00:00.000Z (replayed): succeeded {"terms_closed":0,"statements":0,"balances_fixed":0,"batches":0}; slot total over all attempts {"terms_closed":1,"statements":2,"balances_fixed":1,"batches":1}\n',
    );
    const check = await openStore({ dataDir });
    try {
      const rows = await check.db.selectFrom('statements').select(['type', 'net']).where('account_id', '=', 'acct_cli').orderBy('type').execute();
      expect(rows).toEqual([
        { type: 'sales', net: 19_400 },
        { type: 'transfer_fee', net: -250 },
      ]);
    } finally {
      await check.close();
    }
  });
});

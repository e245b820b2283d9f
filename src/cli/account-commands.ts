/**
 * `kessai migrate` and `kessai accounts …`: what they run, loaded by main.ts only when one of them
 * runs (the options and help stay in main.ts).
 */
import type { TermCycle } from '../accounts/accounts';
import { assertCitus, distributeAccountTables } from '../db/citus';
import { openStore } from '../db/connect';
import { migrate } from '../db/migrate';
import { formatJst, toUnixSeconds } from '../domain/time';
import { logger, type GlobalOptions } from './command-runtime';
import { withOperator } from './operator-access';

export async function migrateCommand(options: { citus?: boolean }, g: GlobalOptions): Promise<void> {
  const store = await openStore({ databaseUrl: g.databaseUrl, dataDir: g.dataDir });
  try {
    // Checked before migrating, so a mistyped URL migrates nothing it would not distribute.
    if (options.citus) await assertCitus(store);
    const result = await migrate(store);
    const where = `${store.kind} ${store.location}`;
    if (result.applied.length === 0) console.log(`${where}: up to date (${result.alreadyApplied} migrations)`);
    else console.log(`${where}: applied ${result.applied.join(', ')}`);
    if (options.citus) {
      const citus = await distributeAccountTables(store);
      console.log(`citus: distributed ${citus.distributed.length === 0 ? 'nothing new' : citus.distributed.join(', ')} (${citus.alreadyDistributed} already); local: ${citus.local.join(', ')}`);
    }
  } finally {
    await store.close();
  }
}

export interface CreateAccountOptions {
  readonly name: string;
  readonly id?: string;
  readonly live: boolean;
  readonly termCycle: TermCycle;
  readonly feeRate?: Record<string, string>;
  readonly json?: boolean;
}

export async function createAccountCommand(options: CreateAccountOptions, g: GlobalOptions): Promise<void> {
  // Through a running serve's operator API when it holds the embedded database (operator-access.ts).
  await withOperator({ databaseUrl: g.databaseUrl, dataDir: g.dataDir, log: logger(g) }, async (operator) => {
    const { account, keys } = await operator.accounts.create({
      name: options.name,
      ...(options.id === undefined ? {} : { id: options.id }),
      liveEnabled: options.live,
      termCycle: options.termCycle,
      feeRates: options.feeRate ?? {},
    });
    if (options.json) {
      // snake_case and UNIX seconds, like every other JSON this command and the API print.
      const object = { id: account.id, object: 'account', name: account.name, live_enabled: account.liveEnabled, term_cycle: account.termCycle, fee_rates: account.feeRates, created: toUnixSeconds(account.createdAt) };
      console.log(JSON.stringify({ account: object, keys }, null, 2));
      return;
    }
    console.log(`account ${account.id} (${account.name}), term cycle ${account.termCycle}, live mode ${account.liveEnabled ? 'enabled' : 'not enabled'}`);
    console.log(`fee rates: ${Object.entries(account.feeRates).map(([brand, rate]) => `${brand} ${rate}%`).join(', ')}`);
    console.log(`test secret key: ${keys.test.secret}`);
    console.log(`test public key: ${keys.test.public}`);
    console.log(`live secret key: ${keys.live.secret}`);
    console.log(`live public key: ${keys.live.public}`);
    console.log('Keep the secret keys now: only their digests are stored.');
  });
}

export interface ReauthOptions {
  readonly enable?: boolean;
  readonly disable?: boolean;
  readonly leadHours?: number;
  readonly maxCount?: number;
}

export async function reauthCommand(accountId: string, options: ReauthOptions, g: GlobalOptions): Promise<void> {
  await withOperator({ databaseUrl: g.databaseUrl, dataDir: g.dataDir, log: logger(g) }, async (operator) => {
    const settings = await operator.accounts.reauth(accountId, {
      ...(options.enable ? { enabled: true } : options.disable ? { enabled: false } : {}),
      ...(options.leadHours === undefined ? {} : { leadHours: options.leadHours }),
      ...(options.maxCount === undefined ? {} : { maxCount: options.maxCount }),
    });
    console.log(
      settings.enabled
        ? `${accountId}: scheduled reauthorization on: holds lapsing within ${settings.leadHours} h are reauthorized, at most ${settings.maxCount} time(s) per charge`
        : `${accountId}: scheduled reauthorization off (holds lapse at expired_at)`,
    );
  });
}

export async function listAccountsCommand(g: GlobalOptions): Promise<void> {
  await withOperator({ databaseUrl: g.databaseUrl, dataDir: g.dataDir, log: logger(g) }, async (operator) => {
    const rows = await operator.accounts.list();
    if (rows.length === 0) console.log('no accounts yet: ./bin/kessai.mjs accounts create --name <name>');
    for (const row of rows) console.log(`${row.id}\t${row.name}\t${row.termCycle}\t${row.liveEnabled ? 'live' : 'test only'}\t${formatJst(row.createdAt)}`);
  });
}

/**
 * `kessai adjustments add|list` (operator adjustments of a balance, booked into a `misc` statement)
 * and `kessai accounts plan` (an account's own paid plan of the service, billed into `service_fee`
 * statements). The service's API has neither: they are the operator's (operator.ts), reached
 * through a running serve's operator API when it holds the embedded database. A composition root
 * like main.ts.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { KessaiError } from '../domain/errors';
import { ADJUSTMENT_SUBJECTS, SERVICE_PLAN_SUBJECTS } from '../domain/service-statements';
import { formatJst, fromUnixSeconds, parseInstant } from '../domain/time';
import type { Operator } from '../api/admin/operator';
import type { AdjustmentObject } from '../settlement/adjustments';
import type { ServicePlanObject } from '../settlement/service-fees';
import type { GlobalOptions } from './command-runtime';

/** A whole number of yen, signed; `--amount -500` and `--amount=-500` both work. */
function yenArg(value: string): number {
  if (!/^-?\d{1,12}$/.test(value)) throw new InvalidArgumentError(`expected a whole number of yen such as 5000 or -5000, got ${JSON.stringify(value)}`);
  return Number(value);
}

function instantArg(value: string): Date {
  try {
    return parseInstant(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

/** A refusal names the parameter; nothing was booked. */
async function refusalsNamed(action: () => Promise<void>): Promise<void> {
  try {
    await action();
  } catch (error) {
    if (error instanceof KessaiError) throw new Error(`${error.code}${error.param ? ` (${error.param})` : ''}: ${error.message}`, { cause: error });
    throw error;
  }
}

/** The operator's actions: through a running serve's operator API when it holds the embedded database (operator-access.ts). */
async function withOperatorOf(command: Command, action: (operator: Operator) => Promise<void>): Promise<void> {
  const [{ logger }, { withOperator }] = await Promise.all([import('./command-runtime'), import('./operator-access')]);
  const g = command.optsWithGlobals() as GlobalOptions;
  await refusalsNamed(() => withOperator({ databaseUrl: g.databaseUrl, dataDir: g.dataDir, log: logger(g) }, action));
}

function describeAdjustment(a: AdjustmentObject): string {
  return `${a.id}\t${a.livemode ? 'live' : 'test'}\t${formatJst(fromUnixSeconds(a.created))}\t${a.tenant_id ?? a.owner}\t${a.subject}\t${a.amount}\t${a.term_id}\t${a.reason}`;
}

function describePlan(p: ServicePlanObject): string {
  const next = p.next_bill_at === null ? 'not billing' : `next bill ${formatJst(fromUnixSeconds(p.next_bill_at))}`;
  return `from ${formatJst(fromUnixSeconds(p.effective_from))}\t${p.subject}\t${p.monthly_fee} yen/month\t${next}`;
}

export function registerAdjustments(program: Command, accounts: Command): void {
  const adjustments = program.command('adjustments').description("operator adjustments of a balance: shown on the term's misc statement (v1 §2.6)");
  adjustments
    .command('add')
    .description('book an adjustment into the open term: positive is paid to the owner, negative is billed')
    .argument('<account>', 'account id')
    .requiredOption('--amount <yen>', 'signed whole yen, e.g. 5000 or -5000', yenArg)
    .addOption(new Option('--subject <subject>', 'statement item subject').choices([...ADJUSTMENT_SUBJECTS]).makeOptionMandatory())
    .requiredOption('--reason <text>', 'why (1-500 characters), kept with the adjustment')
    .option('--owner <owner>', 'whose balance: merchant, platform or a tenant id (ten_...)', 'merchant')
    .option('--live', 'a live-mode balance (default: test mode)', false)
    .option('--key <key>', 'idempotency key: the same key books once and prints the first booking')
    .option('--json', 'print the adjustment as JSON')
    .action(async (accountId: string, options: { amount: number; subject: string; reason: string; owner: string; live: boolean; key?: string; json?: boolean }, command: Command) => {
      await withOperatorOf(command, async (operator) => {
        const adjustment = await operator.adjustments.book(accountId, {
          livemode: options.live,
          amount: options.amount,
          subject: options.subject,
          reason: options.reason,
          owner: options.owner,
          ...(options.key === undefined ? {} : { requestKey: options.key }),
        });
        console.log(options.json ? JSON.stringify(adjustment, null, 2) : describeAdjustment(adjustment));
      });
    });
  adjustments
    .command('list')
    .description('list the adjustments of an account, newest first')
    .argument('<account>', 'account id')
    .option('--live', 'live mode (default: test mode)', false)
    .option('--json', 'print JSON')
    .action(async (accountId: string, options: { live: boolean; json?: boolean }, command: Command) => {
      await withOperatorOf(command, async (operator) => {
        const list = await operator.adjustments.list(accountId, { livemode: options.live });
        if (options.json) console.log(JSON.stringify(list, null, 2));
        else if (list.length === 0) console.log(`no adjustments of ${accountId} in ${options.live ? 'live' : 'test'} mode`);
        else for (const a of list) console.log(describeAdjustment(a));
      });
    });

  accounts
    .command('plan')
    .description("the account's own paid plan of the service, billed monthly into service_fee statements: show it, or set it from a date")
    .argument('<account>', 'account id')
    .addOption(new Option('--subject <subject>', 'the plan: proplan (Pro plan) or plan_fee (another paid plan)').choices([...SERVICE_PLAN_SUBJECTS]))
    .option('--fee <yen>', 'monthly fee in yen (0 ends the paid plan)', yenArg)
    .option('--from <instant>', 'in force from this date or instant (JST unless it has a zone; default now); months starting at or after it are billed at this fee', instantArg)
    .option('--live', 'live mode (default: test mode)', false)
    .option('--json', 'print JSON')
    .action(async (accountId: string, options: { subject?: string; fee?: number; from?: Date; live: boolean; json?: boolean }, command: Command) => {
      if ((options.subject === undefined) !== (options.fee === undefined)) throw new Error('--subject and --fee go together (both to set the plan, neither to show it)');
      await withOperatorOf(command, async (operator) => {
        if (options.subject !== undefined) {
          const set = await operator.accounts.setServicePlan(accountId, { livemode: options.live, subject: options.subject, monthlyFee: options.fee!, ...(options.from ? { from: options.from } : {}) });
          if (!options.json) console.log(`set: ${describePlan(set)}`);
        }
        const plans = await operator.accounts.servicePlans(accountId, { livemode: options.live });
        if (options.json) console.log(JSON.stringify(plans, null, 2));
        else if (options.subject === undefined) {
          if (plans.length === 0) console.log(`${accountId}: no paid plan in ${options.live ? 'live' : 'test'} mode`);
          for (const plan of plans) console.log(describePlan(plan));
        }
      });
    });
}

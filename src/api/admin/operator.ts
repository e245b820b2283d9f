/**
 * What an operator can do while kessai runs, in one implementation with two front ends: the
 * operator API (/admin, admin-routes.ts, and the console on top of it) and the CLI (src/cli),
 * which calls it directly, or through a running server's operator API when the embedded database
 * is held by `kessai serve` (operator-client.ts implements this same interface over HTTP).
 *
 * Every change is recorded in `operator_audit` with who (the operator token's name, or `cli` for a
 * command run on the database directly) and when. Secrets made here (API keys, endpoint tokens) are
 * returned once and never recorded.
 */
import type { Kysely } from 'kysely';
import { createAccount, listAccounts, type Account, type AccountKeys, type CreateAccountInput, type TermCycle } from '../../accounts/accounts';
import { createApiKey, listApiKeys, revokeApiKey, type ApiKeySummary } from '../../accounts/api-keys';
import { setReauthSettings, type ReauthSettings } from '../../charges/hold-jobs';
import type { JobRunStatus } from '../../db/column-types';
import type { Database } from '../../db/schema';
import { KessaiError } from '../../domain/errors';
import { FixedClock, type Clock } from '../../engine/clock';
import type { Context } from '../../engine/context';
import { slotAtOrBefore } from '../../engine/cron';
import type { JobDefinition } from '../../engine/job';
import { jobStates, LEDGER_STATUSES, ledgerSlots, type JobState, type LedgerSlot } from '../../engine/job-ledger';
import { Scheduler, type SlotOutcome } from '../../engine/scheduler';
import { bookAdjustment, listAdjustments, type AdjustmentObject, type BookAdjustmentInput } from '../../settlement/adjustments';
import { listEventPage } from '../../events/events';
import { renderStatementCsv } from '../../settlement/statement-urls';
import { findStatement, listBalances, listStatements, renderBalanceRecord, renderStatementRecord, statementObjects, type BalanceObject, type StatementObject } from '../../settlement/statements';
import { listTerms, renderTermRecord, type TermObject } from '../../settlement/terms';
import { listServicePlans, setServicePlan, type ServicePlanObject, type SetServicePlanInput } from '../../settlement/service-fees';
import { startAdvance } from '../../test-clocks/advance';
import { createTestClock, deleteTestClock, instantParam, listTestClocks, type TestClockObject } from '../../test-clocks/test-clocks';
import { sendTestEvent } from '../../webhooks/delivery';
import { addEndpoint, listEndpoints, removeEndpoint, rotateEndpointToken, setEndpointEnabled, type AddEndpointInput, type EndpointCounts, type WebhookEndpoint } from '../../webhooks/endpoints';
import { deliveryAttempts, listDeliveries, resendGivenUp, type Delivery, type DeliveryAttempt, type ResendResult } from '../../webhooks/resend';

export type AccountSummary = { readonly id: string; readonly name: string; readonly liveEnabled: boolean; readonly termCycle: TermCycle; readonly createdAt: Date };
export type ListedEndpoint = WebhookEndpoint & { readonly counts: EndpointCounts };
export interface TestSendResult {
  readonly eventId: string;
  readonly ok: boolean;
  readonly status: number | null;
  readonly error: string | null;
  readonly durationMs: number;
}

/** An event of an account as the console shows it: its object as the API sends it. */
export interface AccountEvent {
  readonly id: string;
  readonly type: string;
  readonly apiVersion: string;
  readonly createdAt: Date;
  readonly data: unknown;
}

/** An account's settlement in one mode: the latest terms, statements and balances, newest first. */
export interface AccountSettlement {
  readonly terms: TermObject[];
  readonly statements: StatementObject[];
  readonly balances: BalanceObject[];
}

/** How many of each an account's pages show at most. */
export const ACCOUNT_PAGE_LIMIT = 20;

export interface Operator {
  readonly accounts: {
    create(input: CreateAccountInput): Promise<{ account: Account; keys: AccountKeys }>;
    list(): Promise<AccountSummary[]>;
    keys(accountId: string): Promise<ApiKeySummary[]>;
    createKey(accountId: string, input: { kind: 'secret' | 'public'; livemode: boolean }): Promise<{ key: ApiKeySummary; secret: string }>;
    revokeKey(accountId: string, keyId: string): Promise<ApiKeySummary>;
    /** The account's scheduled reauthorization of held charges, after the given changes (none: as it is). */
    reauth(accountId: string, changes: Partial<ReauthSettings>): Promise<ReauthSettings>;
    /** The account's own paid plan of the service in a mode: its settings, oldest first. */
    servicePlans(accountId: string, options: { livemode: boolean }): Promise<ServicePlanObject[]>;
    /** Appends a plan setting in force from `from` (now when absent). */
    setServicePlan(accountId: string, input: SetServicePlanInput & { livemode: boolean }): Promise<ServicePlanObject>;
    /** The account's latest events of a mode (both API versions), newest first. */
    events(accountId: string, options: { livemode: boolean }): Promise<AccountEvent[]>;
    settlement(accountId: string, options: { livemode: boolean }): Promise<AccountSettlement>;
    /** A statement's CSV, as its download URL serves it (every item). */
    statementCsv(accountId: string, options: { livemode: boolean; statementId: string }): Promise<string>;
  };
  readonly webhooks: {
    add(input: AddEndpointInput): Promise<{ endpoint: WebhookEndpoint; token: string }>;
    list(accountId: string): Promise<ListedEndpoint[]>;
    setEnabled(accountId: string, endpointId: string, enabled: boolean): Promise<WebhookEndpoint>;
    rotateToken(accountId: string, endpointId: string): Promise<{ endpoint: WebhookEndpoint; token: string }>;
    remove(accountId: string, endpointId: string): Promise<WebhookEndpoint>;
    test(accountId: string, endpointId: string): Promise<TestSendResult>;
    deliveries(accountId: string, endpointId: string, options?: { status?: string; limit?: number }): Promise<Delivery[]>;
    attempts(accountId: string, endpointId: string, eventId: string): Promise<DeliveryAttempt[]>;
    /** Re-sends one given-up delivery (`eventId`) or every given-up delivery of the endpoint. */
    resend(accountId: string, endpointId: string, options: { eventId?: string; requestKey: string }): Promise<ResendResult>;
  };
  /** Adjustments of a balance, booked into the owner's open term's `misc` statement (settlement). */
  /** An account's test clocks (test mode), as its clock API shows them. */
  readonly testClocks: {
    list(accountId: string): Promise<TestClockObject[]>;
    create(accountId: string, input: { frozenTime: Date; name?: string }): Promise<TestClockObject>;
    /** Claims an advance to `to` (refusals thrown at once) and runs it in this process after answering the clock `advancing`. */
    advance(accountId: string, testClockId: string, to: Date): Promise<TestClockObject>;
    /** Deletes a clock that is not advancing, with every object on it and its books. */
    delete(accountId: string, testClockId: string): Promise<{ id: string; object: 'test_clock'; deleted: true }>;
  };
  readonly adjustments: {
    /** Books one; the same `requestKey` books once and returns the first booking. */
    book(accountId: string, input: BookAdjustmentInput & { livemode: boolean }): Promise<AdjustmentObject>;
    list(accountId: string, options: { livemode: boolean }): Promise<AdjustmentObject[]>;
  };
  readonly jobs: {
    states(): Promise<JobState[]>;
    slots(options: { job?: string; status?: string; limit?: number }): Promise<LedgerSlot[]>;
    /** Runs (or replays) one slot now, as `kessai jobs run` does; an abandoned slot is run again this way. */
    run(job: string, slot: Date): Promise<SlotOutcome>;
    /** The nightly statement generation now: the daily slot of terms.close, then of balances.close, at or before `at`. */
    runStatements(at?: Date): Promise<SlotOutcome[]>;
  };
}

export interface LocalOperatorOptions {
  readonly ctx: Context;
  /** Recorded as who made each change. */
  readonly who: string;
  readonly jobs: readonly JobDefinition[];
  /** Names this process in the run ledger (`host:pid`). */
  readonly owner: string;
  /** The clock of the run ledger's leases (the real clock), whatever instant a slot acts as of. */
  readonly ledgerClock: Clock;
  /** Stops a slot run by this operator (the server's or the command's stop signal). */
  readonly stopSignal?: AbortSignal;
  /** Slots later than the context clock's now may run (the CLI's what-if `--at`); the server refuses them. */
  readonly futureSlots?: boolean;
}

/**
 * One audit row: who did what to which account and object, when. An action audited once per
 * object (a unique index of its own, e.g. `adjustment.book`) adds nothing when its row exists:
 * one statement, so two racing requests cannot both add one.
 */
export async function recordAudit(db: Kysely<Database>, row: { at: Date; operator: string; action: string; account?: string | null; target?: string | null; detail?: Record<string, unknown> }): Promise<void> {
  await db
    .insertInto('operator_audit')
    .values({ at: row.at, operator: row.operator, action: row.action, account: row.account ?? null, target: row.target ?? null, detail: JSON.stringify(row.detail ?? {}) })
    .onConflict((oc) => oc.doNothing())
    .execute();
}

/** The latest audit rows, newest first. */
export async function recentAudit(db: Kysely<Database>, limit = 50) {
  return db.selectFrom('operator_audit').selectAll().orderBy('audit_id', 'desc').limit(limit).execute();
}

/**
 * The jobs statements run runs, in the worker's order (jobs/index.ts): the term close, then the
 * plan fees of the service billed into the term it opened, then the balances due. So a run gives
 * the statements the worker's slots at that instant give.
 */
export const STATEMENT_JOBS = ['terms.close', 'service_fees.bill', 'balances.close'] as const;

export function localOperator(options: LocalOperatorOptions): Operator {
  const { ctx, who } = options;
  const audit = (action: string, account: string | null, target: string | null, detail: Record<string, unknown> = {}) => recordAudit(ctx.db, { at: ctx.clock.now(), operator: who, action, account, target, detail });
  const scheduler = (at: Date) => new Scheduler({ ...ctx, clock: new FixedClock(at) }, options.jobs, { owner: options.owner, ledgerClock: options.ledgerClock, ...(options.stopSignal ? { stopSignal: options.stopSignal } : {}) });
  const checkSlotTime = (slot: Date) => {
    if (Number.isNaN(slot.getTime())) throw new KessaiError('invalid_param_key', { param: 'slot', message: 'slot must be an instant' });
    if (!options.futureSlots && slot.getTime() > ctx.clock.now().getTime()) throw new KessaiError('invalid_param_key', { param: 'slot', message: `slot ${slot.toISOString()} is in the future; a slot runs once its instant has come` });
  };
  const jobNamed = (name: string) => {
    const job = options.jobs.find((candidate) => candidate.name === name);
    if (!job) throw new KessaiError('invalid_param_key', { param: 'job', message: `no job named ${JSON.stringify(name)}; jobs: ${options.jobs.map((j) => j.name).join(', ')}` });
    return job;
  };
  /** The account as a caller of its own reads (`invalid_id` on `account` when there is none). */
  const accountCaller = async (accountId: string, livemode: boolean) => {
    const account = await ctx.db.selectFrom('accounts').select('account_id').where('account_id', '=', accountId).executeTakeFirst();
    if (!account) throw new KessaiError('invalid_id', { param: 'account', message: `No such account: ${accountId}` });
    return { accountId, livemode, kind: 'secret' as const };
  };
  const outcomeDetail = (outcome: SlotOutcome) => ({ job: outcome.job, slot: outcome.slot.toISOString(), status: outcome.status, attempt: outcome.attempt });
  return {
    accounts: {
      async create(input) {
        const created = await createAccount(ctx, input);
        await audit('account.create', created.account.id, created.account.id, { name: created.account.name, liveEnabled: created.account.liveEnabled, termCycle: created.account.termCycle });
        return created;
      },
      list: () => listAccounts(ctx),
      keys: (accountId) => listApiKeys(ctx, accountId),
      async createKey(accountId, input) {
        const created = await createApiKey(ctx, accountId, input);
        await audit('api_key.create', accountId, created.key.id, { kind: created.key.kind, livemode: created.key.livemode, hint: created.key.hint });
        return created;
      },
      async revokeKey(accountId, keyId) {
        const key = await revokeApiKey(ctx, accountId, keyId);
        await audit('api_key.revoke', accountId, key.id, { kind: key.kind, livemode: key.livemode, hint: key.hint });
        return key;
      },
      async reauth(accountId, changes) {
        const settings = await setReauthSettings(ctx.db, accountId, changes);
        if (Object.keys(changes).length > 0) await audit('account.reauth', accountId, accountId, { ...settings });
        return settings;
      },
      async events(accountId, { livemode }) {
        const caller = await accountCaller(accountId, livemode);
        const page = { limit: ACCOUNT_PAGE_LIMIT, offset: 0, createdFrom: undefined, createdBefore: undefined };
        const filters = { resourceId: undefined, object: undefined, type: undefined };
        const both = [...(await listEventPage(ctx, caller, { version: 'v1', page, filters })), ...(await listEventPage(ctx, caller, { version: 'v2', page, filters }))];
        both.sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime());
        return both.slice(0, ACCOUNT_PAGE_LIMIT).map((e) => ({ id: e.id, type: e.type, apiVersion: e.apiVersion, createdAt: e.createdAt, data: e.data }));
      },
      async settlement(accountId, { livemode }) {
        const caller = await accountCaller(accountId, livemode);
        const page = { limit: ACCOUNT_PAGE_LIMIT, offset: 0, createdFrom: undefined, createdBefore: undefined };
        const [terms, statements, balances] = [await listTerms(ctx, caller, page), await listStatements(ctx, caller, { page }), await listBalances(ctx, caller, { page })];
        // The lists read one past the limit (for has_more): the page shows the limit.
        return { terms: terms.slice(0, ACCOUNT_PAGE_LIMIT).map(renderTermRecord), statements: statements.slice(0, ACCOUNT_PAGE_LIMIT).map(renderStatementRecord), balances: balances.slice(0, ACCOUNT_PAGE_LIMIT).map(renderBalanceRecord) };
      },
      async statementCsv(accountId, { livemode, statementId }) {
        const caller = await accountCaller(accountId, livemode);
        const [statement] = await statementObjects(ctx.db, [await findStatement(ctx.db, caller, statementId, 'statement')]);
        return renderStatementCsv(statement!, false);
      },
      servicePlans: (accountId, { livemode }) => listServicePlans(ctx, { accountId, livemode }),
      async setServicePlan(accountId, { livemode, ...input }) {
        const plan = await setServicePlan(ctx, { accountId, livemode }, input);
        await audit('service_plan.set', accountId, accountId, { livemode, subject: plan.subject, monthlyFee: plan.monthly_fee, from: new Date(plan.effective_from * 1000).toISOString() });
        return plan;
      },
    },
    webhooks: {
      async add(input) {
        const added = await addEndpoint(ctx, input);
        await audit('webhook_endpoint.add', input.accountId, added.endpoint.id, { url: added.endpoint.url, livemode: added.endpoint.livemode });
        return added;
      },
      list: (accountId) => listEndpoints(ctx.db, accountId),
      async setEnabled(accountId, endpointId, enabled) {
        const endpoint = await setEndpointEnabled(ctx, accountId, endpointId, enabled);
        await audit(enabled ? 'webhook_endpoint.enable' : 'webhook_endpoint.disable', accountId, endpointId);
        return endpoint;
      },
      async rotateToken(accountId, endpointId) {
        const rotated = await rotateEndpointToken(ctx, accountId, endpointId);
        await audit('webhook_endpoint.rotate_token', accountId, endpointId);
        return rotated;
      },
      async remove(accountId, endpointId) {
        const endpoint = await removeEndpoint(ctx, accountId, endpointId);
        await audit('webhook_endpoint.remove', accountId, endpointId);
        return endpoint;
      },
      async test(accountId, endpointId) {
        const { event, result } = await sendTestEvent(ctx, accountId, endpointId);
        await audit('webhook_endpoint.test', accountId, endpointId, { event: event.id, ok: result.ok, status: result.status });
        return { eventId: String(event.id), ok: result.ok, status: result.status, error: result.error ?? null, durationMs: result.durationMs };
      },
      deliveries: (accountId, endpointId, listOptions = {}) => listDeliveries(ctx, accountId, endpointId, listOptions),
      attempts: (accountId, endpointId, eventId) => deliveryAttempts(ctx, accountId, endpointId, eventId),
      async resend(accountId, endpointId, resendOptions) {
        const result = await resendGivenUp(ctx, { accountId, endpointId, requestKey: resendOptions.requestKey, operator: who, ...(resendOptions.eventId === undefined ? {} : { eventId: resendOptions.eventId }) });
        // Recorded once per re-send that happened: a retried request (nothing put back) adds no row.
        if (result.resent > 0) await audit('webhook_delivery.resend', accountId, endpointId, { events: result.deliveries.map((d) => d.eventId), resent: result.resent, requestKey: resendOptions.requestKey });
        return result;
      },
    },
    testClocks: {
      list: async (accountId) => (await listTestClocks(ctx, await accountCaller(accountId, false))).data,
      async create(accountId, { frozenTime, name }) {
        const clock = await createTestClock(ctx, await accountCaller(accountId, false), { frozenTime: instantParam(frozenTime.getTime() / 1000, 'frozen_time'), name });
        await audit('test_clock.create', accountId, clock.id, { frozenTime: frozenTime.toISOString(), name: clock.name });
        return clock;
      },
      async advance(accountId, testClockId, to) {
        // The run goes on after the answer; one cut short by a stop resumes on the clock's next advance.
        const { clock } = await startAdvance(ctx, options.ledgerClock, await accountCaller(accountId, false), testClockId, to.getTime() / 1000, options.jobs, options.owner);
        await audit('test_clock.advance', accountId, testClockId, { to: to.toISOString() });
        return clock;
      },
      async delete(accountId, testClockId) {
        const deleted = await deleteTestClock(ctx, await accountCaller(accountId, false), testClockId);
        await audit('test_clock.delete', accountId, testClockId);
        return deleted;
      },
    },
    adjustments: {
      async book(accountId, { livemode, ...input }) {
        const adjustment = await bookAdjustment(ctx, { accountId, livemode }, input);
        // Recorded once per booking (the index operator_audit_once_per_booking): a retried or racing
        // request with the same key gets the first booking back and adds no row.
        await audit('adjustment.book', accountId, adjustment.id, { livemode, amount: adjustment.amount, subject: adjustment.subject, owner: adjustment.tenant_id ?? adjustment.owner, reason: adjustment.reason, term: adjustment.term_id, ...(input.requestKey === undefined ? {} : { requestKey: input.requestKey }) });
        return adjustment;
      },
      list: (accountId, { livemode }) => listAdjustments(ctx, { accountId, livemode }),
    },
    jobs: {
      states: () => jobStates(ctx, options.jobs, ctx.clock.now()),
      async slots(slotOptions) {
        if (slotOptions.job !== undefined) jobNamed(slotOptions.job);
        if (slotOptions.status !== undefined && !(LEDGER_STATUSES as readonly string[]).includes(slotOptions.status)) {
          throw new KessaiError('invalid_param_key', { param: 'status', message: `status must be one of ${LEDGER_STATUSES.join(', ')}` });
        }
        const limit = slotOptions.limit ?? 50;
        if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new KessaiError('invalid_param_key', { param: 'limit', message: 'limit must be a whole number from 1 to 500' });
        return ledgerSlots(ctx, { ...(slotOptions.job === undefined ? {} : { job: slotOptions.job }), ...(slotOptions.status === undefined ? {} : { status: slotOptions.status as JobRunStatus }), limit });
      },
      async run(jobName, slot) {
        jobNamed(jobName);
        checkSlotTime(slot);
        let outcome: SlotOutcome;
        try {
          outcome = await scheduler(slot).runSlot(jobName, slot);
        } catch (error) {
          // The scheduler's refusals (not a slot of the job, held by another worker) are the caller's to fix.
          if (error instanceof Error && !(error instanceof KessaiError) && /is not a slot of|is being run by|is in the future/.test(error.message)) throw new KessaiError('invalid_param_key', { param: 'slot', message: error.message });
          throw error;
        }
        await audit('job.run', null, `${jobName}@${slot.toISOString()}`, outcomeDetail(outcome));
        return outcome;
      },
      async runStatements(at) {
        const instant = at ?? ctx.clock.now();
        checkSlotTime(instant);
        const runner = scheduler(instant);
        const outcomes: SlotOutcome[] = [];
        for (const name of STATEMENT_JOBS) {
          // Stopped: the slot that was running has been handed back; the next one is not started.
          if (runner.stopping) break;
          const job = jobNamed(name);
          // Each job's latest slot at or before `at` (daily for the closes, the 1st for plan fees,
          // whose late slot bills every month it missed, each at its own start).
          outcomes.push(await runner.runSlot(name, slotAtOrBefore(job.schedule, instant)));
        }
        await audit('statements.run', null, instant.toISOString(), { slots: outcomes.map(outcomeDetail) });
        return outcomes;
      },
    },
  };
}

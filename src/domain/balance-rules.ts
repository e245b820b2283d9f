/**
 * What happens to an owner's balance when a term closes (service-rules §4 "Balance"): the decision
 * (decideBalanceAtClose) and the whole transition of one owner's balance with the statements and
 * events it leads to (closeOwnerBalance). Pure: the term close's plan (src/settlement/
 * term-close-plan.ts) applies them to rows, and the job writes them.
 *
 * Order of the rules, as the spec lists them:
 * 1. net < 0 → `claim` (the owner owes);
 * 2. net ≥ minimum → `transfer`, with a `transfer_fee` statement of −250;
 * 3. 0 ≤ net < minimum, deferral deadline not reached → `defer` (stays `collecting`);
 * 4. 0 ≤ net < minimum, deadline reached → net < 1,000: `forfeit`; net ≥ 1,000: `transfer`.
 */
import { assertYen } from './money';
import { JST_OFFSET_MS, jstDate } from './time';

/** service-rules §4: merchants are paid out from 10,000 yen. */
export const MERCHANT_MINIMUM_TRANSFER_AMOUNT = 10_000;
/** service-rules §4: a tenant's `minimum_transfer_amount` defaults to 10,000 and is at least 1,000. */
export const TENANT_MINIMUM_TRANSFER_AMOUNT_DEFAULT = 10_000;
export const TENANT_MINIMUM_TRANSFER_AMOUNT_FLOOR = 1_000;
/** Past the deferral deadline, a balance below this is forfeited instead of paid out. */
export const FORFEIT_THRESHOLD = 1_000;
/** The `transfer_fee` statement's net: every payout costs 250 yen. */
export const TRANSFER_FEE_STATEMENT_NET = -250;
/** A deferral lasts one year from the end of the term of the latest sales statement. */
export const DEFERRAL_PERIOD_YEARS = 1;

/**
 * The owners of balances. The platform operator is itself a merchant account, so its balance of
 * collected platform fees uses the merchant minimum (Decision).
 */
export type BalanceOwner =
  | { readonly kind: 'merchant' }
  | { readonly kind: 'platform' }
  | { readonly kind: 'tenant'; readonly minimumTransferAmount: number };

/** The smallest net that is paid out at a close before the deferral deadline. */
export function minimumTransferAmount(owner: BalanceOwner): number {
  if (owner.kind !== 'tenant') return MERCHANT_MINIMUM_TRANSFER_AMOUNT;
  const minimum = assertYen(owner.minimumTransferAmount, 'minimum_transfer_amount');
  if (minimum < TENANT_MINIMUM_TRANSFER_AMOUNT_FLOOR) {
    throw new RangeError(`minimum_transfer_amount must be at least ${TENANT_MINIMUM_TRANSFER_AMOUNT_FLOOR}, got ${minimum}`);
  }
  return minimum;
}

/**
 * The deferral deadline after a sales statement of the term ending at `salesTermEnd` joins the
 * balance: that end + 1 year on the JST calendar. It only moves later, so an older sales statement
 * arriving late (or a replay) never shortens a deadline already set. A Feb 29 (never a term end,
 * which is the 1st or the 16th) would map to Feb 28 of the next year rather than overflow into March.
 */
export function deferralDeadline(salesTermEnd: Date, current: Date | null): Date {
  const candidate = addJstYears(salesTermEnd, DEFERRAL_PERIOD_YEARS);
  if (current !== null && current.getTime() >= candidate.getTime()) return current;
  return candidate;
}

/** Whether a close at `closeAt` is past the deadline (Decision: reaching it counts). */
export function deferralDeadlineReached(deadline: Date | null, closeAt: Date): boolean {
  // A close exactly at the deadline is the one that completes the year of deferral; waiting for
  // the next close would defer for a year and a term. No deadline (no sales statement yet) never
  // expires: there is nothing the year could be counted from.
  return deadline !== null && closeAt.getTime() >= deadline.getTime();
}

export interface BalanceCloseInput {
  /** The balance's net: the sum of all statements it collects, including merged earlier terms. */
  readonly net: number;
  /** From minimumTransferAmount. */
  readonly minimum: number;
  /** From deferralDeadline; null while the balance holds no sales statement. */
  readonly deadline: Date | null;
  /** The close instant (the end of the closing term). */
  readonly closeAt: Date;
}

export type BalanceDecision =
  | {
      /** The owner owes |net|; no transfer fee, since nothing is transferred to the owner. */
      readonly outcome: 'claim';
      readonly state: 'claim';
      readonly net: number;
    }
  | {
      readonly outcome: 'transfer';
      readonly state: 'transfer';
      /** Why it is paid out: it reached the minimum, or the deferral deadline passed with ≥ 1,000. */
      readonly reason: 'minimum_reached' | 'deadline_reached';
      /** Net before the transfer fee. */
      readonly net: number;
      /** The `transfer_fee` statement to add to the balance. */
      readonly transferFeeStatementNet: typeof TRANSFER_FEE_STATEMENT_NET;
      /** What reaches the owner's account: net − 250, always ≥ 750. */
      readonly payout: number;
    }
  | {
      /** Stays `collecting`; the next term's statements are merged into it (`balance.merged`). */
      readonly outcome: 'defer';
      readonly state: 'collecting';
      readonly net: number;
    }
  | {
      readonly outcome: 'forfeit';
      readonly state: 'transfer';
      readonly net: number;
      /** The `forfeit` statement's net, −net; null when net is 0, as there is nothing to forfeit. */
      readonly forfeitStatementNet: number | null;
      /** A forfeited balance has no payout to wait for: it is `closed` at the close itself. */
      readonly closedAt: Date;
    };

/**
 * The decision for one owner's balance at a term close.
 *
 * Transfer fee (Decision): the minimum is compared with the net *before* the fee, as the spec
 * states the rule on net; so a balance of exactly 10,000 pays out 9,750. The fee cannot take a
 * payout below zero: every minimum is at least 1,000, and a deadline payout needs ≥ 1,000, so a
 * payout is at least 750. A payout after the deadline is a transfer like any other and pays the
 * same fee.
 */
export function decideBalanceAtClose(input: BalanceCloseInput): BalanceDecision {
  const net = assertYen(input.net, 'net');
  const minimum = assertYen(input.minimum, 'minimum');
  if (minimum < TENANT_MINIMUM_TRANSFER_AMOUNT_FLOOR) {
    throw new RangeError(`minimum must be at least ${TENANT_MINIMUM_TRANSFER_AMOUNT_FLOOR}, got ${minimum}`);
  }
  if (net < 0) return { outcome: 'claim', state: 'claim', net };
  if (net >= minimum) return transfer(net, 'minimum_reached');
  if (!deferralDeadlineReached(input.deadline, input.closeAt)) return { outcome: 'defer', state: 'collecting', net };
  if (net >= FORFEIT_THRESHOLD) return transfer(net, 'deadline_reached');
  // `0 - net`, not `-net`: a zero balance must not produce a -0 amount.
  return { outcome: 'forfeit', state: 'transfer', net, forfeitStatementNet: net === 0 ? null : 0 - net, closedAt: input.closeAt };
}

function transfer(net: number, reason: 'minimum_reached' | 'deadline_reached'): BalanceDecision {
  return {
    outcome: 'transfer',
    state: 'transfer',
    reason,
    net,
    transferFeeStatementNet: TRANSFER_FEE_STATEMENT_NET,
    payout: net + TRANSFER_FEE_STATEMENT_NET,
  };
}

/** `instant` moved `years` later on the JST calendar, keeping the JST time of day. */
function addJstYears(instant: Date, years: number): Date {
  const shifted = new Date(instant.getTime() + JST_OFFSET_MS);
  const month = shifted.getUTCMonth();
  shifted.setUTCFullYear(shifted.getUTCFullYear() + years);
  // Feb 29 + 1 year overflows to Mar 1; step back to Feb 28.
  if (shifted.getUTCMonth() !== month) shifted.setUTCDate(0);
  return new Date(shifted.getTime() - JST_OFFSET_MS);
}

/** A balance as the close rules see it (the row's other columns are the caller's). */
export interface BalanceState {
  readonly state: 'collecting' | 'transfer' | 'claim';
  readonly net: number;
  readonly deadline: Date | null;
  readonly dueDate: string | null;
  readonly dueAt: Date | null;
  readonly closed: boolean;
  readonly closedDate: string | null;
}

/** A balance opened at a close for an owner that had none collecting. */
export const NEW_BALANCE: BalanceState = { state: 'collecting', net: 0, deadline: null, dueDate: null, dueAt: null, closed: false, closedDate: null };

export interface OwnerCloseInput {
  /** The owner's collecting balance before the close; null when it has none (one is opened: `balance.created`). */
  readonly balance: BalanceState | null;
  /** The net of the closing term's sales statement of the owner; null when the term has none for it. */
  readonly salesNet: number | null;
  /**
   * The closing term's other statements of the owner, in order: its plan fees (`service_fee`) and
   * operator adjustments (`misc`). They join the balance like the sales statement, but only a
   * sales statement moves the deferral deadline (the spec counts it from "the latest sales statement").
   */
  readonly otherStatements?: readonly { readonly type: TermStatementType; readonly net: number }[];
  /** From minimumTransferAmount. */
  readonly minimum: number;
  /** The close instant (the end of the closing term). */
  readonly closeAt: Date;
  /** The payout (or claim) date of the closing term (balanceDueDate), 00:00 JST. */
  readonly due: { readonly date: string; readonly at: Date };
}

export type BalanceEventType = 'balance.created' | 'balance.merged' | 'balance.fixed' | 'balance.closed';

/** The statements of a term other than sales that join an owner's balance at the close. */
export type TermStatementType = 'service_fee' | 'misc';

export interface BalanceTransition {
  readonly decision: BalanceDecision;
  /** The statements the close adds to the balance, in order; each adds its net to the balance's. */
  readonly statements: readonly { readonly type: 'sales' | TermStatementType | 'transfer_fee' | 'forfeit'; readonly net: number }[];
  /** False when the balance is left exactly as it was (deferred with nothing new): nothing is written. */
  readonly changed: boolean;
  /** Events in order, each with the balance as it was at that step; `atClose` false: the balance was not touched yet (its update time stays). */
  readonly events: readonly { readonly type: BalanceEventType; readonly balance: BalanceState; readonly atClose: boolean }[];
  /** The balance after the close. */
  readonly after: BalanceState;
}

/**
 * One owner's balance through a term close (service-rules §4 "Balance", in order): the term's
 * sales statement joins the balance (opened if the owner had none; merged into a deferred one) and
 * moves the deferral deadline, then its service-fee and misc statements join it (one
 * `balance.merged` for all of them); then decideBalanceAtClose: claim and transfer take the term's
 * due date, a transfer adds the `transfer_fee` statement, a forfeit adds the `forfeit` statement
 * (none when net is 0) and closes the balance at once; a deferral leaves it collecting.
 */
export function closeOwnerBalance(input: OwnerCloseInput): BalanceTransition {
  const isNew = input.balance === null;
  let balance: BalanceState = input.balance ?? NEW_BALANCE;
  const statements: { type: 'sales' | TermStatementType | 'transfer_fee' | 'forfeit'; net: number }[] = [];
  const events: { type: BalanceEventType; balance: BalanceState; atClose: boolean }[] = [];
  if (isNew) events.push({ type: 'balance.created', balance, atClose: true });
  if (input.salesNet !== null) {
    statements.push({ type: 'sales', net: input.salesNet });
    balance = { ...balance, net: balance.net + input.salesNet, deadline: deferralDeadline(input.closeAt, balance.deadline) };
  }
  for (const other of input.otherStatements ?? []) {
    statements.push({ type: other.type, net: assertYen(other.net, `${other.type} net`) });
    balance = { ...balance, net: balance.net + other.net };
  }
  const joined = statements.length > 0;
  if (joined && !isNew) events.push({ type: 'balance.merged', balance, atClose: false });
  const decision = decideBalanceAtClose({ net: balance.net, minimum: input.minimum, deadline: balance.deadline, closeAt: input.closeAt });
  switch (decision.outcome) {
    case 'defer':
      return { decision, statements, changed: joined || isNew, events, after: balance };
    case 'claim':
      balance = { ...balance, state: 'claim', dueDate: input.due.date, dueAt: input.due.at };
      break;
    case 'transfer':
      statements.push({ type: 'transfer_fee', net: decision.transferFeeStatementNet });
      balance = { ...balance, net: balance.net + decision.transferFeeStatementNet, state: 'transfer', dueDate: input.due.date, dueAt: input.due.at };
      break;
    case 'forfeit':
      if (decision.forfeitStatementNet !== null) {
        statements.push({ type: 'forfeit', net: decision.forfeitStatementNet });
        balance = { ...balance, net: balance.net + decision.forfeitStatementNet };
      }
      balance = { ...balance, state: 'transfer', closed: true, closedDate: jstDate(decision.closedAt) };
      break;
  }
  events.push({ type: 'balance.fixed', balance, atClose: true });
  if (decision.outcome === 'forfeit') events.push({ type: 'balance.closed', balance, atClose: true });
  return { decision, statements, changed: true, events, after: balance };
}

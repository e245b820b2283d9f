/**
 * The shapes of a simulation report's summary: what report.ts computes and report-cells.ts,
 * report-charts.ts and report-html.ts render. Apart from report.ts so that the renderers need not
 * import the module that imports them.
 */
import type { MonthEndFigures } from './business-figures';

/** The money of one JST month, from the simulated rows. */
export interface MonthMoney {
  month: string;
  charges: number;
  captured_charges: number;
  captured_yen: number;
  failed_charges: number;
  failed_renewals: number;
  refunds: number;
  refunded_yen: number;
  fees_yen: number;
  /** Platform fees of the charges captured in the month (platform mode). */
  platform_fees_yen: number;
  /** The merchant accounts' own paid plans of the service billed for the month (`service_fee` statements). */
  service_fees_yen: number;
  /** Operator adjustments booked in the month, signed (positive: paid to the owner; `misc` statements). */
  adjustments_yen: number;
  /** Failed renewal charges of the month by failure code. */
  failed_renewals_by_reason: Record<string, number>;
  /**
   * Money that left for each owner (merchant account, tenant, platform) in balances closed in
   * the month with a payout date, by their closing date: transfers positive, collected claims
   * negative (a forfeited balance is in forfeited_by_owner).
   */
  paid_out_by_owner: Record<string, number>;
}

/** A month of the summary: its money and what stood at its end (see MonthEndFigures). */
export type MonthSummary = MonthMoney & MonthEndFigures;

export interface Summary {
  scenario: string | null;
  from: string;
  to: string;
  seed: number;
  steps: number;
  failed_steps: number;
  job_runs: number;
  months: MonthSummary[];
  totals: Omit<MonthSummary, 'month'>;
}

export interface DayPoint {
  readonly day: string;
  captured_yen: number;
  failures: number;
}

export interface DiffRow {
  readonly month: string;
  readonly metric: string;
  readonly baseline: number;
  readonly variant: number;
  readonly delta: number;
}

/**
 * Cells shared by the summary's text tables (report.ts) and report.html (report-html.ts), apart
 * from both so that neither imports the other's values (no import cycle).
 */
import type { MonthSummary } from './report-summary';

export const yen = (n: number) => n.toLocaleString('en-US');

/** The subscriber columns of a month's row, in the tables' order: MRR ¥, active, trial, paused, canceled, new, churned, recovered. */
export function subscriberCells(m: MonthSummary): string[] {
  const { subscriptions: s } = m;
  return [m.mrr_yen, s.active, s.trial, s.paused, s.canceled, m.new_subscriptions, m.churned_subscriptions, m.recovered_subscriptions].map(yen);
}

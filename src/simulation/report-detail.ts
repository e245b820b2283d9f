/**
 * How much of the simulated world report.json lists (`kessai simulate --detail`). Every level
 * writes the same summary (months, totals, chart series), statements.csv and report.json's
 * header, steps, job runs, service fees, adjustments, terms, statements and balances: what an
 * analyst reads, none of it proportional to the book.
 * - `summary`: that alone;
 * - `charges` (the command's default): also every subscription and its changes, charge (and
 *   charges.csv) and refund;
 * - `full`: also every event and webhook delivery: the report as the golden replays pin it.
 *
 * Its own module: the command's option parser reads it without loading the report writer.
 */
export type ReportDetail = 'summary' | 'charges' | 'full';
export const REPORT_DETAILS: readonly ReportDetail[] = ['summary', 'charges', 'full'];

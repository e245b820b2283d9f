/**
 * report.html: the summary a reader would rather look at than read. One
 * self-contained file: the charts inlined as SVG, the tables as HTML, the styles inline, and a
 * Content-Security-Policy that allows no fetch at all, so it opens offline from the folder and
 * never calls out.
 */
import { formatJst } from '../domain/time';
import type { Chart } from './report-charts';
import type { DiffRow, Summary } from './report-summary';
import { subscriberCells, yen } from './report-cells';

const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const byName = (record: Record<string, number>) =>
  Object.entries(record)
    .map(([name, n]) => `${escape(name)} ${yen(n)}`)
    .join('; ') || '–';

/** An HTML table; with `total`, its last row is the total row (bold). */
function table(head: readonly string[], rows: readonly string[][], total = false): string {
  const row = (cells: readonly string[], i: number) => `<tr${total && i === rows.length - 1 ? ' class="total"' : ''}>${cells.map((cell) => `<td>${cell}</td>`).join('')}</tr>`;
  return `<table><thead><tr>${head.map((h) => `<th>${escape(h)}</th>`).join('')}</tr></thead><tbody>${rows.map(row).join('')}</tbody></table>`;
}

function monthTable(summary: Summary): string {
  const all = [...summary.months, { ...summary.totals, month: 'total' }];
  return table(
    ['Month', 'MRR ¥', 'Active', 'Trial', 'Paused', 'Canceled', 'New', 'Churned', 'Recovered', 'Captured ¥', 'Failed renewals', 'Refunded ¥', 'Fees ¥', 'Platform fees ¥', 'Plan fees ¥', 'Adjustments ¥', 'Paid out ¥', 'Carried ¥', 'Forfeited ¥'],
    all.map((m) => [
      escape(m.month),
      ...subscriberCells(m),
      yen(m.captured_yen),
      `${yen(m.failed_renewals)}${m.failed_renewals > 0 ? ` (${byName(m.failed_renewals_by_reason)})` : ''}`,
      yen(m.refunded_yen),
      yen(m.fees_yen),
      yen(m.platform_fees_yen),
      yen(m.service_fees_yen),
      yen(m.adjustments_yen),
      byName(m.paid_out_by_owner),
      byName(m.carried_by_owner),
      byName(m.forfeited_by_owner),
    ]),
    true,
  );
}

function diffTable(rows: readonly DiffRow[]): string {
  const changed = rows.filter((row) => row.delta !== 0);
  if (changed.length === 0) return '<p>No difference from the baseline.</p>';
  return table(
    ['Month', 'Figure', 'Baseline', 'What-if', 'Change'],
    changed.map((row) => [escape(row.month), escape(row.metric), yen(row.baseline), yen(row.variant), `${row.delta > 0 ? '+' : ''}${yen(row.delta)}`]),
  );
}

export interface HtmlReport {
  readonly title: string;
  readonly summary: Summary;
  readonly charts: readonly Chart[];
  readonly whatIf?: { readonly overlay: string; readonly variant: Summary; readonly diff: readonly DiffRow[] };
}

export function renderReportHtml(report: HtmlReport): string {
  const { summary } = report;
  const range = `${formatJst(new Date(summary.from))} → ${formatJst(new Date(summary.to))} (exclusive), seed ${summary.seed}`;
  const figures = report.charts.map((chart) => `<figure id="${escape(chart.name)}"><figcaption>${escape(chart.title)}</figcaption>${chart.svg}</figure>`).join('\n');
  const whatIf = report.whatIf
    ? `<h2>What-if "${escape(report.whatIf.overlay)}" against the baseline</h2>${diffTable(report.whatIf.diff)}<h2>What-if "${escape(report.whatIf.overlay)}" by month</h2>${monthTable(report.whatIf.variant)}`
    : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(report.title)}: kessai simulation</title>
<style>
body { font-family: sans-serif; margin: 2rem; color: #222; max-width: 1200px; }
h1 { font-size: 1.5rem; margin-bottom: 0.2rem; }
.range { color: #555; margin-top: 0; }
figure { margin: 1.5rem 0; }
figcaption { font-weight: bold; margin-bottom: 0.4rem; }
table { border-collapse: collapse; font-size: 0.8rem; margin: 0.5rem 0 1.5rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.4rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.total td { font-weight: bold; }
</style>
</head>
<body>
<h1>${escape(report.title)}</h1>
<p class="range">${escape(range)} · ${yen(summary.steps)} steps (${yen(summary.failed_steps)} failed), ${yen(summary.job_runs)} job runs</p>
${figures}
<h2>By month (JST)</h2>
${monthTable(summary)}
<p>Month-end figures (MRR, subscribers, carried balances) in the total row are those at the end of the range.</p>
${whatIf}
</body>
</html>
`;
}

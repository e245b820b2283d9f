/**
 * The simulation's charts: Vega-Lite specifications compiled to Vega and
 * rendered to SVG in this process (a headless Vega view, no canvas, no browser), so report.html
 * can inline them and open offline, and the same SVGs are kept as files for documents. Axes
 * carry titles with their units; days and months are JST calendar dates drawn on UTC scales (a
 * JST date `2027-01-01` is plotted as that date whatever the machine's zone).
 */
import * as vega from 'vega';
import type { TopLevelSpec } from 'vega-lite';
import { compile } from 'vega-lite';
import { jstDate, MS_PER_DAY } from '../domain/time';
import type { DayPoint, Summary } from './report-summary';

export interface Chart {
  /** File name stem under charts/ and the figure's id in report.html. */
  readonly name: string;
  readonly title: string;
  readonly svg: string;
}

const WIDTH = 720;
const HEIGHT = 220;
const DAY_AXIS = { title: 'Day (JST)', format: '%Y-%m-%d' };

/** Every JST day of [from, to), with the days without captures or failures as zeros. */
export function everyDay(days: readonly DayPoint[], from: Date, to: Date): DayPoint[] {
  const byDay = new Map(days.map((d) => [d.day, d]));
  const all: DayPoint[] = [];
  for (let at = from.getTime(); at < to.getTime(); at += MS_PER_DAY) {
    const day = jstDate(new Date(at));
    if (all.at(-1)?.day === day) continue;
    all.push(byDay.get(day) ?? { day, captured_yen: 0, failures: 0 });
  }
  return all;
}

async function render(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

const base = { $schema: 'https://vega.github.io/schema/vega-lite/v6.json', config: { font: 'sans-serif', view: { stroke: null } } } as const;

/** MRR (bars, ¥) and active subscribers (line, count) by month, each on its own axis. */
function mrrSpec(summary: Summary): TopLevelSpec {
  const values = summary.months.map((m) => ({ month: m.month, mrr: m.mrr_yen, active: m.subscriptions.active }));
  return {
    ...base,
    width: WIDTH,
    height: HEIGHT,
    data: { values },
    encoding: { x: { field: 'month', type: 'ordinal', axis: { title: 'Month (JST, at its end)', labelAngle: 0 } } },
    layer: [
      { mark: { type: 'bar', color: '#4477aa', opacity: 0.8 }, encoding: { y: { field: 'mrr', type: 'quantitative', axis: { title: 'MRR at month end (¥)', titleColor: '#4477aa' } } } },
      {
        mark: { type: 'line', color: '#ee7733', point: true },
        encoding: { y: { field: 'active', type: 'quantitative', axis: { title: 'Active subscribers (count)', titleColor: '#ee7733', orient: 'right' } } },
      },
    ],
    resolve: { scale: { y: 'independent' } },
  };
}

/** Daily captured yen (bars) above daily failed charges (bars), on one true time axis. */
function dailySpec(days: readonly DayPoint[]): TopLevelSpec {
  const values = days.map((d) => ({ day: d.day, captured: d.captured_yen, failures: d.failures }));
  const x = { field: 'day', type: 'temporal' as const, scale: { type: 'utc' as const }, axis: DAY_AXIS };
  return {
    ...base,
    data: { values },
    vconcat: [
      { width: WIDTH, height: HEIGHT, mark: { type: 'bar', color: '#4477aa' }, encoding: { x, y: { field: 'captured', type: 'quantitative', axis: { title: 'Captured (¥ a day)' } } } },
      { width: WIDTH, height: 90, mark: { type: 'bar', color: '#cc3311' }, encoding: { x, y: { field: 'failures', type: 'quantitative', scale: { domainMin: 0, domainMax: Math.max(1, ...values.map((v) => v.failures)) }, axis: { title: 'Failed charges (count a day)', tickMinStep: 1, format: 'd' } } } },
    ],
  };
}

/** Bars by month, side by side per group, each group its colour. */
function groupedBars(values: readonly Record<string, unknown>[], months: readonly string[], axes: { x: string; y: string; legend: string }, group: { field: string; sort?: string[] }, y: Record<string, unknown>): TopLevelSpec {
  return {
    ...base,
    width: WIDTH,
    height: HEIGHT,
    data: { values: values as Record<string, unknown>[] },
    mark: 'bar',
    encoding: {
      x: { field: 'month', type: 'ordinal', scale: { domain: [...months] }, axis: { title: axes.x, labelAngle: 0 } },
      xOffset: { field: group.field, ...(group.sort ? { sort: group.sort } : {}) },
      y: { type: 'quantitative', ...y, axis: { title: axes.y, ...(y.axis as object | undefined) } } as never,
      color: { field: group.field, type: 'nominal', ...(group.sort ? { sort: group.sort } : {}), legend: { title: axes.legend } },
    },
  };
}

/** Holds by month: authorized, captured, released at expiry, reauthorized. */
function holdsSpec(summary: Summary): TopLevelSpec {
  const kinds = { authorized: 'authorized', captured: 'captured', released_at_expiry: 'released at expiry', reauthorized: 'reauthorized' } as const;
  const values = summary.months.flatMap((m) => Object.entries(kinds).map(([key, label]) => ({ month: m.month, kind: label, count: m.holds[key as keyof typeof kinds] })));
  // A month without holds still gets a readable axis (0 to 1, whole numbers).
  const y = { field: 'count', scale: { domainMin: 0, domainMax: Math.max(1, ...values.map((v) => v.count)) }, axis: { tickMinStep: 1, format: 'd' } };
  return groupedBars(values, summary.months.map((m) => m.month), { x: 'Month (JST)', y: 'Holds (count)', legend: 'Holds' }, { field: 'kind', sort: Object.values(kinds) }, y);
}

/** Paid out by owner and month (balances closed with a payout date). */
function payoutsSpec(summary: Summary): TopLevelSpec {
  const values = summary.months.flatMap((m) => Object.entries(m.paid_out_by_owner).map(([owner, yen]) => ({ month: m.month, owner, yen })));
  return groupedBars(values, summary.months.map((m) => m.month), { x: 'Month of payout (JST)', y: 'Paid out (¥)', legend: 'Owner' }, { field: 'owner' }, { field: 'yen' });
}

/** Baseline and variant on the same axes: MRR and captured yen by month. */
function whatIfSpec(baseline: Summary, variant: Summary, overlay: string): TopLevelSpec {
  const series = (summary: Summary, name: string) => summary.months.map((m) => ({ month: m.month, series: name, mrr: m.mrr_yen, captured: m.captured_yen }));
  const names = ['baseline', `what-if: ${overlay}`];
  const values = [...series(baseline, names[0]!), ...series(variant, names[1]!)];
  const x = { field: 'month', type: 'ordinal' as const, axis: { title: 'Month (JST)', labelAngle: 0 } };
  // The what-if dashed over the solid baseline: where they agree, both stay visible.
  const color = { field: 'series', type: 'nominal' as const, sort: names, legend: { title: 'Run', orient: 'bottom' as const, labelLimit: 600 } };
  const strokeDash = { field: 'series', type: 'nominal' as const, sort: names, scale: { domain: names, range: [[1, 0], [6, 4]] }, legend: null };
  return {
    ...base,
    data: { values },
    vconcat: [
      { width: WIDTH, height: HEIGHT, mark: { type: 'line', point: true, strokeWidth: 2 }, encoding: { x, color, strokeDash, y: { field: 'mrr', type: 'quantitative', axis: { title: 'MRR at month end (¥)' } } } },
      { width: WIDTH, height: HEIGHT, mark: { type: 'line', point: true, strokeWidth: 2 }, encoding: { x, color, strokeDash, y: { field: 'captured', type: 'quantitative', axis: { title: 'Captured (¥ a month)' } } } },
    ],
  };
}

/** The report's charts, rendered to SVG; the what-if chart only with a variant. */
export async function renderCharts(summary: Summary, days: readonly DayPoint[], range: { from: Date; to: Date }, whatIf?: { overlay: string; variant: Summary }): Promise<Chart[]> {
  const charts: Chart[] = [
    { name: 'mrr-subscribers', title: 'MRR and active subscribers at month end', svg: await render(mrrSpec(summary)) },
    { name: 'daily-captures', title: 'Captured yen and failed charges, day by day', svg: await render(dailySpec(everyDay(days, range.from, range.to))) },
    { name: 'holds', title: 'Holds by month', svg: await render(holdsSpec(summary)) },
    { name: 'payouts', title: 'Paid out by owner', svg: await render(payoutsSpec(summary)) },
  ];
  if (whatIf) charts.push({ name: 'what-if', title: `Baseline and what-if "${whatIf.overlay}"`, svg: await render(whatIfSpec(summary, whatIf.variant, whatIf.overlay)) });
  return charts;
}

/**
 * report.html in a real browser: Debian's Chromium driven by playwright-core
 * opens the file a what-if run wrote, offline; the page must load with no console error and no
 * request but the file itself, every chart must carry its axes' titles, and a screenshot is kept
 * under test-output/ for review.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { launchChromium, watchedPage } from '../support/chromium';

const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));
const OUTPUT = fileURLToPath(new URL('../../test-output/', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'kessai-report-html-'));

const card = { number: '4242424242424242', exp_month: 12, exp_year: 2032 };
const declining = { number: '4000000000001026', exp_month: 12, exp_year: 2032 };
const baseline = {
  name: 'Report page',
  accounts: [{ id: 'acct_shop', fee_rates: { Visa: '3.00' } }],
  plans: [
    { ref: 'monthly', params: { amount: 1000, currency: 'jpy', interval: 'month' } },
    { ref: 'yearly', params: { amount: 10000, currency: 'jpy', interval: 'year' } },
  ],
  customers: [
    { ref: 'a', card },
    { ref: 'b', card: declining },
  ],
  generators: [{ generate: 'subscribers', ref: 'gen', count: 12, plan: '$monthly', from: '2027-01-02', to: '2027-02-20' }],
  timeline: [
    { at: '2027-01-10T10:00', op: 'subscriptions.create', params: { customer: '$a', plan: '$yearly' } },
    { at: '2027-01-10T10:00', op: 'subscriptions.create', params: { customer: '$b', plan: '$monthly' } },
  ],
};
const overlay = { name: 'Visa 2 % from March', accounts: [{ id: 'acct_shop', from: '2027-03-01', fee_rates: { Visa: '2.00' } }] };

describe('report.html in Chromium', () => {
  it('loads offline with no console error and no network request; every chart has its axes\' titles; the daily chart has a bar for every day, evenly spaced; a screenshot is kept', async () => {
    writeFileSync(join(scratch, 'baseline.json'), JSON.stringify(baseline));
    writeFileSync(join(scratch, 'overlay.json'), JSON.stringify(overlay));
    const out = join(scratch, 'sim-out');
    const { DATABASE_URL: _ignored, ...env } = process.env;
    const run = spawnSync(
      process.execPath,
      [BIN, 'simulate', '--scenario', join(scratch, 'baseline.json'), '--what-if', join(scratch, 'overlay.json'), '--from', '2027-01-01', '--to', '2027-05-01', '--out', out],
      { env, encoding: 'utf8', timeout: 120_000 },
    );
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toContain('report.html');
    // Vega's warnings would go to stdout: none.
    expect(run.stdout).not.toMatch(/WARN/);
    for (const name of ['mrr-subscribers', 'daily-captures', 'holds', 'payouts', 'what-if']) expect(existsSync(join(out, 'charts', `${name}.svg`)), name).toBe(true);

    const browser = await launchChromium();
    try {
      const { page, problems, requests } = await watchedPage(browser, { width: 1280, height: 900 });
      const url = pathToFileURL(join(out, 'report.html')).href;
      await page.goto(url, { waitUntil: 'load' });
      expect(problems).toEqual([]);
      expect(requests).toEqual([url]);

      const charts = await page.$$eval('figure', (figures) =>
        figures.map((figure) => ({
          id: figure.id,
          caption: figure.querySelector('figcaption')?.textContent ?? '',
          axisTitles: [...figure.querySelectorAll('svg .role-axis-title text')].map((text) => text.textContent ?? ''),
          // Axes with labels (a grid is drawn as an axis of its own, without labels or title),
          // each with the text of its title.
          axes: [...figure.querySelectorAll('svg g.role-axis')]
            .filter((axis) => axis.querySelector('.role-axis-label') !== null)
            .map((axis) => axis.querySelector('.role-axis-title text')?.textContent ?? ''),
        })),
      );
      expect(charts.map((chart) => chart.id)).toEqual(['mrr-subscribers', 'daily-captures', 'holds', 'payouts', 'what-if']);
      for (const chart of charts) {
        // Every axis drawn has a title, and there is at least an x and a y axis.
        expect(chart.axes.length, chart.id).toBeGreaterThanOrEqual(2);
        expect(chart.axes.filter((title) => title.trim() === ''), chart.id).toEqual([]);
      }
      const titles = charts.flatMap((chart) => chart.axisTitles);
      expect(titles).toEqual(expect.arrayContaining(['MRR at month end (¥)', 'Active subscribers (count)', 'Day (JST)', 'Captured (¥ a day)', 'Failed charges (count a day)', 'Holds (count)', 'Paid out (¥)']));
      expect(await page.textContent('body')).toContain('What-if "Visa 2 % from March" against the baseline');

      // The daily chart is on a true time axis: every day of the range (2027-01-01 to 2027-04-30, 120
      // days) is a bar in each panel, captures or not, and the bars are evenly spaced.
      const panels = await page.$$eval('figure#daily-captures svg g.mark-rect', (groups) =>
        groups.map((group) => [...group.querySelectorAll('path')].map((path) => Number(/^M\s*(-?[\d.]+)/.exec(path.getAttribute('d') ?? '')?.[1]))),
      );
      expect(panels.map((xs) => xs.length)).toEqual([120, 120]);
      for (const xs of panels) {
        const gaps = xs.slice(1).map((x, i) => x - xs[i]!);
        expect(Math.max(...gaps) - Math.min(...gaps)).toBeLessThan(0.01);
        expect(Math.min(...gaps)).toBeGreaterThan(0);
      }

      const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as { what_if: string; diff: { metric: string; delta: number }[] };
      expect(summary.what_if).toBe('Visa 2 % from March');
      expect(summary.diff.some((row) => row.metric === 'fees_yen' && row.delta < 0)).toBe(true);

      mkdirSync(OUTPUT, { recursive: true });
      await page.screenshot({ path: join(OUTPUT, 'report-html.png'), fullPage: true });
      expect(existsSync(join(OUTPUT, 'report-html.png'))).toBe(true);
    } finally {
      await browser.close();
    }
  }, 180_000);
});

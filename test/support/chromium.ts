/**
 * The browser of the browser tests: Debian's Chromium (/usr/bin/chromium, never downloaded) driven
 * by playwright-core, headless, and a page that records what it logs as errors or warnings and
 * every address it asks for, so a test can require no console error and no third-party request.
 */
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

export interface WatchedPage {
  readonly context: BrowserContext;
  readonly page: Page;
  /** Console errors and warnings, and uncaught page errors. */
  readonly problems: string[];
  /** Every request's URL, in order. */
  readonly requests: string[];
}

/** A new page in a context of its own, watched. */
export async function watchedPage(browser: Browser, viewport: { readonly width: number; readonly height: number }): Promise<WatchedPage> {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const problems: string[] = [];
  const requests: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') problems.push(`${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
  page.on('request', (request) => requests.push(request.url()));
  return { context, page, problems, requests };
}

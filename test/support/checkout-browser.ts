/**
 * The harness of the hosted checkout browser tests (test/browser/checkout-*.test.ts): the real
 * server (startTestServer) with a v2 SDK client on account a's test secret key, a shop of the
 * test's own on a local HTTP server, Debian's Chromium, and a watched page per test that may ask
 * nothing of any origin but kessai's and the shop's (checked after each test).
 */
import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Client } from '@payjp/payjpv2';
import type { Browser, Page } from 'playwright-core';
import { TEST_CARDS, type TestCardName } from '../../src/processor/test-cards';
import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import { launchChromium, watchedPage } from './chromium';
import { startTestServer, type TestServer } from './http-server';
import { v2Client } from './v2-sdk';

export interface Shop {
  readonly server: Server;
  readonly url: string;
}

/** The shop: every address answers a page naming its path; /merchant and /return load kessai.js. */
function startShop(kessaiUrl: () => string): Promise<Shop> {
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://shop.invalid');
    response.setHeader('content-type', 'text/html; charset=utf-8');
    if (url.pathname === '/favicon.ico') {
      response.statusCode = 204;
      response.end();
      return;
    }
    const script = url.pathname === '/merchant' || url.pathname === '/return' ? `<script src="${kessaiUrl()}/v2/js/kessai.js"></script>` : '';
    response.end(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Shop ${url.pathname}</title></head><body><h1 id="path">${url.pathname}</h1>${script}</body></html>`);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })));
}

export interface CheckoutBrowser {
  readonly server: TestServer;
  readonly client: Client;
  readonly shop: Shop;
  readonly page: Page;
  readonly problems: string[];
  readonly requests: string[];
}

/**
 * Registers the suite's hooks (call inside `describe`, before the suite's own `beforeEach`) and
 * returns what the current test reads; screenshots go under `output`.
 */
export function checkoutBrowserSuite(options: { readonly output: string; readonly viewport: { readonly width: number; readonly height: number } }): { current(): CheckoutBrowser; shot(name: string): Promise<Buffer> } {
  let suite: Omit<CheckoutBrowser, 'page' | 'problems' | 'requests'> & { readonly browser: Browser };
  let current: CheckoutBrowser;
  beforeAll(async () => {
    const server = await startTestServer('harness');
    suite = { server, client: v2Client(server, server.keys.a.test.secret), shop: await startShop(() => server.baseUrl), browser: await launchChromium() };
    mkdirSync(options.output, { recursive: true });
  }, 120_000);
  afterAll(async () => {
    await suite?.browser.close();
    await new Promise((resolve) => suite?.shop.server.close(resolve));
    await suite?.server.close();
  });
  beforeEach(async () => {
    const { context, page, problems, requests } = await watchedPage(suite.browser, options.viewport);
    current = { server: suite.server, client: suite.client, shop: suite.shop, page, problems, requests };
    return async () => {
      // Nothing but kessai and the shop was asked for anything.
      expect(requests.filter((url) => !url.startsWith(suite.server.baseUrl) && !url.startsWith(suite.shop.url))).toEqual([]);
      await context.close();
    };
  });
  return { current: () => current, shot: (name) => current.page.screenshot({ path: join(options.output, `${name}.png`), fullPage: true }) };
}

/** Fills the hosted page's card form by its labels with a test card (12/2032, CVC 123). */
export async function fillCard(page: Page, card: TestCardName): Promise<void> {
  await page.getByLabel('カード番号 / Card number').fill(TEST_CARDS[card].number);
  await page.getByLabel('有効期限 月 / Expiry month').fill('12');
  await page.getByLabel('有効期限 年 / Expiry year').fill('2032');
  await page.getByLabel('セキュリティコード / Security code').fill('123');
}

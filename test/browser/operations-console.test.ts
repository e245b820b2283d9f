/**
 * The operations console in a real browser: Debian's Chromium (playwright-core, headless) against
 * the real server with its operator surfaces. The operator logs in with the token, sees the
 * overview, re-runs an abandoned slot and re-sends a given-up webhook delivery from the pages, and
 * sees the state change; the receiver gets the re-sent event once. No page logs a console error
 * (a Content-Security-Policy violation is one) and no request leaves for a third party. A
 * screenshot of every page is kept under test-output/operations-console/.
 */
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { checkoutSessionExpiryJob } from '../../jobs/checkout-session-expiry';
import { Scheduler } from '../../src/engine/scheduler';
import { deliverDueWebhooks, MAX_WEBHOOK_ATTEMPTS, WEBHOOK_RETRY_DELAY_MS } from '../../src/webhooks/delivery';
import { addEndpoint } from '../../src/webhooks/endpoints';
import { launchChromium, watchedPage } from '../support/chromium';
import { startTestServer, type TestServer } from '../support/http-server';
import { answer, startReceiver, type Receiver } from '../support/webhook-receiver';

const OUTPUT = fileURLToPath(new URL('../../test-output/operations-console/', import.meta.url));
const OPERATOR = { name: 'console-bob', token: 'kop_console_test_token_0123456789' };

let server: TestServer;
let receiver: Receiver;
let browser: Browser;
beforeAll(async () => {
  mkdirSync(OUTPUT, { recursive: true });
  server = await startTestServer('harness', { operatorTokens: [OPERATOR], config: { maxAttempts: 1 } });
  receiver = await startReceiver(answer(500, 'down'));
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await server?.close();
});

it('log in, see the overview, re-run an abandoned slot and re-send a given-up delivery from the pages', async () => {
  // An abandoned slot (its table away at its one allowed attempt) and a given-up delivery.
  const slot = server.ctx.clock.now();
  await sql`ALTER TABLE checkout_sessions RENAME TO checkout_sessions_away`.execute(server.ctx.db);
  try {
    const [outcome] = await new Scheduler(server.ctx, [checkoutSessionExpiryJob], { owner: 'test-worker' }).tick();
    expect(outcome?.status).toBe('abandoned');
  } finally {
    await sql`ALTER TABLE checkout_sessions_away RENAME TO checkout_sessions`.execute(server.ctx.db);
  }
  const { endpoint } = await addEndpoint(server.ctx, { accountId: 'acct_http_a', url: `${receiver.url}/hook`, apiVersion: 'v1' });
  const customer = await server.sdk(server.keys.a.test.secret).customers.create({ email: 'console@example.com' });
  for (let attempt = 1; attempt <= MAX_WEBHOOK_ATTEMPTS; attempt += 1) {
    await deliverDueWebhooks(server.ctx, { owner: 'test-pass' });
    server.ctx.clock.advance(WEBHOOK_RETRY_DELAY_MS);
  }
  const sent = () => receiver.received.filter((r) => r.body.includes(customer.id)).length;
  expect(sent()).toBe(MAX_WEBHOOK_ATTEMPTS);
  receiver.respond = answer(200, 'ok');

  const { context, page, problems, requests } = await watchedPage(browser, { width: 1280, height: 900 });
  const shot = (name: string) => page.screenshot({ path: `${OUTPUT}${name}.png`, fullPage: true });
  try {
    await page.goto(`${server.baseUrl}/console`);
    expect(page.url()).toBe(`${server.baseUrl}/console/login`);
    await shot('01-login');
    // A wrong token is refused.
    await page.getByLabel('Operator token').fill('kop_not_it_000000000000000000');
    await page.getByRole('button', { name: 'Log in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('not an operator token');
    await page.goto(`${server.baseUrl}/console/login`);
    // Keyboard only: the token field, then Enter on the button.
    await page.getByLabel('Operator token').fill(OPERATOR.token);
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.waitForURL(`${server.baseUrl}/console`);
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Overview');
    expect(await page.textContent('header')).toContain('operator: console-bob');
    const jobRow = page.getByRole('row', { name: /checkout_sessions\.expire/ });
    expect(await jobRow.textContent()).toContain('abandoned');
    expect(await jobRow.textContent()).toMatch(/\+09:00/);
    expect(await page.getByRole('row', { name: new RegExp(`${receiver.url}/hook`) }).textContent()).toMatch(/disabled|enabled/);
    await shot('02-overview');

    // Re-run the abandoned slot from the job ledger.
    await page.getByRole('link', { name: 'Job ledger' }).click();
    await page.getByRole('link', { name: 'abandoned' }).click();
    await shot('03-abandoned-slots');
    await page.getByRole('button', { name: /^Re-run checkout_sessions\.expire at / }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('checkout_sessions.expire');
    expect(await page.getByRole('status').textContent()).toContain('succeeded');
    expect(await page.getByRole('row', { name: new RegExp(`checkout_sessions\\.expire`) }).first().textContent()).toContain('succeeded');
    await shot('04-slot-re-run');
    const row = await server.ctx.db.selectFrom('job_runs').select('status').where('job', '=', 'checkout_sessions.expire').where('slot', '=', slot).executeTakeFirstOrThrow();
    expect(row.status).toBe('succeeded');

    // Re-send the given-up delivery from the endpoint's page.
    await page.getByRole('link', { name: 'Accounts' }).click();
    await shot('05-accounts');
    await page.getByRole('link', { name: 'acct_http_a' }).click();
    await shot('06-account');
    await page.getByRole('link', { name: `${receiver.url}/hook` }).click();
    const deliveryRow = page.getByRole('row', { name: /customer\.created/ });
    expect(await deliveryRow.textContent()).toContain('given up');
    await shot('07-deliveries-given-up');
    await deliveryRow.getByRole('button', { name: /^Re-send evnt_/ }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('1 delivery(ies) queued');
    // The same form posted again (a retry): nothing more is queued.
    await page.goBack();
    await page.goBack();
    await deliverDueWebhooks(server.ctx, { owner: 'test-pass' });
    expect(sent()).toBe(MAX_WEBHOOK_ATTEMPTS + 1);
    await page.goto(`${server.baseUrl}/console/accounts/acct_http_a/endpoints/${endpoint.id}`);
    expect(await page.getByRole('row', { name: /customer\.created/ }).textContent()).toContain('delivered');
    await shot('08-delivery-re-sent');
    await deliverDueWebhooks(server.ctx, { owner: 'test-pass' });
    expect(sent()).toBe(MAX_WEBHOOK_ATTEMPTS + 1);

    // Without the session cookie nothing changes hands: log out, then the pages ask for the token.
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(`${server.baseUrl}/console/login`);
    await page.goto(`${server.baseUrl}/console/jobs`);
    expect(page.url()).toBe(`${server.baseUrl}/console/login`);
  } finally {
    await context.close();
  }
  expect(problems).toEqual([]);
  expect(requests.filter((url) => !url.startsWith(server.baseUrl))).toEqual([]);
}, 120_000);

/**
 * The operations console in a real browser: Debian's Chromium (playwright-core, headless) against
 * the real server with its operator surfaces. The operator logs in with the token, sees the
 * overview, re-runs an abandoned slot and re-sends a given-up webhook delivery from the pages, and
 * sees the state change; the receiver gets the re-sent event once. Then the forms: an account
 * created, a key created and revoked, a webhook endpoint added, an adjustment booked by keyboard
 * only (booked once when posted again, a bad amount refused); the account's recent events with
 * their JSON; its terms, statements and balances, and a statement's CSV downloaded under the
 * console's CSP. Every control is labelled and reachable by keyboard. No page logs a console error
 * (a Content-Security-Policy violation is one) and no request leaves for a third party. A
 * screenshot of every page is kept under test-output/operations-console/.
 */
import { mkdirSync, readFileSync } from 'node:fs';
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
  /** Every control of the page is labelled and reachable by keyboard (no negative tabindex, nothing unnamed). */
  const expectLabelled = async () => {
    // Evaluated in the page (a string: the tests are compiled without the DOM's types).
    const unlabelled = await page.evaluate<string[]>(`[...document.querySelectorAll('input:not([type=hidden]), select, textarea, button, a[href], summary')]
      .filter((el) => !(((el.labels && el.labels.length > 0) || el.textContent.trim() !== '' || el.getAttribute('aria-label')) && el.tabIndex >= 0))
      .map((el) => el.outerHTML)`);
    expect(unlabelled).toEqual([]);
  };
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

    // Create an account from its form: the keys are shown once.
    await page.getByRole('link', { name: 'Accounts' }).click();
    await expectLabelled();
    await page.getByLabel('Merchant name').fill('Console Shop');
    await page.getByLabel('Account id (optional, acct_…)').fill('acct_console_shop');
    await page.getByLabel('Term cycle').selectOption('semi_monthly');
    await page.getByRole('button', { name: 'Create account' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('account acct_console_shop (Console Shop) created');
    expect(await page.getByRole('row', { name: /test secret/ }).textContent()).toMatch(/sk_test_\w+/);
    await shot('09-account-created');
    const created = await server.ctx.db.selectFrom('accounts').select(['name', 'term_cycle']).where('account_id', '=', 'acct_console_shop').executeTakeFirstOrThrow();
    expect(created).toEqual({ name: 'Console Shop', term_cycle: 'semi_monthly' });

    // On an account's page: create a public key, then revoke it; add an endpoint; book an adjustment.
    await page.goto(`${server.baseUrl}/console/accounts/acct_http_a`);
    await expectLabelled();
    await shot('10-account-forms');
    await page.getByLabel('Kind').selectOption('public');
    await page.getByRole('button', { name: 'Create key' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toMatch(/key pk_test_\w+… created/);
    const publicKey = (await page.locator('code.secret').textContent())!;
    expect(publicKey).toMatch(/^pk_test_\w+$/);
    await shot('11-key-created');
    await page.getByRole('link', { name: 'Account acct_http_a' }).click();
    await page.getByRole('button', { name: `Revoke key ${publicKey.slice(0, 12)}…` }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('revoked');
    const revoked = await server.ctx.db.selectFrom('api_keys').select('revoked_at').where('account_id', '=', 'acct_http_a').where('kind', '=', 'public').where('livemode', '=', false).orderBy('created_at', 'desc').executeTakeFirstOrThrow();
    expect(revoked.revoked_at).not.toBeNull();

    await page.getByLabel('Endpoint URL (https://…)').fill('https://hooks.console.example/kessai');
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('endpoint https://hooks.console.example/kessai added');
    expect(await page.locator('code.secret').textContent()).toMatch(/^whook_/);
    await page.getByRole('link', { name: 'Account acct_http_a' }).click();
    expect(await page.getByRole('row', { name: /hooks\.console\.example/ }).textContent()).toContain('enabled');

    // The adjustment form, by keyboard only: each field, then Enter on the button.
    const requestKey = await page.locator('form[action$="/adjustments"] input[name="request"]').getAttribute('value');
    await page.getByLabel(/^Amount in yen/).focus();
    await page.keyboard.type('-1500');
    await page.keyboard.press('Tab');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Tab');
    await page.keyboard.type('late fee waived back');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    expect(await page.evaluate<string | null>('document.activeElement && document.activeElement.textContent')).toBe('Book adjustment');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('status').textContent()).toMatch(/adjustment adj_\w+ of -1500 yen booked/);
    const adjustmentRow = page.getByRole('row', { name: /late fee waived back/ });
    expect(await adjustmentRow.textContent()).toContain('-1,500 yen');
    expect(await adjustmentRow.textContent()).toContain('other');
    expect(await adjustmentRow.textContent()).toMatch(/\+09:00/);
    await shot('12-adjustment-booked');
    // The same form posted again (a browser re-submitting it, with its page's request key): booked once.
    await page.getByLabel(/^Amount in yen/).fill('-1500');
    await page.getByLabel('Subject').selectOption('other');
    await page.getByLabel('Reason').fill('late fee waived back');
    await page.locator('form[action$="/adjustments"] input[name="request"]').evaluate((input, key) => input.setAttribute('value', key), requestKey!);
    await page.getByRole('button', { name: 'Book adjustment' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toMatch(/adjustment adj_\w+ of -1500 yen booked/);
    const booked = await server.ctx.db.selectFrom('adjustments').select(['amount', 'subject']).where('account_id', '=', 'acct_http_a').where('reason', '=', 'late fee waived back').execute();
    expect(booked).toEqual([{ amount: -1500, subject: 'other' }]);
    // A bad amount is refused, naming it.
    await page.goto(`${server.baseUrl}/console/accounts/acct_http_a`);
    await page.getByLabel(/^Amount in yen/).fill('0');
    await page.getByLabel('Reason').fill('nothing');
    await page.getByRole('button', { name: 'Book adjustment' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('invalid_amount (amount)');
    // The refusal is answered 400, which the browser logs as a failed load: that one is expected.
    const refusedLoad = problems.indexOf('error: Failed to load resource: the server responded with a status of 400 (Bad Request)');
    expect(refusedLoad).toBeGreaterThanOrEqual(0);
    problems.splice(refusedLoad, 1);

    // The account's recent events with their JSON.
    await page.goto(`${server.baseUrl}/console/accounts/acct_http_a`);
    await page.getByRole('link', { name: 'Recent events (test)' }).click();
    await expectLabelled();
    const eventRow = page.getByRole('row', { name: /customer\.created/ }).first();
    expect(await eventRow.textContent()).toMatch(/\+09:00/);
    await eventRow.locator('summary').focus();
    await page.keyboard.press('Enter');
    expect(await eventRow.locator('pre').isVisible()).toBe(true);
    expect(JSON.parse((await eventRow.locator('pre').textContent())!)).toMatchObject({ id: customer.id, object: 'customer', email: 'console@example.com' });
    await shot('13-events');

    // Close the term of the adjustment (the nightly statements now, a month on), then its statement downloads.
    server.ctx.clock.advance(40 * 24 * 60 * 60 * 1000);
    await page.goto(`${server.baseUrl}/console/jobs`);
    await page.getByRole('button', { name: 'Run the nightly statements now' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('balances.close');
    await page.goto(`${server.baseUrl}/console/accounts/acct_http_a/settlement?mode=test`);
    await expectLabelled();
    expect(await page.getByRole('row', { name: /closed/ }).first().textContent()).toMatch(/\+09:00/);
    const miscRow = page.getByRole('row', { name: /misc/ });
    expect(await miscRow.textContent()).toContain('-1,500 yen');
    expect(await page.getByRole('table', { name: 'Balances' }).textContent()).toContain('merchant');
    await shot('14-settlement');
    const [download] = await Promise.all([page.waitForEvent('download'), miscRow.getByRole('link', { name: /^Download st_\w+ \(CSV\)$/ }).click()]);
    expect(download.suggestedFilename()).toMatch(/^st_\w+\.csv$/);
    const csv = readFileSync((await download.path())!, 'utf8');
    expect(csv).toContain('type,misc');
    expect(csv).toContain('other,');
    expect(csv).toContain('-1500');

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
}, 600_000);

it('an account’s test clocks: created from the console, a customer subscribed on it, advanced by keyboard to its renewal, ready with the renewal charged; a backward advance refused; deleted by keyboard after typing its id, with its objects', async () => {
  const payjp = server.sdk(server.keys.a.test.secret);
  const { context, page, problems, requests } = await watchedPage(browser, { width: 1280, height: 900 });
  const shot = (name: string) => page.screenshot({ path: `${OUTPUT}${name}.png`, fullPage: true });
  try {
    await page.goto(`${server.baseUrl}/console/login`);
    await page.getByLabel('Operator token').fill(OPERATOR.token);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(`${server.baseUrl}/console`);
    await page.goto(`${server.baseUrl}/console/accounts/acct_http_a`);
    await page.getByRole('link', { name: 'Test clocks' }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Test clocks of acct_http_a');

    await page.getByLabel(/^Frozen time/).fill('2027-03-01');
    await page.getByLabel('Name (optional)').fill('console clock');
    await page.getByRole('button', { name: 'Create test clock' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toMatch(/^test clock clock_\w+ created at 2027-03-01 00:00/);
    const clockId = (await page.getByRole('status').textContent())!.match(/clock_\w+/)![0];
    const clockRow = () => page.getByRole('row', { name: new RegExp(clockId) }).textContent();
    expect(await clockRow()).toMatch(/console clock\s*ready\s*2027-03-01 00:00 \+09:00/);
    await shot('15-test-clocks');

    // A customer on the clock, subscribed to a monthly plan at the clock's instant: its first charge.
    const token = await payjp.tokens.create({ card: { number: '4242424242424242', exp_month: '12', exp_year: '2035', cvc: '123' } } as never, { 'X-Payjp-Direct-Token-Generate': 'true' });
    const customer = await payjp.customers.create({ card: token.id, test_clock: clockId } as never);
    const plan = await payjp.plans.create({ amount: 990, currency: 'jpy', interval: 'month' });
    await payjp.subscriptions.create({ customer: customer.id, plan: plan.id });
    const charges = async () => (await payjp.charges.list({ customer: customer.id } as never)).data.map((c) => c.created).sort();

    // The advance, by keyboard only: the clock's field, then Enter on its button. The subscription
    // made at 2027-02-28 15:00 UTC renews a calendar month later in UTC, 2027-03-28 15:00 UTC.
    await page.getByLabel(`Advance ${clockId} to (JST date or date-time, or an ISO instant)`).focus();
    await page.keyboard.type('2027-04-01');
    await page.keyboard.press('Tab');
    expect(await page.evaluate<string | null>('document.activeElement && document.activeElement.textContent')).toBe(`Advance ${clockId}`);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('status').textContent()).toBe(`test clock ${clockId} advancing to 2027-04-01 00:00 +09:00`);
    // The advance runs after the answer: reloaded until the clock is ready at its target.
    await expect
      .poll(async () => {
        await page.getByRole('link', { name: 'Reload' }).click();
        return clockRow();
      }, { timeout: 60_000 })
      .toMatch(/ready\s*2027-04-01 00:00 \+09:00/);
    expect(await charges()).toEqual([Date.parse('2027-02-28T15:00:00Z') / 1000, Date.parse('2027-03-28T15:00:00Z') / 1000]);
    await shot('16-test-clock-advanced');

    // Backwards is refused, naming the parameter.
    await page.getByLabel(`Advance ${clockId} to (JST date or date-time, or an ISO instant)`).fill('2027-03-15');
    await page.getByRole('button', { name: `Advance ${clockId}` }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('invalid_timestamp (frozen_time)');
    const refusedLoad = problems.indexOf('error: Failed to load resource: the server responded with a status of 400 (Bad Request)');
    expect(refusedLoad).toBeGreaterThanOrEqual(0);
    problems.splice(refusedLoad, 1);

    // Deleting, by keyboard only: the clock's link, a page that says what goes, the id typed back.
    await page.goto(`${server.baseUrl}/console/accounts/acct_http_a/test_clocks`);
    await page.getByRole('link', { name: `Delete ${clockId} (console clock)` }).focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe(`Delete test clock ${clockId}`);
    expect(await page.getByRole('main').textContent()).toContain('removes its customers and everything on them');
    await shot('17-test-clock-delete');
    // A confirmation that is not the clock's id is refused, naming the field; nothing is deleted.
    await page.getByLabel(`Type ${clockId} to confirm`).fill('clock_other');
    await page.getByRole('button', { name: `Delete ${clockId} and its objects` }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('invalid_param_key (confirm)');
    const refusedDelete = problems.indexOf('error: Failed to load resource: the server responded with a status of 400 (Bad Request)');
    expect(refusedDelete).toBeGreaterThanOrEqual(0);
    problems.splice(refusedDelete, 1);
    expect((await payjp.customers.retrieve(customer.id)).id).toBe(customer.id);
    await page.goBack();
    await page.getByLabel(`Type ${clockId} to confirm`).fill('');
    await page.getByLabel(`Type ${clockId} to confirm`).focus();
    await page.keyboard.type(clockId);
    await page.keyboard.press('Tab');
    expect(await page.evaluate<string | null>('document.activeElement && document.activeElement.textContent')).toBe(`Delete ${clockId} and its objects`);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('status').textContent()).toBe(`test clock ${clockId} deleted with its objects`);
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Test clocks of acct_http_a');
    expect(await page.getByRole('row', { name: new RegExp(clockId) }).count()).toBe(0);
    await shot('18-test-clock-deleted');
    // Its objects went with it: the customer and its charges are gone.
    await expect(payjp.customers.retrieve(customer.id)).rejects.toMatchObject({ status: 404 });
    expect(await charges()).toEqual([]);
    // Every change is in the operator's audit.
    const audited = await server.ctx.db.selectFrom('operator_audit').select(['action', 'operator']).where('target', '=', clockId).orderBy('at').execute();
    expect(audited).toEqual([
      { action: 'test_clock.create', operator: OPERATOR.name },
      { action: 'test_clock.advance', operator: OPERATOR.name },
      { action: 'test_clock.delete', operator: OPERATOR.name },
    ]);
  } finally {
    await context.close();
  }
  expect(problems).toEqual([]);
  expect(requests.filter((url) => !url.startsWith(server.baseUrl))).toEqual([]);
}, 300_000);

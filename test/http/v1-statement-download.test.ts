/**
 * Statement download URLs served by kessai (v1 §4.7): the URL works, expires 1 hour after issue
 * (clock-controlled: the server takes its clock from the context), and a newer URL for the same
 * statement and `platformer` invalidates the older. An expired or replaced URL is a 404.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { termCloseJob } from '../../jobs/term-close';
import { Scheduler } from '../../src/engine/scheduler';
import { STATEMENT_URL_TTL_MS } from '../../src/domain/limits';
import { testContext } from '../support/database';
import { startTestServer, type TestServer } from '../support/http-server';
import { captureCharge } from '../support/settlement-seed';

const jst = (local: string): Date => new Date(`${local}+09:00`);
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer('harness');
  await captureCharge(server.ctx.db, server.ctx, { accountId: 'acct_http_a', chargeId: 'ch_dl_1', amount: 30_000, at: jst('2027-01-10T10:00:00') });
  const runCtx = testContext(server.ctx.store, { at: jst('2027-02-01T00:00:00'), seed: 78 });
  expect((await new Scheduler(runCtx, [termCloseJob], { owner: 'test' }).runSlot(termCloseJob.name, jst('2027-02-01T00:00:00'))).status).toBe('succeeded');
  server.ctx.clock.set(jst('2027-02-02T10:00:00'));
});
afterAll(async () => server?.close());

it('the URL serves the CSV, expires after 1 hour, and a newer URL invalidates the older', async () => {
  const payjp = server.sdk(server.keys.a.test.secret);
  const statements = await payjp.statements.list({ type: 'sales' } as never);
  const statement = statements.data[0]!;
  const first = await payjp.statements.statementUrls(statement.id);
  expect(first.url.startsWith(`${server.baseUrl}/v1/statements/download?token=`)).toBe(true);
  expect(first.expires).toBe(Math.floor((server.ctx.clock.now().getTime() + STATEMENT_URL_TTL_MS) / 1000));
  const download = await fetch(first.url);
  expect(download.status).toBe(200);
  expect(download.headers.get('content-type')).toMatch(/^text\/csv/);
  const csv = await download.text();
  expect(csv).toContain(`statement_id,${statement.id}`);
  expect(csv).toContain('gross_sales');

  // One second before expiry it still works; at expiry it is a not-found.
  server.ctx.clock.set(new Date(server.ctx.clock.now().getTime() + STATEMENT_URL_TTL_MS - 1_000));
  expect((await fetch(first.url)).status).toBe(200);
  server.ctx.clock.set(new Date(server.ctx.clock.now().getTime() + 1_000));
  const expired = await fetch(first.url);
  expect(expired.status).toBe(404);
  expect(await expired.json()).toMatchObject({ error: { status: 404, code: 'not_found' } });

  const second = await payjp.statements.statementUrls(statement.id);
  expect((await fetch(second.url)).status).toBe(200);
  const third = await payjp.statements.statementUrls(statement.id);
  expect((await fetch(second.url)).status).toBe(404);
  expect((await fetch(third.url)).status).toBe(200);
  // The platformer variant is another URL and leaves the merchant's valid.
  const platformer = await payjp.statements.statementUrls(statement.id, { platformer: true });
  expect((await fetch(platformer.url)).status).toBe(200);
  expect((await fetch(third.url)).status).toBe(200);
  // A forged or missing token is the same not-found.
  expect((await fetch(`${third.url}x`)).status).toBe(404);
  expect((await fetch(`${server.baseUrl}/v1/statements/download`)).status).toBe(404);
});

/**
 * Webhooks in `kessai simulate`: no network, every attempt recorded in the report at
 * its instant, failing endpoints retried at +3, +6, +9 minutes, byte-identical across runs.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ALL_JOBS } from '../../jobs/index';
import { parseInstant } from '../../src/domain/time';
import { operationNames } from '../../src/api/operations';
import { writeReport } from '../../src/simulation/report';
import { loadScenario, planSteps, ScenarioError, parseScenario } from '../../src/simulation/scenario';
import { simulate } from '../../src/simulation/simulate';

const SCENARIO = fileURLToPath(new URL('../../scripts/scenarios/webhooks.json', import.meta.url));
const databaseUrl = process.env.DATABASE_URL;

async function report(): Promise<string> {
  const scenario = loadScenario(SCENARIO);
  const range = { from: parseInstant('2027-01-01'), to: parseInstant('2027-03-01') };
  const steps = planSteps(scenario, { ...range, seed: 3, operations: operationNames() });
  const dir = mkdtempSync(join(tmpdir(), 'kessai-sim-webhooks-'));
  await simulate({ scenario, steps, ...range, seed: 3, jobs: ALL_JOBS, databaseUrl }, (world) => writeReport(world, { scenario: scenario.name ?? null, ...range, seed: 3 }, dir));
  return readFileSync(join(dir, 'report.json'), 'utf8');
}

interface Delivery {
  at: string;
  endpoint: string;
  event: string;
  type: string;
  attempt: number;
  outcome: string;
  status: number | null;
  error: string | null;
}

describe('simulated webhooks', () => {
  it('records every attempt of a scenario with failing endpoints in the report, byte-identical across runs', async () => {
    const first = await report();
    expect(await report()).toBe(first);
    const parsed = JSON.parse(first) as {
      webhook_endpoints: { id: string; url: string; delivered: number; pending: number; given_up: number }[];
      webhook_deliveries: Delivery[];
      events: { id: string; type: string; pending_webhooks: number }[];
    };
    const byUrl = new Map(parsed.webhook_endpoints.map((e) => [e.url.split('/').at(-1)!, e]));
    const ok = byUrl.get('ok')!;
    const flaky = byUrl.get('flaky')!;
    const down = byUrl.get('down')!;
    const slow = byUrl.get('slow')!;
    const events = parsed.events;
    // ok and flaky take every event; down takes charge.succeeded and subscription.renewed; slow charge.succeeded.
    expect(ok).toMatchObject({ delivered: events.length, pending: 0, given_up: 0 });
    expect(flaky).toMatchObject({ delivered: events.length, pending: 0, given_up: 0 });
    const charges = events.filter((e) => e.type === 'charge.succeeded');
    const renewals = events.filter((e) => e.type === 'subscription.renewed');
    expect(charges).toHaveLength(4);
    expect(down).toMatchObject({ delivered: 0, given_up: charges.length + renewals.length });
    expect(slow).toMatchObject({ delivered: 0, given_up: charges.length });

    // The first renewal charge: every endpoint's attempts at their instants.
    const charge = charges[0]!;
    const attempts = (endpoint: string) =>
      parsed.webhook_deliveries.filter((d) => d.event === charge.id && d.endpoint === endpoint).map((d) => [d.at.slice(11, 16), d.attempt, d.outcome, d.status, d.error]);
    expect(attempts(ok.id)).toEqual([['01:00', 1, 'delivered', 200, null]]);
    expect(attempts(flaky.id)).toEqual([
      ['01:00', 1, 'failed', 500, null],
      ['01:03', 2, 'failed', 500, null],
      ['01:06', 3, 'delivered', 200, null],
    ]);
    expect(attempts(down.id)).toEqual(['01:00', '01:03', '01:06', '01:09'].map((at, i) => [at, i + 1, 'failed', 500, null]));
    expect(attempts(slow.id)).toEqual(['01:00', '01:03', '01:06', '01:09'].map((at, i) => [at, i + 1, 'failed', null, 'timeout']));
    // pending_webhooks: the down and slow endpoints never answered 2xx; it does not decrease when they give up.
    for (const event of charges) expect(event.pending_webhooks).toBe(2);
    for (const event of renewals) expect(event.pending_webhooks).toBe(1);
    expect(events.filter((e) => e.type === 'customer.created').every((e) => e.pending_webhooks === 0)).toBe(true);
  });

  it('a scenario endpoint with a non-http(s) URL or a bad fail option is refused, naming the section', async () => {
    expect(() => parseScenario(JSON.stringify({ webhooks: [{ url: 'ftp://example.com/' }] }), 'bad.json')).toThrow(ScenarioError);
    expect(() => parseScenario(JSON.stringify({ webhooks: [{ url: 'https://example.com/', fail: { first: 0 } }] }), 'bad.json')).toThrow(/webhooks/);
  });
});

/**
 * Webhooks in a simulation: the scenario's `webhooks` endpoints are created at the
 * start, and a transport that never touches the network answers for them as their `fail` option
 * says (always, for the first N attempts, or a timeout). Every attempt is recorded in the
 * database like the worker's, and the report lists them (webhookReport).
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema';
import { KessaiError } from '../domain/errors';
import { toIsoSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { addEndpoint } from '../webhooks/endpoints';
import type { SimulatedBehaviour } from '../webhooks/transport';
import { scenarioAccounts, ScenarioError, type Scenario } from './scenario';

/** Creates the scenario's endpoints; fills `behaviours` (endpoint id → what it answers). */
export async function createScenarioWebhooks(ctx: Context, scenario: Scenario, behaviours: Map<string, SimulatedBehaviour>): Promise<void> {
  const defaultAccount = scenarioAccounts(scenario)[0]!.id;
  for (const [i, hook] of (scenario.webhooks ?? []).entries()) {
    try {
      const { endpoint } = await addEndpoint(ctx, {
        accountId: hook.account ?? defaultAccount,
        url: hook.url,
        livemode: hook.livemode ?? false,
        apiVersion: hook.api_version ?? null,
        eventTypes: hook.event_types ?? null,
      });
      const fail = hook.fail;
      behaviours.set(endpoint.id, fail === undefined ? { fail: 'never' } : typeof fail === 'string' ? { fail } : { fail: 'first', attempts: fail.first });
    } catch (error) {
      if (error instanceof KessaiError) throw new ScenarioError(`webhooks[${i}]: ${error.param ?? ''} ${error.message}`.replace('  ', ' '));
      throw error;
    }
  }
}

/**
 * The report's webhook sections, or null when the scenario has no endpoint (reports without
 * webhooks stay as they were): each endpoint with its counts, then every recorded attempt in
 * order (instant, account, endpoint, event, attempt).
 */
export async function webhookReport(db: Kysely<Database>): Promise<{ endpoints: Record<string, unknown>[]; deliveries: Record<string, unknown>[] } | null> {
  const endpoints = await sql<{ account_id: string; endpoint_id: string; livemode: boolean; url: string; delivered: number; pending: number; given_up: number }>`
    SELECT w.account_id, w.endpoint_id, w.livemode, w.url,
           count(*) FILTER (WHERE d.status = 'delivered')::int AS delivered,
           count(*) FILTER (WHERE d.status = 'pending')::int AS pending,
           count(*) FILTER (WHERE d.status = 'failed')::int AS given_up
    FROM webhook_endpoints w LEFT JOIN webhook_deliveries d ON d.account_id = w.account_id AND d.endpoint_id = w.endpoint_id
    GROUP BY w.account_id, w.endpoint_id, w.livemode, w.url
    ORDER BY w.account_id, w.endpoint_id`.execute(db);
  if (endpoints.rows.length === 0) return null;
  const attempts = await sql<{ account_id: string; endpoint_id: string; event_id: string; type: string; attempt: number; attempted_at: Date; succeeded: boolean; http_status: number | null; error: string | null }>`
    SELECT a.account_id, a.endpoint_id, a.event_id, e.type, a.attempt, a.attempted_at, a.succeeded, a.http_status, a.error
    FROM webhook_attempts a JOIN events e ON e.account_id = a.account_id AND e.event_id = a.event_id
    ORDER BY a.attempted_at, a.account_id, a.endpoint_id, e.seq, a.attempt`.execute(db);
  return {
    endpoints: endpoints.rows.map((row) => ({ id: row.endpoint_id, account: row.account_id, livemode: row.livemode, url: row.url, delivered: row.delivered, pending: row.pending, given_up: row.given_up })),
    deliveries: attempts.rows.map((row) => ({
      at: toIsoSeconds(row.attempted_at),
      account: row.account_id,
      endpoint: row.endpoint_id,
      event: row.event_id,
      type: row.type,
      attempt: row.attempt,
      outcome: row.succeeded ? 'delivered' : 'failed',
      status: row.http_status,
      error: row.error,
    })),
  };
}

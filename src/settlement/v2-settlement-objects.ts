/**
 * The settlement objects (statement, balance, term, statement URL) in v2's shape, and their events
 * in both APIs. The executions and renderers are v1's (./statements.ts, ./terms.ts); v2 shows the
 * same objects with ISO 8601 instants under their v2 names (official-sdks.md §1 "Timestamps"). The
 * v2 codec (src/api/v2/settlement.ts) encodes with `v2Instants`, and the settlement events (v2 §6.1 "other": `term.created`,
 * `term.closed`, `statement.created`, `balance.created|fixed|closed|merged`) are written in both
 * versions with `inBothApis`, so the v2 events API and a v2-only webhook endpoint see them too.
 */
import { toIsoSeconds } from '../domain/time';
import type { EventInput, EventResource } from '../events/outbox';

/** v1 instants (UNIX seconds) and their v2 names. */
const V1_INSTANTS: Readonly<Record<string, string>> = { created: 'created_at', updated: 'updated_at', start_at: 'start_at', end_at: 'end_at', expires: 'expires' };

/** A settlement object as v2 shows it: every UNIX-seconds instant an ISO 8601 UTC string, under its v2 name, nested objects too. */
export function v2Instants(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(v2Instants);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) {
    const v2Name = V1_INSTANTS[key];
    if (v2Name !== undefined && typeof field === 'number') out[v2Name] = toIsoSeconds(new Date(field * 1000));
    else out[key] = v2Instants(field);
  }
  return out;
}

/**
 * Settlement events of v1 (as the close and the jobs build them), then the same events as v2
 * events, in the same order: one change, one event per API. Ids are drawn in this order.
 */
export function inBothApis(events: readonly EventInput[]): EventInput[] {
  return [...events, ...events.map((event) => ({ ...event, data: v2Instants(event.data) as EventResource, apiVersion: 'v2' as const }))];
}

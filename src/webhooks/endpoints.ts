/**
 * Webhook endpoints (v2 §6.2): where an account's events are sent, per account and
 * mode. The token (`whook_…`) is shown once when made or rotated and sent with every delivery in
 * `X-Service-Webhook-Token`; it is stored as written (the receiver compares it, so a digest would
 * not do) and never logged. Endpoints are configured from the CLI; the spec has no API for them.
 */
import { sql, type Kysely } from 'kysely';
import type { WebhookEndpointStatus } from '../db/column-types';
import type { Database } from '../db/schema';
import { KessaiError } from '../domain/errors';
import type { Context } from '../engine/context';
import type { ApiVersion } from '../events/outbox';

export interface WebhookEndpoint {
  readonly accountId: string;
  readonly id: string;
  readonly livemode: boolean;
  readonly url: string;
  /** Events of this API version only; null: every event, each in its own version. */
  readonly apiVersion: ApiVersion | null;
  /** Only these event types; null: every type. */
  readonly eventTypes: readonly string[] | null;
  readonly status: Exclude<WebhookEndpointStatus, 'removed'>;
  readonly createdAt: Date;
}

export interface EndpointCounts {
  readonly delivered: number;
  /** Deliveries still pending after at least one failed attempt. */
  readonly failing: number;
  /** Deliveries not yet attempted. */
  readonly waiting: number;
  /** Deliveries given up after the last retry. */
  readonly givenUp: number;
}

export interface AddEndpointInput {
  readonly accountId: string;
  readonly url: string;
  readonly livemode?: boolean;
  readonly apiVersion?: ApiVersion | null;
  readonly eventTypes?: readonly string[] | null;
}

/** Longest URL accepted (a generous bound; real endpoints are far shorter). */
const MAX_URL_LENGTH = 2048;
const EVENT_TYPE = /^[a-z_]+(?:\.[a-z_]+)*$/;

/** Refuses anything but an absolute http(s) URL without credentials in it. */
export function checkEndpointUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new KessaiError('invalid_param_key', { param: 'url', message: `url must be an absolute http:// or https:// URL, got ${JSON.stringify(value)}` });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new KessaiError('invalid_param_key', { param: 'url', message: `url must use http or https, got ${JSON.stringify(url.protocol.replace(/:$/, ''))}` });
  }
  if (url.username !== '' || url.password !== '') throw new KessaiError('invalid_param_key', { param: 'url', message: 'url must not carry a user name or password; the receiver checks X-Service-Webhook-Token' });
  if (value.length > MAX_URL_LENGTH) throw new KessaiError('invalid_string_length', { param: 'url', message: `url is longer than ${MAX_URL_LENGTH} characters` });
  return url.toString();
}

function checkEventTypes(types: readonly string[] | null | undefined): string[] | null {
  if (types === null || types === undefined || types.length === 0) return null;
  for (const type of types) {
    if (!EVENT_TYPE.test(type)) throw new KessaiError('invalid_param_key', { param: 'event_types', message: `not an event type: ${JSON.stringify(type)} (e.g. charge.succeeded)` });
  }
  return [...new Set(types)].sort();
}

function toEndpoint(row: { account_id: string; endpoint_id: string; livemode: boolean; url: string; api_version: ApiVersion | null; event_types: string[] | null; status: WebhookEndpointStatus; created_at: Date }): WebhookEndpoint {
  return {
    accountId: row.account_id,
    id: row.endpoint_id,
    livemode: row.livemode,
    url: row.url,
    apiVersion: row.api_version,
    eventTypes: row.event_types,
    status: row.status === 'disabled' ? 'disabled' : 'enabled',
    createdAt: row.created_at,
  };
}

/** Adds an endpoint; returns it with its token, which is shown this once. */
export async function addEndpoint(ctx: Pick<Context, 'db' | 'clock' | 'ids'>, input: AddEndpointInput): Promise<{ endpoint: WebhookEndpoint; token: string }> {
  const url = checkEndpointUrl(input.url);
  const eventTypes = checkEventTypes(input.eventTypes);
  const livemode = input.livemode ?? false;
  const account = await ctx.db.selectFrom('accounts').select(['account_id', 'live_enabled']).where('account_id', '=', input.accountId).executeTakeFirst();
  if (!account) throw new KessaiError('invalid_id', { param: 'account', message: `No such account: ${input.accountId}` });
  if (livemode && !account.live_enabled) throw new KessaiError('not_activated_account', { param: 'livemode', message: `account ${input.accountId} has no live mode` });
  const now = ctx.clock.now();
  const id = ctx.ids.next('webhookEndpoint');
  const token = ctx.ids.next('webhookToken');
  const row = await ctx.db
    .insertInto('webhook_endpoints')
    .values({ account_id: input.accountId, endpoint_id: id, livemode, url, token, api_version: input.apiVersion ?? null, event_types: eventTypes, created_at: now, updated_at: now })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { endpoint: toEndpoint(row), token };
}

async function changeEndpoint(ctx: Pick<Context, 'db' | 'clock'>, accountId: string, endpointId: string, values: { status?: WebhookEndpointStatus; token?: string }): Promise<WebhookEndpoint> {
  const row = await ctx.db
    .updateTable('webhook_endpoints')
    .set({ ...values, updated_at: ctx.clock.now() })
    .where('account_id', '=', accountId)
    .where('endpoint_id', '=', endpointId)
    .where('status', '<>', 'removed')
    .returningAll()
    .executeTakeFirst();
  if (!row) throw new KessaiError('invalid_id', { param: 'endpoint', message: `No such webhook endpoint: ${endpointId} (account ${accountId})` });
  return toEndpoint(row);
}

/** A disabled endpoint gets no delivery row for new events, and its pending ones wait until it is enabled again. */
export function setEndpointEnabled(ctx: Pick<Context, 'db' | 'clock'>, accountId: string, endpointId: string, enabled: boolean): Promise<WebhookEndpoint> {
  return changeEndpoint(ctx, accountId, endpointId, { status: enabled ? 'enabled' : 'disabled' });
}

/** A new token, shown this once; the old one is no longer sent. */
export async function rotateEndpointToken(ctx: Pick<Context, 'db' | 'clock' | 'ids'>, accountId: string, endpointId: string): Promise<{ endpoint: WebhookEndpoint; token: string }> {
  const token = ctx.ids.next('webhookToken');
  return { endpoint: await changeEndpoint(ctx, accountId, endpointId, { token }), token };
}

/**
 * Removes an endpoint: nothing more is sent to it. Its delivery history stays (events keep their
 * `pending_webhooks`, which counts deliveries without a 2xx answer, as for a given-up delivery).
 */
export async function removeEndpoint(ctx: Pick<Context, 'db' | 'clock'>, accountId: string, endpointId: string): Promise<WebhookEndpoint> {
  return changeEndpoint(ctx, accountId, endpointId, { status: 'removed' });
}

/** The account's endpoints (not removed), oldest first, with their delivery counts. */
export async function listEndpoints(db: Kysely<Database>, accountId: string): Promise<(WebhookEndpoint & { readonly counts: EndpointCounts })[]> {
  const rows = await db
    .selectFrom('webhook_endpoints as w')
    .selectAll('w')
    .select([
      sql<number>`(SELECT count(*) FROM webhook_deliveries d WHERE d.account_id = w.account_id AND d.endpoint_id = w.endpoint_id AND d.status = 'delivered')::int`.as('delivered'),
      sql<number>`(SELECT count(*) FROM webhook_deliveries d WHERE d.account_id = w.account_id AND d.endpoint_id = w.endpoint_id AND d.status = 'pending' AND d.attempts > 0)::int`.as('failing'),
      sql<number>`(SELECT count(*) FROM webhook_deliveries d WHERE d.account_id = w.account_id AND d.endpoint_id = w.endpoint_id AND d.status = 'pending' AND d.attempts = 0)::int`.as('waiting'),
      sql<number>`(SELECT count(*) FROM webhook_deliveries d WHERE d.account_id = w.account_id AND d.endpoint_id = w.endpoint_id AND d.status = 'failed')::int`.as('given_up'),
    ])
    .where('w.account_id', '=', accountId)
    .where('w.status', '<>', 'removed')
    .orderBy('w.created_at')
    .orderBy('w.endpoint_id')
    .execute();
  return rows.map((row) => ({ ...toEndpoint(row), counts: { delivered: row.delivered, failing: row.failing, waiting: row.waiting, givenUp: row.given_up } }));
}

/** One endpoint with its token, for sending (never for printing). */
export async function endpointForSending(db: Kysely<Database>, accountId: string, endpointId: string): Promise<WebhookEndpoint & { readonly token: string }> {
  const row = await db.selectFrom('webhook_endpoints').selectAll().where('account_id', '=', accountId).where('endpoint_id', '=', endpointId).where('status', '<>', 'removed').executeTakeFirst();
  if (!row) throw new KessaiError('invalid_id', { param: 'endpoint', message: `No such webhook endpoint: ${endpointId} (account ${accountId})` });
  return { ...toEndpoint(row), token: row.token };
}

/**
 * The Operator (operator.ts) of a running server, over its operator API: what the CLI uses on the
 * embedded database while `kessai serve` holds the data folder. Same interface, same results (the
 * API's JSON with its instants read back as Dates), same refusals (a KessaiError with the code and
 * parameter the server named). Every change carries an Idempotency-Key of its own, so a request
 * retried after a lost answer changes nothing twice where the API keys it (re-sends).
 */
import { randomUUID } from 'node:crypto';
import { isErrorCode, KessaiError } from '../../domain/errors';
import type { Operator } from './operator';

/** Instants in the API's answers: ISO 8601 strings under these names are read back as Dates. */
const INSTANT_FIELD = /(?:At|Until|^slot|^nextSlot|^oldestDueSlot)$/;
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z$/;

function reviveInstants(key: string, value: unknown): unknown {
  return typeof value === 'string' && INSTANT_FIELD.test(key) && ISO_INSTANT.test(value) ? new Date(value) : value;
}

export function remoteOperator(baseUrl: string, token: string): Operator {
  const call = async <T>(method: string, path: string, body?: unknown, requestKey: string = randomUUID()): Promise<T> => {
    const response = await fetch(`${baseUrl}/admin${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'idempotency-key': requestKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(10 * 60 * 1000),
    });
    const parsed = JSON.parse(await response.text(), reviveInstants) as Record<string, unknown>;
    if (!response.ok) {
      const error = (parsed.error ?? {}) as { code?: string; param?: string; message?: string };
      const code = error.code !== undefined && isErrorCode(error.code) ? error.code : 'payjp_wrong';
      throw new KessaiError(code, { message: error.message ?? `the server answered ${response.status}`, ...(error.param === undefined ? {} : { param: error.param }) });
    }
    return parsed as T;
  };
  const data = async <T>(path: string): Promise<T> => (await call<{ data: T }>('GET', path)).data;
  const enc = encodeURIComponent;
  const endpointPath = (accountId: string, endpointId: string) => `/accounts/${enc(accountId)}/webhook_endpoints/${enc(endpointId)}`;
  const query = (values: Record<string, string | number | undefined>) => {
    const pairs = Object.entries(values).filter((pair): pair is [string, string | number] => pair[1] !== undefined);
    return pairs.length === 0 ? '' : `?${pairs.map(([k, v]) => `${k}=${enc(String(v))}`).join('&')}`;
  };
  return {
    accounts: {
      create: (input) => call('POST', '/accounts', input),
      list: () => data('/accounts'),
      keys: (accountId) => data(`/accounts/${enc(accountId)}/keys`),
      createKey: (accountId, input) => call('POST', `/accounts/${enc(accountId)}/keys`, input),
      revokeKey: (accountId, keyId) => call('POST', `/accounts/${enc(accountId)}/keys/${enc(keyId)}/revoke`),
      reauth: (accountId, changes) => (Object.keys(changes).length === 0 ? call('GET', `/accounts/${enc(accountId)}/reauth`) : call('POST', `/accounts/${enc(accountId)}/reauth`, changes)),
      servicePlans: (accountId, options) => data(`/accounts/${enc(accountId)}/service_plans${query({ livemode: String(options.livemode) })}`),
      events: (accountId, options) => data(`/accounts/${enc(accountId)}/events${query({ livemode: String(options.livemode) })}`),
      settlement: (accountId, options) => call('GET', `/accounts/${enc(accountId)}/settlement${query({ livemode: String(options.livemode) })}`),
      statementCsv: async (accountId, options) => (await call<{ csv: string }>('GET', `/accounts/${enc(accountId)}/statements/${enc(options.statementId)}/csv${query({ livemode: String(options.livemode) })}`)).csv,
      setServicePlan: (accountId, { from, ...input }) => call('POST', `/accounts/${enc(accountId)}/service_plans`, { ...input, ...(from === undefined ? {} : { from: from.toISOString() }) }),
    },
    webhooks: {
      add: (input) => call('POST', `/accounts/${enc(input.accountId)}/webhook_endpoints`, { url: input.url, livemode: input.livemode ?? false, apiVersion: input.apiVersion ?? null, eventTypes: input.eventTypes ?? null }),
      list: (accountId) => data(`/accounts/${enc(accountId)}/webhook_endpoints`),
      setEnabled: (accountId, endpointId, enabled) => call('POST', `${endpointPath(accountId, endpointId)}/${enabled ? 'enable' : 'disable'}`),
      rotateToken: (accountId, endpointId) => call('POST', `${endpointPath(accountId, endpointId)}/rotate_token`),
      remove: (accountId, endpointId) => call('DELETE', endpointPath(accountId, endpointId)),
      test: (accountId, endpointId) => call('POST', `${endpointPath(accountId, endpointId)}/test`),
      deliveries: (accountId, endpointId, options = {}) => data(`${endpointPath(accountId, endpointId)}/deliveries${query({ status: options.status, limit: options.limit })}`),
      attempts: (accountId, endpointId, eventId) => data(`${endpointPath(accountId, endpointId)}/deliveries/${enc(eventId)}/attempts`),
      resend: (accountId, endpointId, options) =>
        call('POST', options.eventId === undefined ? `${endpointPath(accountId, endpointId)}/resend_given_up` : `${endpointPath(accountId, endpointId)}/deliveries/${enc(options.eventId)}/resend`, {}, options.requestKey),
    },
    testClocks: {
      list: (accountId) => data(`/accounts/${enc(accountId)}/test_clocks`),
      create: (accountId, { frozenTime, name }) => call('POST', `/accounts/${enc(accountId)}/test_clocks`, { frozenTime: frozenTime.toISOString(), ...(name === undefined ? {} : { name }) }),
      advance: (accountId, testClockId, to) => call('POST', `/accounts/${enc(accountId)}/test_clocks/${enc(testClockId)}/advance`, { to: to.toISOString() }),
      delete: (accountId, testClockId) => call('DELETE', `/accounts/${enc(accountId)}/test_clocks/${enc(testClockId)}`),
    },
    adjustments: {
      book: (accountId, { requestKey, ...input }) => call('POST', `/accounts/${enc(accountId)}/adjustments`, input, requestKey),
      list: (accountId, options) => data(`/accounts/${enc(accountId)}/adjustments${query({ livemode: String(options.livemode) })}`),
    },
    jobs: {
      states: () => data('/jobs'),
      slots: (options) => data(`/jobs/slots${query({ job: options.job, status: options.status, limit: options.limit })}`),
      run: (job, slot) => call('POST', `/jobs/${enc(job)}/run`, { slot: slot.toISOString() }),
      runStatements: async (at) => (await call<{ data: never }>('POST', '/statements/run', at === undefined ? {} : { at: at.toISOString() })).data,
    },
  };
}

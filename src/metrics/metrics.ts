/**
 * The Prometheus metrics of a kessai process (prom-client), served at /metrics by `kessai serve`
 * and `kessai worker --metrics-port`. Each metric is documented in docs/metrics.md; the alert rules
 * are in deploy/prometheus/kessai-alerts.yml.
 *
 * Two kinds: what this process did (counters and histograms: slots, webhook attempts, API
 * requests), fed by the engine's observer (EngineObserver) and the server's hooks; and what the
 * database says now (gauges: the run ledger's backlog, the webhook backlog), read at each scrape
 * from the indexed partial views the console reads too. Label values are job names, route
 * templates, statuses and zones: never an id of a merchant, a customer or a key. A job's name is
 * the label `job_name` (Prometheus keeps `job` for the scrape job).
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { sql } from 'kysely';
import type { Context, EngineObserver } from '../engine/context';
import type { JobDefinition } from '../engine/job';
import { jobStates } from '../engine/job-ledger';
import type { Store } from '../db/connect';

export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** Bounds of the slot duration histogram (seconds): a quick slot to an hour-long catch-up. */
const SLOT_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600];
/** Bounds of the API latency histogram (seconds). */
const REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface RequestObservation {
  readonly method: string;
  /** The route template (`/v1/charges/:id`), `unmatched` for an unknown URL. */
  readonly route: string;
  readonly status: number;
  readonly seconds: number;
  /** The rate-limit zone of a 429 answer. */
  readonly refusedZone?: string;
  /** Answered from a stored Idempotency-Key response. */
  readonly replayed: boolean;
}

export class KessaiMetrics {
  readonly registry = new Registry();
  readonly observer: EngineObserver;
  readonly #slots = new Counter({ name: 'kessai_job_slots_total', help: 'Slot runs of a job ended by this process, by how they ended (succeeded, failed, abandoned, released, lost).', labelNames: ['job_name', 'status'], registers: [this.registry] });
  readonly #slotSeconds = new Histogram({ name: 'kessai_job_slot_duration_seconds', help: 'Duration of the slot runs this process ended, by job and how they ended.', labelNames: ['job_name', 'status'], buckets: SLOT_BUCKETS, registers: [this.registry] });
  readonly #items = new Counter({ name: 'kessai_job_items_total', help: "Items a job processed in the slot runs this process ended, by the job's own count name.", labelNames: ['job_name', 'count'], registers: [this.registry] });
  readonly #dueSlots = new Gauge({ name: 'kessai_job_due_slots', help: 'Slots of a job due by now and not done (pending, running, failed awaiting retry, or not yet scheduled): how far behind it is.', labelNames: ['job_name'], registers: [this.registry] });
  readonly #oldestDue = new Gauge({ name: 'kessai_job_oldest_due_slot_age_seconds', help: 'Age of the oldest due slot of a job (0 when none is due).', labelNames: ['job_name'], registers: [this.registry] });
  readonly #failedSlots = new Gauge({ name: 'kessai_job_failed_slots', help: 'Slots of a job that failed and wait for their retry.', labelNames: ['job_name'], registers: [this.registry] });
  readonly #abandonedSlots = new Gauge({ name: 'kessai_job_abandoned_slots', help: "Slots of a job given up: they wait for an operator's re-run.", labelNames: ['job_name'], registers: [this.registry] });
  readonly #deliveries = new Counter({ name: 'kessai_webhook_deliveries_total', help: 'Webhook attempts this process recorded, by outcome (delivered, retrying, given_up).', labelNames: ['outcome'], registers: [this.registry] });
  readonly #pending = new Gauge({ name: 'kessai_webhook_pending_deliveries', help: 'Webhook deliveries not yet delivered nor given up.', registers: [this.registry] });
  readonly #oldestPending = new Gauge({ name: 'kessai_webhook_oldest_pending_age_seconds', help: 'How long the longest-waiting due delivery has been due (0 when none is).', registers: [this.registry] });
  readonly #failingEndpoints = new Gauge({ name: 'kessai_webhook_failing_endpoints', help: 'Endpoints with a pending delivery whose last attempt failed.', registers: [this.registry] });
  readonly #givenUp = new Gauge({ name: 'kessai_webhook_given_up_deliveries', help: 'Deliveries given up after the last retry (they wait for a re-send).', registers: [this.registry] });
  readonly #requests = new Histogram({ name: 'kessai_http_request_duration_seconds', help: 'API requests this server answered, by method, route template and status.', labelNames: ['method', 'route', 'status'], buckets: REQUEST_BUCKETS, registers: [this.registry] });
  readonly #refusals = new Counter({ name: 'kessai_rate_limit_refusals_total', help: 'Requests refused by the rate limits (429), by zone.', labelNames: ['zone'], registers: [this.registry] });
  readonly #replays = new Counter({ name: 'kessai_idempotent_replays_total', help: 'Requests answered with the stored response of their Idempotency-Key.', registers: [this.registry] });
  readonly #pool = new Gauge({ name: 'kessai_db_pool_connections', help: "The PostgreSQL connection pool's connections, by state (total, idle, waiting: requests waiting for one).", labelNames: ['state'], registers: [this.registry] });
  readonly #scrapeErrors = new Counter({ name: 'kessai_metrics_database_errors_total', help: 'Scrapes whose database gauges could not be read (they keep their last values).', registers: [this.registry] });

  constructor(
    private readonly source: { readonly jobs: readonly JobDefinition[] },
  ) {
    this.observer = {
      slotEnded: (outcome, durationMs) => {
        this.#slots.inc({ job_name: outcome.job, status: outcome.status });
        if (durationMs !== null) this.#slotSeconds.observe({ job_name: outcome.job, status: outcome.status }, durationMs / 1000);
        for (const [count, value] of Object.entries(outcome.counts)) if (value > 0) this.#items.inc({ job_name: outcome.job, count }, value);
      },
      webhookAttempts: (counts) => {
        if (counts.delivered > 0) this.#deliveries.inc({ outcome: 'delivered' }, counts.delivered);
        if (counts.retrying > 0) this.#deliveries.inc({ outcome: 'retrying' }, counts.retrying);
        if (counts.given_up > 0) this.#deliveries.inc({ outcome: 'given_up' }, counts.given_up);
      },
    };
    // Every job and outcome is a series from the start (a rate over a counter that appears late misses its first increase).
    for (const job of source.jobs) for (const status of ['succeeded', 'failed', 'abandoned']) this.#slots.inc({ job_name: job.name, status }, 0);
    for (const outcome of ['delivered', 'retrying', 'given_up']) this.#deliveries.inc({ outcome }, 0);
  }

  observeRequest(observation: RequestObservation): void {
    this.#requests.observe({ method: observation.method, route: observation.route, status: String(observation.status) }, observation.seconds);
    if (observation.refusedZone !== undefined) this.#refusals.inc({ zone: observation.refusedZone });
    if (observation.replayed) this.#replays.inc();
  }

  /** The exposition text, after reading the database gauges as of `now`. */
  async render(ctx: Pick<Context, 'db'> & { readonly store?: Store }, now: Date): Promise<string> {
    try {
      await this.#readDatabase(ctx, now);
    } catch {
      this.#scrapeErrors.inc();
    }
    const stats = ctx.store?.poolStats?.();
    if (stats) for (const state of ['total', 'idle', 'waiting'] as const) this.#pool.set({ state }, stats[state]);
    return this.registry.metrics();
  }

  async #readDatabase(ctx: Pick<Context, 'db'>, now: Date): Promise<void> {
    const [states, webhooks] = await Promise.all([
      jobStates(ctx, this.source.jobs, now),
      // Each count over a partial index (pending: webhook_deliveries_due; given up: webhook_deliveries_given_up).
      sql<{ pending: number; oldest: Date | null; failing: number; given_up: number }>`
        SELECT (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending')::int AS pending,
               (SELECT min(next_attempt_at) FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ${now}) AS oldest,
               (SELECT count(*) FROM (SELECT DISTINCT account_id, endpoint_id FROM webhook_deliveries WHERE status = 'pending' AND attempts > 0) f)::int AS failing,
               (SELECT count(*) FROM webhook_deliveries WHERE status = 'failed')::int AS given_up`.execute(ctx.db),
    ]);
    for (const state of states) {
      this.#dueSlots.set({ job_name: state.job }, state.dueSlots);
      this.#oldestDue.set({ job_name: state.job }, state.oldestDueSlot === null ? 0 : Math.max(0, (now.getTime() - state.oldestDueSlot.getTime()) / 1000));
      this.#failedSlots.set({ job_name: state.job }, state.failedSlots);
      this.#abandonedSlots.set({ job_name: state.job }, state.abandonedSlots);
    }
    const row = webhooks.rows[0]!;
    this.#pending.set(row.pending);
    this.#oldestPending.set(row.oldest === null ? 0 : Math.max(0, (now.getTime() - row.oldest.getTime()) / 1000));
    this.#failingEndpoints.set(row.failing);
    this.#givenUp.set(row.given_up);
  }
}

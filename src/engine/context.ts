/**
 * The one object passed everywhere: `{ db, clock, ids, log, config }` (ARCHITECTURE.md). Features
 * and jobs take what they need from it; nothing reaches for globals.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema';
import type { Store } from '../db/connect';
import type { IdGenerator } from '../domain/ids';
import { MS_PER_DAY } from '../domain/time';
import { simulatedCardNetwork, type CardNetwork } from '../processor/card-network';
import type { Clock } from './clock';
import type { Logger } from './logger';
import type { SlotOutcome } from './slot-outcome';

export interface EngineConfig {
  /** Rows a batch job takes per transaction. */
  readonly batchSize: number;
  /** How far back the scheduler backfills slots missed while no worker ran. */
  readonly backfillWindowMs: number;
  /** How long a claimed slot stays reserved for its worker before another may take it over. */
  readonly leaseMs: number;
  /** Attempts of one slot before it is given up as `abandoned`. */
  readonly maxAttempts: number;
  /** Delay before the first retry of a failed slot; doubles with each further attempt. */
  readonly retryDelayMs: number;
  /**
   * How long the run ledger keeps a succeeded slot (by its instant); unset: kept for ever. Each
   * wake-up of the scheduler deletes older succeeded slots, except each job's latest one (see
   * Scheduler, "Retention"). At least the backfill window. The worker sets it (30 days unless
   * KESSAI_JOB_RUN_RETENTION_DAYS says otherwise); a simulation keeps its whole ledger for its report.
   */
  readonly runRetentionMs?: number | undefined;
  /** True in simulation: nothing leaves the process (webhooks are recorded, not sent). */
  readonly simulation: boolean;
  /**
   * HMAC secret of statement download URLs (at least 16 characters); issuing or checking a URL
   * without it is a configuration error. The CLI reads KESSAI_STATEMENT_URL_SECRET.
   */
  readonly statementUrlSecret?: string | undefined;
  /** Base of statement download URLs (default https://kessai.invalid/v1/statements/download). */
  readonly statementDownloadBaseUrl?: string | undefined;
  /** Base of tenant application page URLs (default https://kessai.invalid/v1/tenant_application). */
  readonly tenantApplicationBaseUrl?: string | undefined;
  /** Base of hosted checkout page URLs, completed by the session id (default https://checkout.kessai.dev/pay/). */
  readonly checkoutPageBaseUrl?: string | undefined;
}

export const DEFAULT_CONFIG: EngineConfig = {
  batchSize: 5_000,
  backfillWindowMs: MS_PER_DAY,
  leaseMs: 5 * 60 * 1000,
  maxAttempts: 5,
  retryDelayMs: 60 * 1000,
  simulation: false,
};

export interface Context {
  readonly db: Kysely<Database>;
  readonly store: Store;
  readonly clock: Clock;
  readonly ids: IdGenerator;
  /** The card network every charge goes through; kessai ships the deterministic simulator. */
  readonly processor: CardNetwork;
  readonly log: Logger;
  readonly config: EngineConfig;
  /**
   * How webhooks leave the process; absent: HTTP (undici) in the worker, and in simulation a
   * transport that records every delivery as answered (src/webhooks/transport.ts).
   */
  readonly webhookTransport?: WebhookTransport;
  /** What the engine reports as it works (the Prometheus metrics of serve and worker, src/metrics/); absent: nothing is reported. */
  readonly observer?: EngineObserver;
  /**
   * Whose objects the jobs work on (src/test-clocks/clock-scope.ts): absent, the live book — every
   * object not on a test clock; set, the objects of that one test clock only (an advance).
   */
  readonly testClock?: TestClockScope;
}

/** One test clock, as the jobs of its advance are scoped to it. */
export interface TestClockScope {
  readonly accountId: string;
  readonly testClockId: string;
}

/**
 * The engine's port for webhook delivery: how a webhook request leaves the process. The webhooks
 * feature implements it (HTTP in the worker, a scripted answer in the simulation, src/webhooks/transport.ts);
 * the composition roots pass one in as `Context.webhookTransport`.
 */
export interface WebhookRequest {
  readonly endpointId: string;
  readonly url: string;
  readonly token: string;
  /** The event object, as JSON text. */
  readonly body: string;
  /** 1 for the first attempt of a delivery. */
  readonly attempt: number;
}

export interface WebhookResult {
  /** A 2xx answer within the timeout. */
  readonly ok: boolean;
  /** The HTTP status, or null when none came (timeout, connection error). */
  readonly status: number | null;
  /** `timeout`, or the connection error's code (ECONNREFUSED, …); null when a status came. */
  readonly error: string | null;
  readonly durationMs: number;
}

export interface WebhookTransport {
  /**
   * Whether a failure of this transport cost time (a timeout, a connection that hangs): then a
   * delivery pass stops sending to that endpoint for the rest of the pass, so one dead endpoint
   * never holds the others up. False for the simulation, which answers at once.
   */
  readonly failuresAreSlow: boolean;
  send(request: WebhookRequest): Promise<WebhookResult>;
  close(): Promise<void>;
}

/** The engine's reports to an observer: called after the fact, never awaited, never allowed to fail a run. */
export interface EngineObserver {
  /** A slot run ended (`durationMs` null when it was given up without running: its last worker died). */
  slotEnded(outcome: SlotOutcome, durationMs: number | null): void;
  /** A delivery pass recorded outcomes of webhook attempts. */
  webhookAttempts(counts: { readonly delivered: number; readonly retrying: number; readonly given_up: number }): void;
}

export function createContext(parts: Omit<Context, 'config' | 'processor'> & { config?: Partial<EngineConfig>; processor?: CardNetwork }): Context {
  return { ...parts, processor: parts.processor ?? simulatedCardNetwork(), config: { ...DEFAULT_CONFIG, ...parts.config } };
}

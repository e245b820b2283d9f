/**
 * Kysely's view of the tables in sql/. Kept by hand beside the migrations: a column added in a
 * migration is added here in the same commit.
 */
import type { ColumnType, Generated } from 'kysely';

/** A JSON column: written as a string or value, read back as parsed JSON. */
export type Json<T = unknown> = ColumnType<T, string, string>;

export interface AccountsTable {
  account_id: string;
  name: string;
  live_enabled: Generated<boolean>;
  term_cycle: Generated<'monthly' | 'semi_monthly'>;
  created_at: Date;
}

export interface AccountFeeRatesTable {
  account_id: string;
  brand: string;
  /** numeric(5,2), read as a string such as "3.00". */
  fee_rate: string;
}

export interface ApiKeysTable {
  account_id: string;
  key_digest: string;
  kind: 'secret' | 'public';
  livemode: boolean;
  key_hint: string;
  created_at: Date;
  revoked_at: Date | null;
}

export interface EventsTable {
  account_id: string;
  event_id: string;
  livemode: boolean;
  api_version: 'v1' | 'v2';
  type: string;
  object_type: string;
  resource_id: string;
  data: Json<Record<string, unknown>>;
  created_at: Date;
  seq: Generated<number>;
  pending_webhooks: Generated<number>;
}

export type JobRunStatus = 'pending' | 'running' | 'succeeded' | 'failed' | 'abandoned';

export interface JobRunsTable {
  job: string;
  slot: Date;
  status: JobRunStatus;
  attempt: Generated<number>;
  owner: string | null;
  lease_until: Date | null;
  started_at: Date | null;
  finished_at: Date | null;
  duration_ms: number | null;
  counts: Json<Record<string, number>> | null;
  error: string | null;
  retry_at: Date | null;
}

export interface JobScheduleTable {
  job: string;
  high_water: Date;
  updated_at: Date;
}

export interface MigrationsTable {
  name: string;
  checksum: string;
  applied_at: Date;
}

export interface Database {
  accounts: AccountsTable;
  account_fee_rates: AccountFeeRatesTable;
  api_keys: ApiKeysTable;
  events: EventsTable;
  job_runs: JobRunsTable;
  job_schedule: JobScheduleTable;
  kessai_migrations: MigrationsTable;
}

// ---- 000002_customers_cards.sql -------------------------------------------------------------
// Declaration merging adds the new tables to `Database` without editing the block above.

/** A single-use card token (tok_); the card fields it carries become the stored card. */
export interface TokensTable {
  account_id: string;
  livemode: boolean;
  token_id: string;
  card_id: string;
  fingerprint: string;
  brand: string;
  last4: string;
  exp_month: number;
  exp_year: number;
  funding: string;
  country: string | null;
  issuer: string;
  name: string | null;
  cvc_check: string;
  created_at: Date;
  used_at: Date | null;
}

export interface CustomersTable {
  account_id: string;
  livemode: boolean;
  customer_id: string;
  email: string | null;
  description: string | null;
  default_card_id: string | null;
  metadata: Json<Record<string, string>>;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

export interface CardsTable {
  account_id: string;
  livemode: boolean;
  card_id: string;
  customer_id: string;
  fingerprint: string;
  brand: string;
  last4: string;
  exp_month: number;
  exp_year: number;
  funding: string;
  country: string | null;
  issuer: string;
  name: string | null;
  address_zip: string | null;
  address_state: string | null;
  address_city: string | null;
  address_line1: string | null;
  address_line2: string | null;
  email: string | null;
  phone: string | null;
  cvc_check: string;
  metadata: Json<Record<string, string>>;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

export interface Database {
  tokens: TokensTable;
  customers: CustomersTable;
  cards: CardsTable;
}

export interface PlansTable {
  account_id: string;
  livemode: boolean;
  plan_id: string;
  amount: number;
  currency: Generated<string>;
  interval: 'month' | 'year';
  name: string | null;
  trial_days: Generated<number>;
  billing_day: number | null;
  metadata: Json<Record<string, string>>;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

export type SubscriptionStatus = 'trial' | 'active' | 'canceled' | 'paused';

export interface SubscriptionsTable {
  account_id: string;
  livemode: boolean;
  subscription_id: string;
  customer_id: string;
  plan_id: string;
  next_cycle_plan_id: string | null;
  status: SubscriptionStatus;
  prorate: Generated<boolean>;
  start_at: Date;
  current_period_start: Date;
  current_period_end: Date;
  trial_start: Date | null;
  trial_end: Date | null;
  paused_at: Date | null;
  canceled_at: Date | null;
  resumed_at: Date | null;
  renews_at: Date | null;
  last_charge_id: string | null;
  metadata: Json<Record<string, string>>;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

export interface ChargesTable {
  account_id: string;
  livemode: boolean;
  charge_id: string;
  amount: number;
  currency: Generated<string>;
  paid: boolean;
  captured: boolean;
  captured_at: Date | null;
  expired_at: Date | null;
  card_id: string;
  customer_id: string | null;
  subscription_id: string | null;
  period_start: Date | null;
  description: string | null;
  failure_code: string | null;
  failure_message: string | null;
  /** numeric(5,2), read as a string such as "3.00". */
  fee_rate: string;
  refunded: Generated<boolean>;
  amount_refunded: Generated<number>;
  refund_reason: string | null;
  three_d_secure_status: string | null;
  metadata: Json<Record<string, string>>;
  created_at: Date;
  updated_at: Date;
  /** The captured yen (the held amount, or less after a smaller capture); null until captured. */
  amount_captured: number | null;
}

/** One refund of a charge (000004): settlement counts it in the term of its `created_at`. */
export interface RefundsTable {
  account_id: string;
  livemode: boolean;
  refund_id: string;
  charge_id: string;
  amount: number;
  reason: string | null;
  created_at: Date;
}

export interface Database {
  plans: PlansTable;
  subscriptions: SubscriptionsTable;
  charges: ChargesTable;
  refunds: RefundsTable;
}

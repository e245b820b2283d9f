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
  /** 000050: consecutive attempts that ended without committing a batch. */
  attempts_without_progress: Generated<number>;
  /** 000050: the attempt that committed the latest batch. */
  progress_attempt: number | null;
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

// ---- 000005_charge_holds.sql ----------------------------------------------------------------

export interface ChargesTable {
  /** What creation asked for (`capture`), applied at tds_finish; null for never-held charges. */
  capture_requested: ColumnType<boolean | null, boolean | null | undefined, boolean | null>;
  expiry_days: ColumnType<number | null, number | null | undefined, number | null>;
  card_funding: ColumnType<string | null, string | null | undefined, string | null>;
  card_issuer: ColumnType<string | null, string | null | undefined, string | null>;
  authorization_code: ColumnType<string | null, string | null | undefined, string | null>;
  /** When the current hold was authorized (creation, tds_finish, last reauth). */
  authorized_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** End of the 3-D Secure completion window while pending; null otherwise. */
  tds_expires_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** When the lapsed hold was released (its own expired_at). */
  released_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  reauth_count: Generated<number>;
  reauth_tried_expired_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface AccountsTable {
  reauth_enabled: Generated<boolean>;
  reauth_lead_hours: Generated<number>;
  reauth_max_count: Generated<number>;
}

/** One reauthorization attempt of a v1 hold (000005). */
export interface ReauthorizationsTable {
  account_id: string;
  livemode: boolean;
  reauth_id: string;
  charge_id: string;
  scheduled: boolean;
  amount: number;
  outcome: 'succeeded' | 'failed';
  failure_code: string | null;
  failure_message: string | null;
  authorization_code: string | null;
  previous_expired_at: Date | null;
  expired_at: Date | null;
  attempted_at: Date;
}

export interface Database {
  reauthorizations: ReauthorizationsTable;
}

// ---- Settlement (000007) ----

export interface TenantsTable {
  account_id: string;
  livemode: boolean;
  tenant_id: string;
  name: string | null;
  /** numeric(5,2), read as a string such as "10.00". */
  platform_fee_rate: string;
  payjp_fee_included: boolean;
  minimum_transfer_amount: Generated<number>;
  metadata: Json<Record<string, string>>;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

/** Settlement columns of charges (000007); null until the charge is captured and settled. */
export interface ChargesTable {
  tenant_id: Generated<string | null>;
  platform_fee: Generated<number | null>;
  platform_fee_rate: Generated<string | null>;
  payjp_fee_included: Generated<boolean | null>;
  fee: Generated<number | null>;
  total_platform_fee: Generated<number>;
  term_id: Generated<string | null>;
}

/** Settlement columns of refunds (000007), filled by settleRefunds. */
export interface RefundsTable {
  tenant_id: Generated<string | null>;
  payjp_fee_included: Generated<boolean | null>;
  refund_fee_offset: Generated<number | null>;
  refund_platform_fee_offset: Generated<number | null>;
  term_id: Generated<string | null>;
}

export interface TermsTable {
  account_id: string;
  livemode: boolean;
  term_id: string;
  cycle: 'monthly' | 'semi_monthly';
  start_at: Date;
  end_at: Date;
  closed: Generated<boolean>;
  closed_at: Date | null;
  charge_count: Generated<number>;
  refund_count: Generated<number>;
  dispute_count: Generated<number>;
  created_at: Date;
}

export type SettlementOwner = 'merchant' | 'tenant' | 'platform';

export interface BalancesTable {
  account_id: string;
  livemode: boolean;
  balance_id: string;
  owner: SettlementOwner;
  owner_ref: string;
  tenant_id: string | null;
  state: 'collecting' | 'transfer' | 'claim';
  net: number;
  deadline: Date | null;
  due_date: string | null;
  due_at: Date | null;
  closed: Generated<boolean>;
  closed_date: string | null;
  last_term_id: string;
  created_at: Date;
  updated_at: Date;
}

export interface StatementsTable {
  account_id: string;
  livemode: boolean;
  statement_id: string;
  owner: SettlementOwner;
  owner_ref: string;
  tenant_id: string | null;
  type: 'sales' | 'service_fee' | 'forfeit' | 'transfer_fee' | 'misc';
  title: string | null;
  term_id: string | null;
  balance_id: string;
  net: number;
  created_at: Date;
  updated_at: Date;
}

export interface StatementItemsTable {
  account_id: string;
  livemode: boolean;
  statement_id: string;
  position: number;
  subject: string;
  amount: number;
  /** numeric(5,2), read as a string such as "0.00". */
  tax_rate: string;
}

export interface StatementUrlsTable {
  account_id: string;
  livemode: boolean;
  statement_id: string;
  platformer: boolean;
  nonce: string;
  issued_at: Date;
  expires_at: Date;
}

export interface Database {
  tenants: TenantsTable;
  terms: TermsTable;
  balances: BalancesTable;
  statements: StatementsTable;
  statement_items: StatementItemsTable;
  statement_urls: StatementUrlsTable;
}

// ---- 000006_payment_flows.sql ---------------------------------------------------------------

export type PaymentFlowStatus = 'requires_payment_method' | 'requires_confirmation' | 'requires_action' | 'processing' | 'requires_capture' | 'canceled' | 'succeeded';
export type PaymentMethodType = 'card' | 'paypay' | 'apple_pay';

/** A v2 payment flow (pfw_): one payment from creation through confirmation and capture. */
export interface PaymentFlowsTable {
  account_id: string;
  livemode: boolean;
  payment_flow_id: string;
  status: PaymentFlowStatus;
  amount: number;
  currency: Generated<string>;
  capture_method: 'automatic' | 'manual';
  payment_method_types: Json<PaymentMethodType[]>;
  request_extended_authorization: 'must_extend' | 'if_available' | null;
  client_secret: string;
  customer_id: string | null;
  description: string | null;
  payment_method_type: PaymentMethodType | null;
  payment_method_id: string | null;
  card_id: string | null;
  card_fingerprint: string | null;
  card_brand: string | null;
  card_last4: string | null;
  card_exp_month: number | null;
  card_exp_year: number | null;
  card_funding: string | null;
  card_issuer: string | null;
  authorization_code: string | null;
  authorized_at: Date | null;
  extended_authorization: Generated<boolean>;
  capture_before: Date | null;
  amount_received: Generated<number>;
  amount_capturable: Generated<number>;
  capture_count: Generated<number>;
  three_d_secure_status: string | null;
  next_action: Json<Record<string, unknown>> | null;
  last_payment_error: Json<Record<string, unknown>> | null;
  cancellation_reason: string | null;
  canceled_at: Date | null;
  checkout_session_id: string | null;
  metadata: Json<Record<string, string | number | boolean>>;
  created_at: Date;
  updated_at: Date;
}

/** A price (price_): an amount and currency that checkout line items refer to. */
export interface PricesTable {
  account_id: string;
  livemode: boolean;
  price_id: string;
  unit_amount: number;
  currency: Generated<string>;
  active: Generated<boolean>;
  metadata: Json<Record<string, string | number | boolean>>;
  created_at: Date;
  updated_at: Date;
}

export type CheckoutSessionStatus = 'open' | 'complete' | 'expired';

/** A hosted checkout session (cs_). */
export interface CheckoutSessionsTable {
  account_id: string;
  livemode: boolean;
  checkout_session_id: string;
  status: CheckoutSessionStatus;
  mode: 'payment';
  currency: Generated<string>;
  amount_total: number;
  payment_method_types: Json<PaymentMethodType[]>;
  capture_method: Generated<'automatic' | 'manual'>;
  success_url: string;
  cancel_url: string | null;
  customer_id: string | null;
  metadata: Json<Record<string, string | number | boolean>>;
  payment_flow_metadata: Json<Record<string, string | number | boolean>>;
  setup_flow_metadata: Json<Record<string, string | number | boolean>>;
  payment_flow_id: string | null;
  expires_at: Date;
  completed_at: Date | null;
  expired_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface CheckoutSessionLineItemsTable {
  account_id: string;
  livemode: boolean;
  checkout_session_id: string;
  position: number;
  price_id: string;
  quantity: number;
  unit_amount: number;
  amount_total: number;
}

export type DisplayPreference = 'on' | 'off' | 'none';

/** Per account and mode: which payment methods the payment screen shows (pmc_). */
export interface PaymentMethodConfigurationsTable {
  account_id: string;
  livemode: boolean;
  configuration_id: string;
  name: string;
  active: Generated<boolean>;
  is_default: Generated<boolean>;
  card_preference: Generated<DisplayPreference>;
  paypay_preference: Generated<DisplayPreference>;
  apple_pay_preference: Generated<DisplayPreference>;
  usable_card_brands: Json<string[]>;
  paypay_usable: Generated<boolean>;
  created_at: Date;
  updated_at: Date;
}

/** Columns 000006 adds to `charges`: the flow a captured v2 payment belongs to, and which capture. */
export interface ChargesTable {
  payment_flow_id?: Generated<string | null>;
  payment_flow_capture?: Generated<number | null>;
}

export interface Database {
  payment_flows: PaymentFlowsTable;
  prices: PricesTable;
  checkout_sessions: CheckoutSessionsTable;
  checkout_session_line_items: CheckoutSessionLineItemsTable;
  payment_method_configurations: PaymentMethodConfigurationsTable;
}

// ---- 000025_idempotency_rate_limits.sql -----------------------------------------------------

/** A POST's `Idempotency-Key`: reserved (`pending`) before the work, then the response it gave (`done`). */
export interface IdempotencyKeysTable {
  account_id: string;
  livemode: boolean;
  idempotency_key: string;
  request_hash: string;
  state: 'pending' | 'done';
  status_code: number | null;
  response_headers: Json<Record<string, string>> | null;
  response_body: string | null;
  created_at: Date;
  expires_at: Date;
}

/** rate-limiter-flexible's PostgreSQL store; written by the library only. */
export interface RateLimitCountersTable {
  key: string;
  points: number;
  /** End of the window, epoch milliseconds (bigint). */
  expire: number | null;
}

export interface Database {
  idempotency_keys: IdempotencyKeysTable;
  rate_limit_counters: RateLimitCountersTable;
}

// ---- 000030: webhook endpoints, deliveries and attempts -----------------------------------------

export type WebhookEndpointStatus = 'enabled' | 'disabled' | 'removed';

export interface WebhookEndpointsTable {
  account_id: string;
  endpoint_id: string;
  livemode: boolean;
  url: string;
  token: string;
  api_version: 'v1' | 'v2' | null;
  event_types: string[] | null;
  status: Generated<WebhookEndpointStatus>;
  created_at: Date;
  updated_at: Date;
}

export interface WebhookDeliveriesTable {
  account_id: string;
  endpoint_id: string;
  event_id: string;
  status: Generated<'pending' | 'delivered' | 'failed'>;
  attempts: Generated<number>;
  claims: Generated<number>;
  next_attempt_at: Date;
  lease_owner: string | null;
  lease_until: Date | null;
  last_status: number | null;
  last_error: string | null;
  delivered_at: Date | null;
  created_at: Date;
}

export interface WebhookAttemptsTable {
  account_id: string;
  endpoint_id: string;
  event_id: string;
  attempt: number;
  attempted_at: Date;
  succeeded: boolean;
  http_status: number | null;
  error: string | null;
  duration_ms: number;
}

export interface Database {
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
}

// ---- 000080_v2_refunds_products_tax_rates.sql -----------------------------------------------

export type PaymentRefundStatus = 'succeeded' | 'failed' | 'pending' | 'canceled' | 'requires_action';
export type PaymentRefundReason = 'duplicate' | 'fraudulent' | 'requested_by_customer';

/** A v2 refund of a payment flow; its money is in `refunds` rows naming it. */
export interface PaymentRefundsTable {
  account_id: string;
  livemode: boolean;
  payment_refund_id: string;
  payment_flow_id: string;
  amount: number;
  status: PaymentRefundStatus;
  reason: PaymentRefundReason | null;
  metadata: Json<Record<string, string | number | boolean>>;
  created_at: Date;
  updated_at: Date;
}

/** The v2 refund a `refunds` row was written for; null for v1 refunds. */
export interface RefundsTable {
  payment_refund_id: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface ProductsTable {
  account_id: string;
  livemode: boolean;
  product_id: string;
  name: string;
  active: boolean;
  description: string | null;
  unit_label: string | null;
  url: string | null;
  default_price_id: string | null;
  metadata: Json<Record<string, string | number | boolean>>;
  created_at: Date;
  updated_at: Date;
}

export interface PricesTable {
  product_id: ColumnType<string | null, string | null | undefined, string | null>;
  nickname: ColumnType<string | null, string | null | undefined, string | null>;
  lookup_key: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface TaxRatesTable {
  account_id: string;
  livemode: boolean;
  tax_rate_id: string;
  display_name: string;
  /** numeric(6,4), read as a string such as "10.0000". */
  percentage: string;
  inclusive: boolean;
  active: boolean;
  country: string | null;
  description: string | null;
  metadata: Json<Record<string, string | number | boolean>>;
  created_at: Date;
  updated_at: Date;
}

export interface Database {
  payment_refunds: PaymentRefundsTable;
  products: ProductsTable;
  tax_rates: TaxRatesTable;
}

// ---- 000081_payment_methods.sql -------------------------------------------------------------

export interface PaymentMethodsTable {
  account_id: string;
  livemode: boolean;
  payment_method_id: string;
  type: PaymentMethodType;
  customer_id: string | null;
  card_id: string | null;
  fingerprint: string | null;
  brand: string | null;
  last4: string | null;
  exp_month: number | null;
  exp_year: number | null;
  funding: string | null;
  country: string | null;
  issuer: string | null;
  billing_details: Json<Record<string, unknown>>;
  metadata: Json<Record<string, string | number | boolean>>;
  detached_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** The v2 default payment method of a customer (000081). */
export interface CustomersTable {
  default_payment_method_id: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface Database {
  payment_methods: PaymentMethodsTable;
}

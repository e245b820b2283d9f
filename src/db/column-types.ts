/**
 * What the database's own types cannot say, kept by hand: the values a CHECK constraint allows
 * for a text column, and the shape of a JSON document. scripts/db-types.ts maps these onto
 * columns (its COLUMN_OVERRIDES) when it generates src/db/schema.ts; every other column type
 * comes from the migrated database.
 */
import type { ColumnType } from 'kysely';

/** A JSON column: written as a string or value, read back as parsed JSON. */
export type JsonColumn<T = unknown> = ColumnType<T, string, string>;

export type JobRunStatus = 'pending' | 'running' | 'succeeded' | 'failed' | 'abandoned';
export type SubscriptionStatus = 'trial' | 'active' | 'canceled' | 'paused';
export type SettlementOwner = 'merchant' | 'tenant' | 'platform';
export type PaymentFlowStatus = 'requires_payment_method' | 'requires_confirmation' | 'requires_action' | 'processing' | 'requires_capture' | 'canceled' | 'succeeded';
export type PaymentMethodType = 'card' | 'paypay' | 'apple_pay';
export type PaymentRefundStatus = 'succeeded' | 'failed' | 'pending' | 'canceled' | 'requires_action';
export type PaymentRefundReason = 'duplicate' | 'fraudulent' | 'requested_by_customer';
/** The SDK's `PaymentDisputeStatus`; kessai opens disputes as `needs_response` (a chargeback). */
export type PaymentDisputeStatus = 'pre_warning_needs_response' | 'warning_needs_response' | 'warning_needs_refund' | 'warning_under_review' | 'needs_response' | 'under_review' | 'lost' | 'cancel';
export type CheckoutSessionStatus = 'open' | 'complete' | 'expired';
export type DisplayPreference = 'on' | 'off' | 'none';
export type WebhookEndpointStatus = 'enabled' | 'disabled' | 'removed';

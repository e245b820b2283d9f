/**
 * The job registry: every scheduled job, in the order jobs due at the same instant run.
 * One module per job in this folder; each is thin and calls feature code. Disputes open before the
 * term close, so a dispute due by a term's end is booked in that term. Webhook delivery comes
 * last: it sends the events every other job wrote at the same slot.
 */
import type { JobDefinition } from '../src/engine/job';
import { balanceCloseJob } from './balance-close';
import { checkoutSessionExpiryJob } from './checkout-session-expiry';
import { disputeOpeningJob } from './dispute-opening';
import { holdExpiryJob } from './hold-expiry';
import { holdReauthorizationsJob } from './hold-reauthorizations';
import { paymentFlowExpiryJob } from './payment-flow-expiry';
import { serviceFeeBillingJob } from './service-fee-billing';
import { subscriptionRenewalsJob } from './subscription-renewals';
import { termCloseJob } from './term-close';
import { threeDSecureTimeoutsJob } from './three-d-secure-timeouts';
import { webhookDeliveryJob } from './webhook-delivery';

export const ALL_JOBS: readonly JobDefinition[] = [subscriptionRenewalsJob, holdReauthorizationsJob, holdExpiryJob, threeDSecureTimeoutsJob, paymentFlowExpiryJob, checkoutSessionExpiryJob, disputeOpeningJob, termCloseJob, serviceFeeBillingJob, balanceCloseJob, webhookDeliveryJob];

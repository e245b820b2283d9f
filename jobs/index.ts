/**
 * The job registry: every scheduled job, in the order jobs due at the same instant run.
 * One module per job in this folder; each is thin and calls feature code.
 */
import type { JobDefinition } from '../src/engine/job';
import { balanceCloseJob } from './balance-close';
import { checkoutSessionExpiryJob } from './checkout-session-expiry';
import { holdExpiryJob } from './hold-expiry';
import { holdReauthorizationsJob } from './hold-reauthorizations';
import { paymentFlowExpiryJob } from './payment-flow-expiry';
import { subscriptionRenewalsJob } from './subscription-renewals';
import { termCloseJob } from './term-close';
import { threeDSecureTimeoutsJob } from './three-d-secure-timeouts';

export const ALL_JOBS: readonly JobDefinition[] = [subscriptionRenewalsJob, holdReauthorizationsJob, holdExpiryJob, threeDSecureTimeoutsJob, paymentFlowExpiryJob, checkoutSessionExpiryJob, termCloseJob, balanceCloseJob];

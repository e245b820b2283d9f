/**
 * The job registry: every scheduled job, in the order jobs due at the same instant run.
 * One module per job in this folder; each is thin and calls feature code.
 */
import type { JobDefinition } from '../src/engine/job';
import { subscriptionRenewalsJob } from './subscription-renewals';

export const ALL_JOBS: readonly JobDefinition[] = [subscriptionRenewalsJob];

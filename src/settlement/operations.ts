/**
 * Every settlement operation, registered as one group: statements and their
 * download URLs, balances.
 */
import type { Operation } from '../operations/define';
import { STATEMENT_URL_OPERATIONS } from './statement-urls';
import { STATEMENT_OPERATIONS } from './statements';
import { V2_SETTLEMENT_LIST_OPERATIONS } from './v2-lists';

export const SETTLEMENT_OPERATIONS: readonly Operation[] = [...STATEMENT_OPERATIONS, ...STATEMENT_URL_OPERATIONS, ...V2_SETTLEMENT_LIST_OPERATIONS];

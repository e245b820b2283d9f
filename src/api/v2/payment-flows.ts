/**
 * The v2 codec of payment flows, so far their reads (v2 §4.3): `payment_flows.retrieve` (with a
 * public key the flow's `client_secret` is required) and `payment_flows.list`. Parameters → typed
 * commands of src/payment-flows/payment-flows.ts, rows → the flow object and the list; the wire
 * names of the SDK (`customer_id`, …) are added by the routes (./routes.ts). The writing
 * operations still read their parameters in the feature.
 */
import { defineCommandOperation } from '../../operations/define';
import { optionalString, readParams, requireString } from '../../operations/params';
import { readV2Page, V2_PAGINATION_PARAMS, v2ListObject } from '../../operations/v2-pagination';
import { PAYMENT_FLOWS_URL, renderPaymentFlow } from '../../payment-flows/payment-flow-object';
import { listPaymentFlows, retrievePaymentFlow, type ListPaymentFlowsCommand } from '../../payment-flows/payment-flows';

function decodeRetrieve(input: unknown) {
  const params = readParams(input, ['id', 'client_secret']);
  const id = requireString(params, 'id');
  return { id, clientSecret: optionalString(params, 'client_secret') };
}

/** `limit`, `starting_after` / `ending_before`, and the optional `customer` filter. */
function decodeList(input: unknown): ListPaymentFlowsCommand {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'customer']);
  const page = readV2Page(params);
  return { page, customer: optionalString(params, 'customer', { code: 'invalid_querystring' }) };
}

export const PAYMENT_FLOW_READ_OPERATIONS = [
  defineCommandOperation('payment_flows.retrieve', { decode: decodeRetrieve, execute: retrievePaymentFlow, encode: renderPaymentFlow }, { keys: 'secret_or_public' }),
  defineCommandOperation('payment_flows.list', { decode: decodeList, execute: listPaymentFlows, encode: (rows, command) => v2ListObject(rows, command.page, PAYMENT_FLOWS_URL, renderPaymentFlow) }),
];

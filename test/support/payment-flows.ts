/**
 * The payment flow writes as functions of raw v2 parameters (decode → execute → encode, as the
 * v2 routes run them), for tests that drive flows without the HTTP server.
 */
import type { PaymentFlowObject } from '../../src/payment-flows/payment-flow-object';
import { v2Operation } from './operations';

export const createPaymentFlow = v2Operation<PaymentFlowObject>('payment_flows.create');
export const updatePaymentFlow = v2Operation<PaymentFlowObject>('payment_flows.update');
export const confirmPaymentFlow = v2Operation<PaymentFlowObject>('payment_flows.confirm');
export const completePaymentFlowAction = v2Operation<PaymentFlowObject>('payment_flows.complete_action');
export const capturePaymentFlow = v2Operation<PaymentFlowObject>('payment_flows.capture');
export const cancelPaymentFlow = v2Operation<PaymentFlowObject>('payment_flows.cancel');

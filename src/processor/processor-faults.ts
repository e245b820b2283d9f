/**
 * `pg_wrong` (v1 §7: "fault on the payment processor side"): a card network call that throws —
 * the processor did not answer (a timeout, a refused connection, a malformed reply), as opposed to
 * a refusal, which is a result — reaches an API caller as 500 `pg_wrong` (`server_error`) rather
 * than the service's own `payjp_wrong`. The operations already undo what the failed call began
 * (the claim or create intent is dropped, the token given back), so the request changes nothing.
 * Jobs keep the raw error: their slot fails and is retried.
 */
import { KessaiError } from '../domain/errors';
import type { CardNetwork } from './card-network';

async function orProcessorFault<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof KessaiError) throw error;
    throw new KessaiError('pg_wrong', { message: 'The payment processor did not answer; nothing was charged or refunded. Retry the request later.', cause: error });
  }
}

const GUARDED = new WeakMap<CardNetwork, CardNetwork>();

/** `network` with every call's thrown fault turned into `pg_wrong`; one wrapper per network. */
export function withProcessorFaults(network: CardNetwork): CardNetwork {
  let guarded = GUARDED.get(network);
  if (guarded === undefined) {
    guarded = {
      authorize: (requests) => orProcessorFault(() => network.authorize(requests)),
      authenticate: (requests) => orProcessorFault(() => network.authenticate(requests)),
      capture: (requests) => orProcessorFault(() => network.capture(requests)),
      release: (requests) => orProcessorFault(() => network.release(requests)),
      refund: (requests) => orProcessorFault(() => network.refund(requests)),
    };
    GUARDED.set(network, guarded);
  }
  return guarded;
}

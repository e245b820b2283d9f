/**
 * The card-network simulator with what it answered written down (authorizations with their
 * requests, captures, releases), for tests that count network calls: "released once".
 */
import { simulatedCardNetwork, type AuthorizationRequest, type AuthorizationResult, type CardNetwork, type SettlementRequest } from '../../src/processor/card-network';

export interface RecordingNetwork {
  readonly processor: CardNetwork;
  /** Every authorization answered, with its request, in order. */
  readonly asked: { readonly request: AuthorizationRequest; readonly result: AuthorizationResult }[];
  /** The results alone. */
  readonly authorized: AuthorizationResult[];
  readonly captured: SettlementRequest[];
  readonly released: SettlementRequest[];
}

/** `before` (optional) runs ahead of every authorization and capture: a test's gate. */
export function recordingNetwork(before: () => Promise<void> = async () => {}): RecordingNetwork {
  const network = simulatedCardNetwork();
  const recorded: RecordingNetwork = {
    processor: {
      ...network,
      authorize: async (requests) => {
        await before();
        const results = await network.authorize(requests);
        requests.forEach((request, i) => recorded.asked.push({ request, result: results[i]! }));
        recorded.authorized.push(...results);
        return results;
      },
      capture: async (requests) => {
        await before();
        recorded.captured.push(...requests);
        return network.capture(requests);
      },
      release: async (requests) => {
        recorded.released.push(...requests);
        return network.release(requests);
      },
    },
    asked: [],
    authorized: [],
    captured: [],
    released: [],
  };
  return recorded;
}

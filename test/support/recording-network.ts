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

export interface GatedNetwork extends RecordingNetwork {
  /** Resolves once a call waits at the gate. */
  atNetwork(): Promise<void>;
  /** Lets the waiting call through, and re-arms the gate for the next one. */
  open(): void;
  /** Holds calls at the gate from now on (`arm(false)`: lets them through again; a gate made with `armed: false` does until armed). */
  arm(on?: boolean): void;
}

/**
 * The recording simulator with a gate before every authorization and capture, opened by the test: a
 * call stays at the network until then. `armed: false`: calls pass until `arm()`, so a test sets up
 * through the network freely and holds only the calls of the step it races.
 */
export function gatedNetwork(options: { readonly armed?: boolean } = {}): GatedNetwork {
  let armed = options.armed ?? true;
  let waiting: (() => void) | undefined;
  let arrived: (() => void) | undefined;
  let arrival = new Promise<void>((resolve) => (arrived = resolve));
  const recorded = recordingNetwork(async () => {
    if (!armed) return;
    arrived?.();
    await new Promise<void>((resolve) => (waiting = resolve));
  });
  return {
    ...recorded,
    atNetwork: () => arrival,
    open: () => {
      arrival = new Promise<void>((resolve) => (arrived = resolve));
      waiting?.();
    },
    arm: (on = true) => {
      armed = on;
    },
  };
}

/**
 * Fault points at the card network, for crash tests only (`kessai serve` with KESSAI_FAULT, as the
 * Idempotency-Key handling's points in src/api/idempotency.ts): `after-authorization` acts once the
 * network has answered an authorization of a charge or a hold, before the engine has done anything
 * with the answer (`kessai serve` kills itself there with SIGKILL: money is authorized at the
 * network and nothing of it is recorded).
 */
import type { CardNetwork } from './card-network';

export const NETWORK_FAULT_POINTS = ['after-authorization'] as const;
export type NetworkFaultPoint = (typeof NETWORK_FAULT_POINTS)[number];

/** `network` with `act` run after every authorization of a charge or a hold has been answered. */
export function networkWithFault(network: CardNetwork, point: NetworkFaultPoint, act: () => void): CardNetwork {
  switch (point) {
    case 'after-authorization':
      return {
        ...network,
        authorize: async (requests) => {
          const results = await network.authorize(requests);
          if (requests.some((request) => request.kind === 'charge' || request.kind === 'hold')) act();
          return results;
        },
      };
  }
}

/**
 * A gate at the card network, for the test suite only (`kessai serve` with
 * KESSAI_TEST_NETWORK_GATE=<file>, refused unless run under vitest): every authorization call —
 * a request's charge or hold, a job batch's renewals or reauthorizations — says
 * `network gate: authorization waiting` on stderr, then waits until the file exists. A test holds
 * requests in flight (the shutdown drain) or a worker batch mid-way this way without racing a timer.
 */
export function networkWithGate(network: CardNetwork, file: string, exists: (file: string) => boolean, say: (line: string) => void): CardNetwork {
  return {
    ...network,
    authorize: async (requests) => {
      if (requests.length > 0) {
        say('network gate: authorization waiting');
        while (!exists(file)) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return network.authorize(requests);
    },
  };
}

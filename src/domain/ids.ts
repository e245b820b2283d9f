/**
 * Identifier prefixes of the service (v1 §2.1, v2 §2.1, service rules) and the generator port that
 * makes them. Production draws ids from the operating system's random source; simulation and tests
 * from a seeded generator, so that one scenario and seed always give the same ids.
 */

export const ID_PREFIX = {
  account: 'acct_',
  charge: 'ch_',
  card: 'car_',
  customer: 'cus_',
  plan: 'pln_',
  subscription: 'sub_',
  statement: 'st_',
  tenant: 'ten_',
  token: 'tok_',
  term: 'tm_',
  balance: 'ba_',
  eventV1: 'evnt_',
  eventV2: 'evt_',
  paymentFlow: 'pfw_',
  checkoutSession: 'cs_',
  paymentMethodConfiguration: 'pmc_',
  price: 'price_',
  webhookToken: 'whook_',
  webhookEndpoint: 'we_',
  refund: 're_',
  reauthorization: 'rea_',
  adjustment: 'adj_',
  paymentRefund: 'pyre_',
  paymentDispute: 'pydp_',
  product: 'prod_',
  taxRate: 'txr_',
  paymentMethod: 'pm_',
  threeDSecureRequest: 'tdsr_',
  setupFlow: 'sfw_',
  testClock: 'clock_',
  secretKeyTest: 'sk_test_',
  secretKeyLive: 'sk_live_',
  publicKeyTest: 'pk_test_',
  publicKeyLive: 'pk_live_',
} as const;

export type IdKind = keyof typeof ID_PREFIX;

/** Number of random hex characters after the prefix (120 bits). */
export const ID_RANDOM_HEX_LENGTH = 30;

/** Where random bits come from: four 32-bit words a call. */
export type RandomWords = () => readonly [number, number, number, number];

export interface IdGenerator {
  /** A new id of the given kind, e.g. `next('charge')` → `ch_3f…`. */
  next(kind: IdKind): string;
  /** A uniformly distributed integer in [0, bound), for seeded simulated outcomes. */
  int(bound: number): number;
}

const HEX = '0123456789abcdef';

function hexOf(words: readonly number[], length: number): string {
  let out = '';
  for (const word of words) {
    for (let shift = 28; shift >= 0; shift -= 4) out += HEX[(word >>> shift) & 0xf];
  }
  return out.slice(0, length);
}

/** Builds an id generator over a source of random words. */
export function idGenerator(words: RandomWords): IdGenerator {
  return {
    next(kind) {
      return ID_PREFIX[kind] + hexOf(words(), ID_RANDOM_HEX_LENGTH);
    },
    int(bound) {
      if (!Number.isInteger(bound) || bound <= 0 || bound > 2 ** 32) throw new RangeError(`bound must be an integer in 1..2^32, got ${bound}`);
      // Rejection sampling keeps the distribution uniform for bounds that do not divide 2^32.
      const limit = 2 ** 32 - (2 ** 32 % bound);
      for (;;) {
        const [word] = words();
        if (word < limit) return word % bound;
      }
    },
  };
}

/**
 * A deterministic source of random words: xoshiro128** seeded through splitmix32, so that any
 * integer seed (including 0) gives a well-mixed, reproducible stream.
 */
export function seededWords(seed: number): RandomWords {
  if (!Number.isSafeInteger(seed)) throw new RangeError(`seed must be an integer, got ${seed}`);
  let sm = (seed >>> 0) ^ Math.floor(seed / 2 ** 32);
  const splitmix32 = (): number => {
    sm = (sm + 0x9e3779b9) | 0;
    let z = sm;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
  let a = splitmix32();
  let b = splitmix32();
  let c = splitmix32();
  let d = splitmix32();
  const nextWord = (): number => {
    const result = Math.imul(rotl(Math.imul(b, 5), 7), 9) >>> 0;
    const t = b << 9;
    c ^= a;
    d ^= b;
    b ^= c;
    a ^= d;
    c ^= t;
    d = rotl(d, 11);
    return result;
  };
  return () => [nextWord(), nextWord(), nextWord(), nextWord()];
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

/** A seeded, reproducible id generator (simulation and tests). */
export function seededIds(seed: number): IdGenerator {
  return idGenerator(seededWords(seed));
}

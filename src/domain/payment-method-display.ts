/**
 * Which payment methods the payment screen shows: the display rules 1–6 of v2 §4.5 as one pure
 * function of the stored preferences, what the account can use, and the mode.
 *
 *   1. `off`: never shown.
 *   2. `on` or `none`: shown if the method is usable, otherwise hidden (`none` is not `off`).
 *   3. Usability: `card` and `apple_pay` need at least one usable card brand (`apple_pay` only
 *      counts its three brands); `paypay` needs the account to be able to use it.
 *   4. `card` is computed automatically; it cannot be hidden by `off`.
 *   5. Test mode does not evaluate usability: everything except `off` is shown.
 *   6. Test and live settings are separate (one configuration per mode; storage, not this file).
 */

export const DISPLAY_METHODS = ['card', 'paypay', 'apple_pay'] as const;
export type DisplayMethod = (typeof DISPLAY_METHODS)[number];

export const DISPLAY_PREFERENCES = ['on', 'off', 'none'] as const;
export type DisplayPreferenceSetting = (typeof DISPLAY_PREFERENCES)[number];

/**
 * The three card brands Apple Pay works with (v2 §4.5 rule 3: "apple_pay works with three card
 * brands only"). **Decision:** Visa, Mastercard and American Express, the brands Apple Pay carries
 * through Japanese gateways as card payments (JCB goes through its own QUICPay rail there).
 */
export const APPLE_PAY_BRANDS: readonly string[] = ['Visa', 'MasterCard', 'American Express'];

export interface DisplayInput {
  readonly livemode: boolean;
  readonly preferences: Readonly<Record<DisplayMethod, DisplayPreferenceSetting>>;
  /** Card brands the account can accept (v1 brand names). */
  readonly usableCardBrands: readonly string[];
  /** Whether the account is able to use PayPay. */
  readonly paypayUsable: boolean;
}

export interface MethodDisplay {
  /** True exactly when `value` is `on` (v2 §2.4). */
  readonly available: boolean;
  readonly display_preference: { readonly preference: DisplayPreferenceSetting; readonly value: 'on' | 'off' };
}

/** Rule 3: whether the account can take the method at all (live mode only; rule 5). */
export function methodUsable(method: DisplayMethod, input: Pick<DisplayInput, 'usableCardBrands' | 'paypayUsable'>): boolean {
  switch (method) {
    case 'card':
      return input.usableCardBrands.length > 0;
    case 'apple_pay':
      return input.usableCardBrands.some((brand) => APPLE_PAY_BRANDS.includes(brand));
    case 'paypay':
      return input.paypayUsable;
  }
}

/** The effective display of one method. */
export function methodDisplay(method: DisplayMethod, input: DisplayInput): MethodDisplay {
  const preference = input.preferences[method];
  let shown: boolean;
  if (method === 'card') {
    // Rule 4: computed automatically; the stored preference cannot hide it (kessai refuses `off`
    // for card at update, so a stored card preference is never `off`; it is ignored here anyway).
    shown = input.livemode ? methodUsable('card', input) : true;
  } else if (preference === 'off') {
    shown = false; // Rule 1.
  } else {
    // Rules 2 and 5: `on` and `none` alike; test mode does not evaluate usability.
    shown = input.livemode ? methodUsable(method, input) : true;
  }
  const value = shown ? 'on' : 'off';
  return { available: shown, display_preference: { preference, value } };
}

/** Every method's display, in the order of DISPLAY_METHODS. */
export function paymentMethodDisplay(input: DisplayInput): Readonly<Record<DisplayMethod, MethodDisplay>> {
  return {
    card: methodDisplay('card', input),
    paypay: methodDisplay('paypay', input),
    apple_pay: methodDisplay('apple_pay', input),
  };
}

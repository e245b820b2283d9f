-- card_flagged (v1 §7): card-caused errors per account, mode and card fingerprint in the current
-- window, and until when the card is locked out (src/domain/card-flags.ts has the rule).
CREATE TABLE card_error_windows (
  account_id text NOT NULL,
  livemode boolean NOT NULL,
  fingerprint text NOT NULL,
  window_start timestamptz NOT NULL,
  errors integer NOT NULL,
  flagged_until timestamptz,
  updated_at timestamptz NOT NULL,
  CONSTRAINT card_error_windows_pkey PRIMARY KEY (account_id, livemode, fingerprint),
  CONSTRAINT card_error_windows_errors_not_negative CHECK (errors >= 0)
);

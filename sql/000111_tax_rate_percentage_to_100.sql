-- A tax rate's percentage is 0 to 100 with up to 4 decimals (tax_rates_percentage_range), but
-- numeric(6,4) holds at most 99.9999: 100 itself overflowed. Seven digits hold 100.0000.
-- Widening a numeric's precision at the same scale rewrites no row.
ALTER TABLE tax_rates ALTER COLUMN percentage TYPE numeric(7,4);

-- charges_by_captured (000004) served no query: settlement finds a term's charges by term_id
-- (charges_by_term), and nothing reads charges by capture instant. Every captured charge paid for
-- its upkeep on insert.
DROP INDEX charges_by_captured;

-- apply_snapshot: the classic end-of-day job, storing only what changed.
SET timezone = 'UTC';

CREATE TABLE prod (sku text, price numeric, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('prod', ARRAY['sku']);
CREATE TABLE prod_today (sku text PRIMARY KEY, price numeric);

INSERT INTO prod_today VALUES ('a', 1.00), ('b', 2.00), ('c', 3.00);
SELECT * FROM zipper_lake.apply_snapshot('prod', 'prod_today', '2026-04-01');

-- day 2: b changes, c disappears, d appears, a is unchanged
TRUNCATE prod_today; INSERT INTO prod_today VALUES ('a', 1.00), ('b', 2.5), ('d', 4.00);
SELECT * FROM zipper_lake.apply_snapshot('prod', 'prod_today', '2026-04-02');

-- day 3 without deletes: a missing key stays open; 1.0 = 1.00 (numeric equality, not text)
TRUNCATE prod_today; INSERT INTO prod_today VALUES ('a', 1.0), ('b', 2.5);
SELECT * FROM zipper_lake.apply_snapshot('prod', 'prod_today', '2026-04-03', deletes => false);

SELECT sku, price, valid_from, valid_to FROM prod ORDER BY sku, valid_from;

-- re-running the same day changes nothing
SELECT * FROM zipper_lake.apply_snapshot('prod', 'prod_today', '2026-04-03', deletes => false);
-- with deletes, d is closed at the snapshot time
SELECT * FROM zipper_lake.apply_snapshot('prod', 'prod_today', '2026-04-04');
SELECT sku, price, valid_from, valid_to FROM prod ORDER BY sku, valid_from;
SELECT * FROM zipper_lake.verify('prod');

-- only changed rows were stored: no version copies an unchanged row
SELECT count(*) AS versions, count(DISTINCT sku) AS keys FROM prod;

-- an image holds one row a key: two different rows of one key are refused
-- (two equal ones count as one unchanged), and nothing is applied
CREATE TABLE prod_dup (sku text, price numeric);
INSERT INTO prod_dup VALUES ('a', 1), ('a', 2), ('b', 3);
SELECT * FROM zipper_lake.apply_snapshot('prod', 'prod_dup', '2026-04-05');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS versions FROM prod;

-- INSERT and COPY load versions as given: overlapping versions are refused,
-- adjacent versions with equal values become one (README, "Change
-- semantics"), INSERT ... ON CONFLICT is refused.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
\set SHOW_CONTEXT never

-- versions, and where they are stored
CREATE FUNCTION ld_layout(t regclass) RETURNS TABLE (
    partition_end date, window_start timestamptz, first_start timestamptz,
    last_start timestamptz, row_count bigint, masked_rows bigint)
LANGUAGE sql AS $$
    SELECT partition_end, window_start, first_start, last_start, row_count, masked_rows
      FROM zipper_lake.inspect(t)
     ORDER BY partition_end NULLS FIRST, window_start, first_start, row_count, masked_rows
$$;

CREATE TABLE ld_acct (id int, owner text, balance numeric,
                   valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ld_acct', ARRAY['id']);
INSERT INTO ld_acct VALUES
  (1, 'ann', 10, '2026-01-01', '2026-01-05'),
  (1, 'ann', 11, '2026-01-05', 'infinity'),
  (2, 'bob', 20, '2026-01-02', '2026-01-04');

-- overlaps between the rows of one statement: nothing is written
INSERT INTO ld_acct VALUES (3, 'cy', 30, '2026-01-01', '2026-01-10'),
                        (3, 'cy', 31, '2026-01-09', 'infinity');
INSERT INTO ld_acct VALUES (4, 'dee', 40, '2026-01-01', 'infinity'),
                        (4, 'dee', 41, '2026-01-03', 'infinity');
-- an exact duplicate overlaps too
INSERT INTO ld_acct VALUES (5, 'eve', 50, '2026-01-01', '2026-01-02'),
                        (5, 'eve', 50, '2026-01-01', '2026-01-02');
COPY ld_acct FROM stdin;
6	fay	60	2026-01-01 00:00:00+00	2026-01-03 00:00:00+00
7	gus	70	2026-01-01 00:00:00+00	infinity
6	fay	61	2026-01-02 12:00:00+00	2026-01-04 00:00:00+00
\.
-- overlaps with stored versions: the same rows again, a version inside a
-- stored one, one reaching into the open version, a new open version
INSERT INTO ld_acct VALUES (2, 'bob', 20, '2026-01-02', '2026-01-04');
INSERT INTO ld_acct VALUES (1, 'ann', 12, '2026-01-02', '2026-01-03');
INSERT INTO ld_acct VALUES (2, 'bob', 21, '2026-01-04', '2026-01-06'), (1, 'ann', 9, '2025-12-01', '2026-01-02');
INSERT INTO ld_acct VALUES (1, 'ann', 13, '2026-02-01', 'infinity');
COPY ld_acct FROM stdin;
8	hal	80	2026-01-01 00:00:00+00	infinity
2	bob	20	2026-01-03 00:00:00+00	2026-01-08 00:00:00+00
\.
SELECT * FROM ld_acct ORDER BY id, valid_from;
SELECT * FROM ld_layout('ld_acct');

-- versions that touch without overlapping are loaded as given
INSERT INTO ld_acct VALUES (2, 'bob', 19, '2025-12-30', '2026-01-02'),
                        (2, 'bob', 21, '2026-01-04', '2026-01-06'),
                        (3, 'cy', 30, '2026-01-01', '2026-01-10'),
                        (3, 'cy', 31, '2026-01-10', 'infinity');
SELECT * FROM ld_acct WHERE id IN (2, 3) ORDER BY id, valid_from;

-- adjacent equal versions of one statement become one: equal by the type's =
-- (1.0 = 1.00), NULL equal to NULL, 'A' not equal to 'a'
CREATE TABLE ld_price (sku text, region text, amount numeric, note text,
                    valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ld_price', ARRAY['sku', 'region']);
INSERT INTO ld_price VALUES
  ('s1', 'eu', 1.0,  NULL, '2026-03-01', '2026-03-02'),
  ('s1', 'eu', 1.00, NULL, '2026-03-02', '2026-03-03'),
  ('s1', 'eu', 1,    NULL, '2026-03-03', '2026-03-05'),
  ('s1', 'eu', 2,    NULL, '2026-03-05', 'infinity'),
  ('s1', 'us', 1,    'A',  '2026-03-01', '2026-03-02'),
  ('s1', 'us', 1,    'a',  '2026-03-02', '2026-03-04'),
  ('s1', 'us', 1,    'a',  '2026-03-05', '2026-03-06'),   -- a gap: not adjacent
  ('s2', 'eu', 5,    'x',  '2026-03-01', '2026-03-02'),
  ('s2', 'eu', 5,    'x',  '2026-03-02', 'infinity');
SELECT * FROM ld_price ORDER BY sku, region, valid_from;
SELECT * FROM ld_layout('ld_price');

-- a loaded version next to stored ones with equal values: the stored ones
-- are masked and one version written in their place
INSERT INTO ld_price VALUES
  ('s1', 'us', 1, 'a', '2026-03-04', '2026-03-05'),         -- joins both neighbours
  ('s1', 'us', 1, 'A', '2026-02-20', '2026-03-01');        -- extends one backwards
SELECT * FROM ld_price WHERE sku = 's1' AND region = 'us' ORDER BY valid_from;
SELECT * FROM ld_layout('ld_price');
-- next to the open version: its sub-group would be more than half masked,
-- so it is compacted (rewritten without that row)
INSERT INTO ld_price VALUES ('s2', 'eu', 5, 'x', '2026-02-01', '2026-03-01');
SELECT * FROM ld_price WHERE sku = 's2' ORDER BY valid_from;
SELECT * FROM ld_layout('ld_price');
SELECT * FROM zipper_lake.verify('ld_price');

-- in one transaction, a later statement sees the rows of an earlier one
BEGIN;
INSERT INTO ld_price VALUES ('s3', 'eu', 7, NULL, '2026-04-01', '2026-04-03');
INSERT INTO ld_price VALUES ('s3', 'eu', 7, NULL, '2026-04-03', '2026-04-05');
INSERT INTO ld_price VALUES ('s3', 'eu', 8, NULL, '2026-04-04', 'infinity');
ROLLBACK;
BEGIN;
INSERT INTO ld_price VALUES ('s3', 'eu', 7, NULL, '2026-04-01', '2026-04-03');
SAVEPOINT s;
INSERT INTO ld_price VALUES ('s3', 'eu', 8, NULL, '2026-04-02', 'infinity');
ROLLBACK TO SAVEPOINT s;
INSERT INTO ld_price VALUES ('s3', 'eu', 7, NULL, '2026-04-03', '2026-04-05');
COMMIT;
SELECT * FROM ld_price WHERE sku = 's3' ORDER BY valid_from;

-- values too large for a page are compared by value, not by TOAST pointer
INSERT INTO ld_price VALUES ('s4', 'eu', 1, repeat('n', 100000), '2026-05-01', '2026-05-02');
INSERT INTO ld_price VALUES ('s4', 'eu', 1, repeat('n', 100000), '2026-05-02', '2026-05-03');
SELECT sku, length(note), valid_from, valid_to FROM ld_price WHERE sku = 's4';

-- a load larger than one check chunk (work_mem = 64kB: 4096 keys a chunk)
-- finds the stored neighbours of every key, in the current partition (by
-- the key directories) and in history
CREATE TABLE ld_many (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ld_many', ARRAY['id']);
INSERT INTO ld_many SELECT g, g % 7, '2026-01-10', 'infinity' FROM generate_series(1, 10000) g;
INSERT INTO ld_many SELECT g, g % 5, '2026-01-01', '2026-01-05' FROM generate_series(1, 10000) g;
SET work_mem = '64kB';
INSERT INTO ld_many SELECT g, CASE WHEN g % 2 = 0 THEN g % 5 ELSE -1 END, '2026-01-05', '2026-01-10'
  FROM generate_series(1, 10000) g;
INSERT INTO ld_many SELECT g, 0, '2026-01-07', '2026-01-08' FROM generate_series(9990, 10010) g;
SELECT id, valid_from FROM ld_many WHERE id BETWEEN 9988 AND 10012 AND valid_from = '2026-01-07' ORDER BY id;
RESET work_mem;
SELECT count(*) AS versions,
       count(*) FILTER (WHERE valid_from = '2026-01-01' AND valid_to = '2026-01-10') AS merged_back,
       count(*) FILTER (WHERE valid_from = '2026-01-05' AND valid_to = 'infinity') AS merged_forward,
       count(*) FILTER (WHERE valid_from = '2026-01-01' AND valid_to = 'infinity') AS merged_both
  FROM ld_many;
SELECT sum(row_count) AS stored, sum(masked_rows) AS masked FROM zipper_lake.inspect('ld_many');
SELECT * FROM zipper_lake.verify('ld_many');

-- rows loaded before registration are checked when registration places them
CREATE TABLE ld_early (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
INSERT INTO ld_early VALUES (1, 'a', '2026-01-01', '2026-01-05');
INSERT INTO ld_early VALUES (1, 'b', '2026-01-04', 'infinity');
SELECT zipper_lake.register('ld_early', ARRAY['id']);
SELECT count(*) FROM zipper_lake.registration WHERE tbl = 'ld_early'::regclass;
TRUNCATE ld_early;
INSERT INTO ld_early VALUES (1, 'a', '2026-01-01', '2026-01-05'), (2, 'c', '2026-01-01', 'infinity');
INSERT INTO ld_early VALUES (1, 'a', '2026-01-05', '2026-01-07'), (1, 'b', '2026-01-07', 'infinity');
SELECT zipper_lake.register('ld_early', ARRAY['id']);
SELECT * FROM ld_early ORDER BY id, valid_from;
SELECT * FROM ld_layout('ld_early');

-- keys whose hashes collide are told apart (2775 and 131913 hash alike)
CREATE TABLE ld_coll (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ld_coll', ARRAY['id']);
SELECT hashint4(2775) = hashint4(131913) AS same_hash;
INSERT INTO ld_coll VALUES (2775, 'a', '2026-01-01', '2026-01-05'),
                           (131913, 'a', '2026-01-02', '2026-01-04'),
                           (2775, 'a', '2026-01-05', '2026-01-08'),
                           (131913, 'b', '2026-01-04', 'infinity'),
                           (131913, 'a', '2026-01-01', '2026-01-02');
SELECT * FROM ld_coll ORDER BY id, valid_from;
INSERT INTO ld_coll VALUES (131913, 'c', '2026-01-07', '2026-01-08');
INSERT INTO ld_coll VALUES (2775, 'a', '2026-01-08', '2026-01-09'),
                           (131913, 'c', '2025-12-01', '2026-01-01');
SELECT * FROM ld_coll ORDER BY id, valid_from;
SELECT * FROM zipper_lake.verify('ld_coll');
-- a column added in the transaction of an earlier load counts in the next
BEGIN;
INSERT INTO ld_coll VALUES (7, 'q', '2026-02-01', '2026-02-02');
ALTER TABLE ld_coll ADD COLUMN extra int;
INSERT INTO ld_coll VALUES (7, 'q', '2026-02-02', '2026-02-03', 1),
                           (7, 'q', '2026-02-03', '2026-02-04', 1),
                           (7, 'q', '2026-01-31', '2026-02-01', NULL);
COMMIT;
SELECT * FROM ld_coll WHERE id = 7 ORDER BY valid_from;

-- key types need hashing only, no ordering
CREATE TABLE ld_by_xid (id xid, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ld_by_xid', ARRAY['id']);
INSERT INTO ld_by_xid VALUES ('7', '2026-01-01', '2026-01-02'), ('7', '2026-01-02', 'infinity');
INSERT INTO ld_by_xid VALUES ('7', '2026-01-05', '2026-01-06');
SELECT * FROM ld_by_xid;

-- INSERT ... ON CONFLICT is refused before anything is written, also in a
-- WITH query, a prepared statement, a function, and through a partitioned table
SELECT count(*) FROM ld_acct;
INSERT INTO ld_acct VALUES (20, 'x', 1, '2026-01-01', 'infinity') ON CONFLICT DO NOTHING;
INSERT INTO ld_acct VALUES (20, 'x', 1, '2026-01-01', 'infinity') ON CONFLICT (id) DO UPDATE SET owner = 'y';
WITH w AS (INSERT INTO ld_acct VALUES (20, 'x', 1, '2026-01-01', 'infinity') ON CONFLICT DO NOTHING RETURNING id)
SELECT * FROM w;
PREPARE ld_ins_nothing AS INSERT INTO ld_acct VALUES (20, 'x', 1, '2026-01-01', 'infinity') ON CONFLICT DO NOTHING;
EXECUTE ld_ins_nothing;
CREATE FUNCTION ld_ins_fn() RETURNS void LANGUAGE sql AS
$$ INSERT INTO ld_acct VALUES (20, 'x', 1, '2026-01-01', 'infinity') ON CONFLICT DO NOTHING $$;
SELECT ld_ins_fn();
CREATE TABLE ld_parted (id int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  PARTITION BY RANGE (id);
CREATE TABLE ld_parted_z PARTITION OF ld_parted FOR VALUES FROM (0) TO (100) USING zipper_lake;
SELECT zipper_lake.register('ld_parted_z', ARRAY['id']);
INSERT INTO ld_parted VALUES (1, '2026-01-01', 'infinity') ON CONFLICT DO NOTHING;
INSERT INTO ld_parted VALUES (1, '2026-01-01', 'infinity');
SELECT count(*) FROM ld_parted;
SELECT count(*) FROM ld_acct;
-- other tables keep their ON CONFLICT
CREATE TABLE ld_plain (id int PRIMARY KEY);
INSERT INTO ld_plain VALUES (1), (1) ON CONFLICT DO NOTHING;
WITH w AS (INSERT INTO ld_plain VALUES (1) ON CONFLICT (id) DO UPDATE SET id = 2 RETURNING id)
SELECT * FROM w;

SELECT * FROM zipper_lake.verify('ld_acct');
SELECT * FROM zipper_lake.verify('ld_early');

-- rows stored before ADD COLUMN ... DEFAULT hold the default: a loaded
-- neighbour with NULL there differs, one with the default merges
CREATE TABLE ld_added (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ld_added', ARRAY['id']);
INSERT INTO ld_added VALUES (1, 'a', '2026-01-01', '2026-01-03'), (2, 'a', '2026-01-01', '2026-01-03');
ALTER TABLE ld_added ADD COLUMN c int DEFAULT 5;
INSERT INTO ld_added VALUES (1, 'a', '2026-01-03', '2026-01-05', NULL);
INSERT INTO ld_added VALUES (2, 'a', '2026-01-03', '2026-01-05', 5);
SELECT id, v, c, valid_from, valid_to FROM ld_added ORDER BY id, valid_from;
SELECT * FROM zipper_lake.verify('ld_added');

-- generated columns follow from the others: a generated column that reads
-- the period does not keep equal neighbours apart, and is computed again
CREATE TABLE ld_gen (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL,
                     dur interval GENERATED ALWAYS AS (valid_to - valid_from) STORED) USING zipper_lake;
SELECT zipper_lake.register('ld_gen', ARRAY['id']);
INSERT INTO ld_gen (id, v, valid_from, valid_to)
  VALUES (1, 'a', '2026-01-01', '2026-01-03'), (1, 'a', '2026-01-03', '2026-01-08'),
         (2, 'a', '2026-01-01', '2026-01-03'), (2, 'a', '2026-01-05', '2026-01-08');
INSERT INTO ld_gen (id, v, valid_from, valid_to) VALUES (2, 'a', '2026-01-03', '2026-01-05');
SELECT * FROM ld_gen ORDER BY id, valid_from;
DROP TABLE ld_added, ld_gen;

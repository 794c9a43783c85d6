-- The zipper_lake table access method: registration, placement, scans, DDL.
SET timezone = 'UTC';

-- a helper that shows the layout with stable numbering
CREATE FUNCTION layout(t regclass) RETURNS TABLE (
    partition_end date, file_group bigint, window_start timestamptz,
    first_start timestamptz, last_start timestamptz, row_count bigint,
    masked_rows bigint, blocks int)
LANGUAGE sql AS $$
    SELECT partition_end, dense_rank() OVER (ORDER BY file_group), window_start,
           first_start, last_start, row_count, masked_rows, blocks
      FROM zipper_lake.inspect(t)
     ORDER BY partition_end NULLS FIRST, window_start, file_group, sub_group
$$;

CREATE TABLE account (id bigint, name text, balance numeric,
                      valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('account', key => ARRAY['id']);
SELECT tbl, key, valid_from, valid_to, partition_unit, history_group_span,
       current_group_span, max_subgroups, open_end, time_zone
  FROM zipper_lake.registration WHERE tbl = 'account'::regclass;

-- placement: partition = date of valid_to, window = day of valid_from,
-- rows inside a sub-group sorted by valid_from whatever the insert order
INSERT INTO account VALUES
  (1, 'ann', 10, '2026-01-01 08:00', '2026-01-03 10:00'),
  (2, 'bob', 20, '2026-01-02 09:00', 'infinity'),
  (1, 'ann', 11, '2026-01-03 10:00', 'infinity'),
  (3, 'cy',  30, '2026-01-02 07:00', 'infinity'),
  (4, 'dee', 40, '2026-01-01 23:59', '2026-01-03 00:00');
SELECT * FROM layout('account');
SELECT * FROM account ORDER BY id, valid_from;
SELECT * FROM zipper_lake.verify('account');

-- COPY goes through the same buffered, sorted placement
COPY account FROM stdin;
5	eve	50	2026-01-02 12:00:00+00	infinity
6	fay	60	2026-01-02 01:00:00+00	infinity
7	gus	70	2026-01-01 00:00:00+00	2026-01-02 00:00:00+00
\.
SELECT * FROM layout('account');
SELECT count(*), sum(balance) FROM account;

-- rollover: in the current partition a file group closes at max_subgroups
CREATE TABLE roll (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('roll', ARRAY['id'], max_subgroups => 2);
INSERT INTO roll VALUES (1, 'a', '2026-02-01 01:00', 'infinity');
INSERT INTO roll VALUES (2, 'b', '2026-02-01 02:00', 'infinity');
INSERT INTO roll VALUES (3, 'c', '2026-02-01 03:00', 'infinity');
INSERT INTO roll VALUES (4, 'd', '2026-02-01 04:00', '2026-02-05'), (5, 'e', '2026-02-01 05:00', '2026-02-05');
INSERT INTO roll VALUES (6, 'f', '2026-02-01 06:00', '2026-02-05');
INSERT INTO roll VALUES (7, 'g', '2026-02-01 07:00', '2026-02-05');
SELECT * FROM layout('roll');

-- month partitions, week-long history windows, cut in the table's time zone
CREATE TABLE monthly (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('monthly', ARRAY['id'], partition_unit => 'month',
                            history_group_span => '7 days', current_group_span => '1 month',
                            time_zone => 'Asia/Shanghai');
INSERT INTO monthly VALUES
  (1, 'a', '2026-03-01 00:00+08', '2026-03-31 23:30+08'),  -- ends in March (Shanghai)
  (2, 'b', '2026-03-01 00:00+08', '2026-03-31 16:30+00'),  -- April 1st 00:30 in Shanghai
  (3, 'c', '2026-03-09 12:00+08', 'infinity'),
  (4, 'd', '2026-03-31 23:00+08', 'infinity');
SELECT * FROM layout('monthly');
SELECT * FROM zipper_lake.verify('monthly');

-- timestamp and date period columns
CREATE TABLE dated (id int, v text, valid_from date NOT NULL, valid_to date NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('dated', ARRAY['id'], open_end => '9999-12-31');
INSERT INTO dated VALUES (1, 'a', '2026-01-01', '2026-01-10'), (1, 'b', '2026-01-10', '9999-12-31');
SELECT partition_end, row_count FROM zipper_lake.inspect('dated') ORDER BY 1;
SELECT * FROM zipper_lake.verify('dated');

-- big values are toasted into the table's TOAST relation
INSERT INTO account VALUES (8, repeat('x', 100000), 1, '2026-01-05', 'infinity');
SELECT id, length(name), md5(name) = md5(repeat('x', 100000)) AS same FROM account WHERE id = 8;

-- the rows are in the table's own relation; the catalog holds only metadata
SELECT pg_relation_size('account') >= 8192 * (1 + (SELECT sum(blocks) FROM zipper_lake.inspect('account'))) AS rows_in_relation;
SELECT pg_relation_size('zipper_lake.subgroup') < pg_relation_size('account') AS metadata_is_small;

-- ANALYZE samples real rows
ANALYZE account;
SELECT reltuples FROM pg_class WHERE oid = 'account'::regclass;
SELECT attname, n_distinct FROM pg_stats WHERE tablename = 'account' AND attname = 'id';
EXPLAIN (COSTS OFF) SELECT * FROM account WHERE id = 1;

-- VACUUM reports instead of failing
VACUUM account;
VACUUM (VERBOSE, PROCESS_TOAST false) roll;

-- TRUNCATE is transactional
BEGIN;
TRUNCATE account;
SELECT count(*) FROM account;
SELECT count(*) FROM zipper_lake.inspect('account');
ROLLBACK;
SELECT count(*) FROM account;
SELECT * FROM zipper_lake.verify('account');

-- committed TRUNCATE leaves an empty table that keeps working
TRUNCATE roll;
SELECT count(*) FROM roll;
INSERT INTO roll VALUES (1, 'a', '2026-02-01 01:00', 'infinity');
SELECT * FROM layout('roll');

-- a transaction reads its own rows; rolled-back rows leave no trace
BEGIN;
INSERT INTO roll VALUES (2, 'b', '2026-02-02', 'infinity');
SELECT count(*) FROM roll;
ROLLBACK;
SELECT count(*) FROM roll;

-- a failed subtransaction drops its buffered rows, an outer one keeps its own
BEGIN;
INSERT INTO roll VALUES (3, 'c', '2026-02-03', 'infinity');
SAVEPOINT s;
INSERT INTO roll VALUES (4, 'd', '2026-02-04', 'infinity');
ROLLBACK TO SAVEPOINT s;
INSERT INTO roll VALUES (5, 'e', '2026-02-05', 'infinity');
COMMIT;
SELECT id FROM roll ORDER BY id;

-- rows loaded before registration are placed when the table is registered
CREATE TABLE late_reg (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
INSERT INTO late_reg VALUES (2, 'b', '2026-01-02', 'infinity'), (1, 'a', '2026-01-01', '2026-01-02');
SELECT partition_end IS NULL AS unplaced, row_count FROM zipper_lake.inspect('late_reg');
SELECT check_name FROM zipper_lake.verify('late_reg');
SELECT zipper_lake.register('late_reg', ARRAY['id']);
SELECT * FROM layout('late_reg');
SELECT * FROM late_reg ORDER BY id;
SELECT * FROM zipper_lake.verify('late_reg');
-- also inside the transaction that loaded them (pg_restore --single-transaction)
CREATE TABLE late_reg2 (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
BEGIN;
INSERT INTO late_reg2 VALUES (1, 'a', '2026-01-01', 'infinity');
SELECT zipper_lake.register('late_reg2', ARRAY['id']);
INSERT INTO late_reg2 VALUES (2, 'b', '2026-01-01', '2026-01-03');
COMMIT;
SELECT partition_end, row_count FROM zipper_lake.inspect('late_reg2');
SELECT * FROM zipper_lake.verify('late_reg2');
-- and in a repeatable-read or serializable transaction
CREATE TABLE late_reg3 (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
BEGIN ISOLATION LEVEL REPEATABLE READ;
INSERT INTO late_reg3 VALUES (1, 'a', '2026-01-01', 'infinity');
SELECT zipper_lake.register('late_reg3', ARRAY['id']);
COMMIT;
CREATE TABLE reg_src (id int PRIMARY KEY, v text);
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT zipper_lake.create_table('late_reg4', 'reg_src');
INSERT INTO late_reg4 VALUES (1, 'a', '2026-01-01', 'infinity');
COMMIT;
SELECT partition_end, row_count FROM zipper_lake.inspect('late_reg3');
SELECT count(*) FROM late_reg4;

-- create_table derives a zipper table from a source table
CREATE TABLE customer_src (cid int, region text, name text, score int, PRIMARY KEY (region, cid));
SELECT zipper_lake.create_table('customer_hist', 'customer_src', max_subgroups => 8);
\d customer_hist
SELECT key, max_subgroups FROM zipper_lake.registration WHERE tbl = 'customer_hist'::regclass;

-- DROP TABLE removes registration and metadata
SELECT count(*) > 0 AS has_metadata FROM zipper_lake.storage WHERE relid = 'roll'::regclass;
CREATE TEMP TABLE dropped AS SELECT 'roll'::regclass::oid AS relid;
DROP TABLE roll;
SELECT count(*) FROM zipper_lake.storage s JOIN dropped d USING (relid);
SELECT count(*) FROM zipper_lake.registration r JOIN dropped d ON r.tbl::oid = d.relid;
SELECT count(*) FROM zipper_lake.subgroup g
  WHERE NOT EXISTS (SELECT 1 FROM zipper_lake.storage s WHERE s.storage_id = g.storage_id);

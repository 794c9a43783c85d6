-- What INSERT refuses, apply refuses too (README "Guarantees"): type
-- modifiers, domains, NOT NULL, CHECK, generated columns, partition bounds;
-- arguments that name nothing; and each error names the right thing.
SET timezone = 'UTC';
\set SHOW_CONTEXT errors

-- type modifiers: a char(3) key stays char(3), so different keys never merge
CREATE TABLE ig_ck (code char(3), v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ig_ck', key => ARRAY['code']);
CREATE TABLE ig_ckch (code char(3), v int, change_time timestamptz);
INSERT INTO ig_ckch VALUES ('ABC', 1, '2024-01-01'), ('AXY', 2, '2024-01-02');
SELECT * FROM zipper_lake.apply_changes('ig_ck', 'ig_ckch');
SELECT code, v, valid_from, valid_to FROM ig_ck ORDER BY code, valid_from;
-- a value too long for char(3) is refused as INSERT refuses it
CREATE TABLE ig_ckch_text (code text, v int, change_time timestamptz);
INSERT INTO ig_ckch_text VALUES ('ABCD', 1, '2024-01-03');
SELECT * FROM zipper_lake.apply_changes('ig_ck', 'ig_ckch_text');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO ig_ck VALUES ('ABCD', 1, '2024-01-03', 'infinity');
\echo :LAST_ERROR_SQLSTATE

-- bit(n), varchar(n), numeric(p,s), timestamp(p) and domains: rounded or
-- refused exactly as INSERT ... SELECT from the same changes would
CREATE DOMAIN ig_positive_int AS int CHECK (VALUE > 0);
CREATE TABLE ig_tm (id int, b bit(4), vc varchar(3), n numeric(5,2), ts timestamp(0), d ig_positive_int,
                 valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ig_tm', ARRAY['id']);
CREATE TABLE ig_tm_ref (LIKE ig_tm);
CREATE TABLE ig_tmch (id int, b varbit, vc text, n numeric, ts timestamp, d int, change_time timestamptz);
INSERT INTO ig_tmch VALUES (1, B'1010', 'abc', 1.005, '2024-01-01 10:00:00.7', 5, '2024-01-01');
SELECT * FROM zipper_lake.apply_changes('ig_tm', 'ig_tmch');
INSERT INTO ig_tm_ref SELECT id, b, vc, n, ts, d, change_time, 'infinity' FROM ig_tmch;
SELECT id, b, vc, n, ts, d FROM ig_tm EXCEPT SELECT id, b, vc, n, ts, d FROM ig_tm_ref;
SELECT id, b, vc, n, ts, d FROM ig_tm;
-- each bad value: the same error from apply and from INSERT, nothing applied
CREATE TABLE ig_tmbad (LIKE ig_tmch);
INSERT INTO ig_tmbad VALUES (1, B'10101', 'abc', 1, '2024-01-01', 5, '2024-01-02');
SELECT * FROM zipper_lake.apply_changes('ig_tm', 'ig_tmbad');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO ig_tm_ref SELECT id, b, vc, n, ts, d, change_time, 'infinity' FROM ig_tmbad;
\echo :LAST_ERROR_SQLSTATE
UPDATE ig_tmbad SET b = B'1010', vc = 'abcd';
SELECT * FROM zipper_lake.apply_changes('ig_tm', 'ig_tmbad');
\echo :LAST_ERROR_SQLSTATE
UPDATE ig_tmbad SET vc = 'abc', n = 1000;
SELECT * FROM zipper_lake.apply_changes('ig_tm', 'ig_tmbad');
\echo :LAST_ERROR_SQLSTATE
UPDATE ig_tmbad SET n = 1, d = 0;
SELECT * FROM zipper_lake.apply_changes('ig_tm', 'ig_tmbad');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO ig_tm_ref SELECT id, b, vc, n, ts, d, change_time, 'infinity' FROM ig_tmbad;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM ig_tm;
-- the same through apply_snapshot
CREATE TABLE ig_tmimage (LIKE ig_tmch);
ALTER TABLE ig_tmimage DROP COLUMN change_time;
INSERT INTO ig_tmimage VALUES (1, B'1010', 'abcd', 1, '2024-01-01', 5);
SELECT * FROM zipper_lake.apply_snapshot('ig_tm', 'ig_tmimage', '2024-01-05');
\echo :LAST_ERROR_SQLSTATE

-- NOT NULL and CHECK constraints, generated columns
CREATE TABLE ig_acct (id int, balance numeric NOT NULL CHECK (balance >= 0),
                   doubled numeric GENERATED ALWAYS AS (balance * 2) STORED,
                   open boolean GENERATED ALWAYS AS (valid_to = 'infinity') STORED,
                   valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL,
                   CHECK (valid_from + interval '1 day' <= valid_to))
  USING zipper_lake;
SELECT zipper_lake.register('ig_acct', ARRAY['id']);
-- changes without the generated columns are accepted; they are computed
CREATE TABLE ig_acct_ch (id int, balance numeric, change_time timestamptz);
INSERT INTO ig_acct_ch VALUES (1, 10, '2024-01-01'), (1, 20, '2024-01-03'), (2, 5, '2024-01-01');
SELECT * FROM zipper_lake.apply_changes('ig_acct', 'ig_acct_ch');
SELECT * FROM ig_acct ORDER BY id, valid_from;
-- a value given for a generated column is ignored, as the column is computed
CREATE TABLE ig_acct_gen (id int, balance numeric, doubled numeric, open boolean, change_time timestamptz);
INSERT INTO ig_acct_gen VALUES (2, 7, 999, false, '2024-01-04');
SELECT * FROM zipper_lake.apply_changes('ig_acct', 'ig_acct_gen');
SELECT * FROM ig_acct WHERE id = 2 ORDER BY valid_from;
-- NOT NULL and CHECK on the values
TRUNCATE ig_acct_ch;
INSERT INTO ig_acct_ch VALUES (1, NULL, '2024-01-05');
SELECT * FROM zipper_lake.apply_changes('ig_acct', 'ig_acct_ch');
\echo :LAST_ERROR_SQLSTATE
TRUNCATE ig_acct_ch;
INSERT INTO ig_acct_ch VALUES (1, -1, '2024-01-05');
SELECT * FROM zipper_lake.apply_changes('ig_acct', 'ig_acct_ch');
\echo :LAST_ERROR_SQLSTATE
-- a CHECK on the period, broken only by the copy a late change splits off
TRUNCATE ig_acct_ch;
INSERT INTO ig_acct_ch VALUES (1, 15, '2024-01-01 12:00');
SELECT * FROM zipper_lake.apply_changes('ig_acct', 'ig_acct_ch');
\echo :LAST_ERROR_SQLSTATE
-- a change that closes the open version: the closed copy's generated
-- column "open" is computed again for its new valid_to
TRUNCATE ig_acct_ch;
INSERT INTO ig_acct_ch VALUES (1, 15, '2024-01-04 12:00');
SELECT * FROM zipper_lake.apply_changes('ig_acct', 'ig_acct_ch');
SELECT * FROM ig_acct ORDER BY id, valid_from;
SELECT * FROM zipper_lake.verify('ig_acct');

-- partition bounds: a zipper table that is a partition keeps its bounds
CREATE TABLE ig_by_region (id int, region text, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  PARTITION BY LIST (region);
CREATE TABLE ig_by_region_eu PARTITION OF ig_by_region FOR VALUES IN ('eu') USING zipper_lake;
SELECT zipper_lake.register('ig_by_region_eu', ARRAY['id']);
CREATE TABLE ig_region_ch (id int, region text, v int, change_time timestamptz);
INSERT INTO ig_region_ch VALUES (1, 'eu', 1, '2024-01-01');
SELECT * FROM zipper_lake.apply_changes('ig_by_region_eu', 'ig_region_ch');
INSERT INTO ig_region_ch VALUES (2, 'us', 1, '2024-01-01');
SELECT * FROM zipper_lake.apply_changes('ig_by_region_eu', 'ig_region_ch');
\echo :LAST_ERROR_SQLSTATE
SELECT id, region, v FROM ig_by_region ORDER BY id;
-- a parent partitioned by a period column cannot hold a zipper table
CREATE TABLE ig_by_end (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  PARTITION BY RANGE (valid_to);
CREATE TABLE ig_by_end_all PARTITION OF ig_by_end FOR VALUES FROM (MINVALUE) TO (MAXVALUE) USING zipper_lake;
SELECT zipper_lake.register('ig_by_end_all', ARRAY['id']);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE ig_by_start (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  PARTITION BY RANGE (date_trunc('year', valid_from AT TIME ZONE 'UTC'));
CREATE TABLE ig_by_start_all PARTITION OF ig_by_start FOR VALUES FROM (MINVALUE) TO (MAXVALUE) USING zipper_lake;
SELECT zipper_lake.register('ig_by_start_all', ARRAY['id']);
\echo :LAST_ERROR_SQLSTATE

-- the op column: by default "op" if the changes have one; a ig_named one must exist
CREATE TABLE ig_opt (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ig_opt', ARRAY['id']);
CREATE TABLE ig_opt_ch (id int, v int, change_time timestamptz, op text, operation text);
INSERT INTO ig_opt_ch VALUES (1, 1, '2024-01-01', 'I', 'I'), (1, NULL, '2024-01-02', 'D', 'U');
SELECT * FROM zipper_lake.apply_changes('ig_opt', 'ig_opt_ch', op => 'opration');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM zipper_lake.apply_changes('ig_opt', 'ig_opt_ch');
SELECT id, v, valid_from, valid_to FROM ig_opt ORDER BY valid_from;

-- verify() names its own columns apart from the table's: key columns
-- called n, f, t and next_f are no ambiguous references
CREATE TABLE ig_names (n int, f int, t text, next_f int, v text,
                       valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ig_names', ARRAY['n', 'f', 't', 'next_f']);
INSERT INTO ig_names VALUES (1, 2, 'x', 3, 'a', '2024-01-01', '2024-01-02'), (1, 2, 'x', 3, 'b', '2024-01-02', 'infinity');
SELECT * FROM zipper_lake.verify('ig_names');
DROP TABLE ig_names;

-- verify() reads only the zipper table, not inheritance children
CREATE TABLE ig_opt_child () INHERITS (ig_opt);
INSERT INTO ig_opt_child VALUES (1, 5, '2023-12-01', 'infinity');
SELECT * FROM zipper_lake.verify('ig_opt');

-- apply_snapshot: an empty image is an error unless allowed
CREATE TABLE ig_opt_image (id int, v int);
SELECT * FROM zipper_lake.apply_snapshot('ig_opt', 'ig_opt_image', '2024-02-01');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM zipper_lake.apply_snapshot('ig_opt', 'ig_opt_image', '2024-02-01', deletes => false);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM zipper_lake.apply_snapshot('ig_opt', 'ig_opt_image', '2024-02-01', allow_empty => true);
-- its time is checked as a change's, although no row carries it: an
-- infinite one, or one at or past the open end, changes nothing (neither
-- the versions nor the change record's newest change)
CREATE TABLE ig_end (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ig_end', ARRAY['id'], open_end => '9999-12-31');
CREATE TABLE ig_end_ch (id int, v int, change_time timestamptz);
INSERT INTO ig_end_ch VALUES (1, 1, '2024-01-01');
SELECT * FROM zipper_lake.apply_changes('ig_end', 'ig_end_ch');
SELECT * FROM zipper_lake.apply_snapshot('ig_end', 'ig_opt_image', '9999-12-31', allow_empty => true);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM zipper_lake.apply_snapshot('ig_end', 'ig_opt_image', 'infinity', allow_empty => true);
SELECT * FROM zipper_lake.apply_snapshot('ig_opt', 'ig_opt_image', '-infinity', allow_empty => true);
SELECT id, v, valid_from, valid_to FROM ig_end;
SELECT newest FROM zipper_lake._record_rows('ig_end') WHERE piece IS NULL;
SELECT * FROM zipper_lake.apply_changes('ig_end', 'ig_end_ch');

-- errors that name the right thing
SELECT zipper_lake.register(NULL, ARRAY['id']);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE ig_named (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ig_named', ARRAY[NULL]);
\echo :LAST_ERROR_SQLSTATE
SELECT zipper_lake.register('ig_named', ARRAY['id', NULL]);
\echo :LAST_ERROR_SQLSTATE
SELECT zipper_lake.register('ig_named', ARRAY['id'], time_zone => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT zipper_lake.create_table('x', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT zipper_lake.create_table(NULL, 'ig_opt_image');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE ig_seq_ch (id int, v int, change_time timestamptz, s text);
INSERT INTO ig_seq_ch VALUES (1, 1, '2024-03-01', 'a');
SELECT * FROM zipper_lake.apply_changes('ig_opt', 'ig_seq_ch', seq => 's');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE ig_time_ch (id int, v int, change_time text);
SELECT * FROM zipper_lake.apply_changes('ig_opt', 'ig_time_ch');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM zipper_lake.registration WHERE tbl = 'ig_named'::regclass;

-- SET ACCESS METHOD heap: the rows move, the metadata goes
DROP TABLE ig_opt_child;
ALTER TABLE ig_opt SET ACCESS METHOD heap;
SELECT id, v, valid_from, valid_to FROM ig_opt ORDER BY valid_from;
SELECT count(*) FROM zipper_lake.registration WHERE tbl = 'ig_opt'::regclass;
SELECT count(*) FROM zipper_lake.storage WHERE relid = 'ig_opt'::regclass;

-- inspect() does not show what row-level security hides
CREATE ROLE regress_zl_rls_reader;
ALTER TABLE ig_ck ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_abc ON ig_ck USING (code = 'ABC');
GRANT SELECT ON ig_ck TO regress_zl_rls_reader;
SET ROLE regress_zl_rls_reader;
SELECT count(*) FROM ig_ck;
SELECT count(*) FROM zipper_lake.inspect('ig_ck');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT count(*) FROM zipper_lake.inspect('ig_ck');
DROP POLICY only_abc ON ig_ck;
REVOKE ALL ON ig_ck FROM regress_zl_rls_reader;
DROP ROLE regress_zl_rls_reader;

-- timestamp(p) period columns: change times are rounded as assigning them
-- would round them (so a dump of the table loads again)
CREATE TABLE ig_prec (id int, v text, valid_from timestamp(0) NOT NULL, valid_to timestamp(0) NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ig_prec', ARRAY['id']);
CREATE TABLE ig_prec_ch (id int, v text, change_time timestamp);
INSERT INTO ig_prec_ch VALUES (1, 'a', '2026-01-01 10:00'), (1, 'b', '2026-01-01 10:00:01.4');
SELECT * FROM zipper_lake.apply_changes('ig_prec', 'ig_prec_ch');
SELECT * FROM ig_prec ORDER BY valid_from;
-- two times that round to one second are one instant
TRUNCATE ig_prec_ch;
INSERT INTO ig_prec_ch VALUES (2, 'a', '2026-01-02 10:00:00.2'), (2, 'b', '2026-01-02 10:00:00.3');
SELECT * FROM zipper_lake.apply_changes('ig_prec', 'ig_prec_ch');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE ig_prec_img (id int, v text);
INSERT INTO ig_prec_img VALUES (1, 'c');
SELECT * FROM zipper_lake.apply_snapshot('ig_prec', 'ig_prec_img', '2026-01-03 10:00:00.6', deletes => false);
SELECT * FROM ig_prec ORDER BY valid_from;
-- period columns of two precisions; generated key or period columns
CREATE TABLE ig_prec2 (id int, valid_from timestamp(0) NOT NULL, valid_to timestamp(3) NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ig_prec2', ARRAY['id']);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE ig_gen_to (id int, valid_from timestamp NOT NULL,
                        valid_to timestamp NOT NULL GENERATED ALWAYS AS (valid_from + interval '1 day') STORED)
  USING zipper_lake;
SELECT zipper_lake.register('ig_gen_to', ARRAY['id']);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE ig_gen_key (code text, id int GENERATED ALWAYS AS (length(code)) STORED,
                         valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ig_gen_key', ARRAY['id']);
\echo :LAST_ERROR_SQLSTATE

-- the batch is read without a parallel plan, so a domain check that may not
-- run in parallel mode (it takes a sequence value) converts the batch's rows
CREATE SEQUENCE ig_checks;
CREATE FUNCTION ig_counted_check(v int) RETURNS bool LANGUAGE plpgsql AS
$$ BEGIN PERFORM nextval('public.ig_checks'); RETURN v > 0; END $$;
CREATE DOMAIN ig_counted_int AS int CHECK (ig_counted_check(VALUE));
CREATE TABLE ig_par (id int, v ig_counted_int, valid_from timestamptz NOT NULL,
                     valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ig_par', ARRAY['id']);
CREATE TABLE ig_par_ch (id int, v int, change_time timestamptz);
INSERT INTO ig_par_ch VALUES (1, 5, '2024-01-01'), (2, 7, '2024-01-01');
SET force_parallel_mode = on;
SELECT changes, inserted FROM zipper_lake.apply_changes('ig_par', 'ig_par_ch');
RESET force_parallel_mode;
SELECT id, v FROM ig_par ORDER BY id;

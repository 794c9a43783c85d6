-- Indexes (README "Indexes"): btree, hash, GiST, GIN, expressions and
-- predicates; index scans and bitmap scans return what the sequential scan
-- returns; writes keep the indexes; VACUUM removes the entries of hidden rows
SET timezone = 'UTC';
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
RESET client_min_messages;
CREATE TABLE ix (id int, branch int, status text, valid_from timestamptz, valid_to timestamptz) USING zipper_lake;
SELECT zipper_lake.register('ix', key => '{id}', partition_unit => 'day');
CREATE TABLE ix_ch (id int, branch int, status text, change_time timestamptz);
INSERT INTO ix_ch SELECT g, g % 17, CASE WHEN g % 5 = 0 THEN 'frozen' ELSE 'open' END, '2026-01-01'
  FROM generate_series(1, 3000) g;
SELECT changes FROM zipper_lake.apply_changes('ix', 'ix_ch');

CREATE INDEX ix_branch ON ix (branch);
CREATE INDEX ix_hash ON ix USING hash (id);
CREATE INDEX ix_period ON ix USING gist (tstzrange(valid_from, valid_to));
CREATE INDEX ix_gin ON ix USING gin ((ARRAY[branch, id]));
CREATE INDEX ix_frozen ON ix (branch) WHERE status = 'frozen';
SELECT relname, indcheckxmin FROM pg_index JOIN pg_class ON oid = indexrelid
 WHERE indrelid = 'ix'::regclass ORDER BY 1;

-- writes after CREATE INDEX keep them: closed versions go to columnar history
TRUNCATE ix_ch;
INSERT INTO ix_ch SELECT g, (g + 1) % 17, 'frozen', '2026-01-02' FROM generate_series(1, 3000, 3) g;
SELECT changes FROM zipper_lake.apply_changes('ix', 'ix_ch');
TRUNCATE ix_ch;
INSERT INTO ix_ch SELECT g, 99, 'open', '2026-01-03' FROM generate_series(2, 3000, 7) g;
SELECT changes FROM zipper_lake.apply_changes('ix', 'ix_ch');

-- the same answers by every path: sequential (reference), index, bitmap
CREATE FUNCTION ix_answers() RETURNS TABLE (q text, rows bigint, checksum bigint)
LANGUAGE sql AS $$
  SELECT 'branch = 3', count(*), sum(id) FROM ix WHERE branch = 3
  UNION ALL SELECT 'branch = 99', count(*), sum(id) FROM ix WHERE branch = 99
  UNION ALL SELECT 'branch >= 50', count(*), sum(id) FROM ix WHERE branch >= 50
  UNION ALL SELECT 'id = 1234', count(*), sum(branch) FROM ix WHERE id = 1234
  UNION ALL SELECT 'period @> day 2', count(*), sum(id) FROM ix
             WHERE tstzrange(valid_from, valid_to) @> timestamptz '2026-01-02 12:00'
  UNION ALL SELECT 'gin @> 5', count(*), sum(id) FROM ix WHERE ARRAY[branch, id] @> ARRAY[5]
  UNION ALL SELECT 'frozen branch 4', count(*), sum(id) FROM ix WHERE status = 'frozen' AND branch = 4
$$;
SET enable_indexscan = off; SET enable_bitmapscan = off;
CREATE TEMP TABLE ix_reference AS SELECT * FROM ix_answers();
RESET enable_indexscan; RESET enable_bitmapscan;
SET enable_seqscan = off; SET zipper_lake.enable_pruning = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM ix WHERE branch = 3;
SELECT * FROM ix_answers() EXCEPT SELECT * FROM ix_reference;
RESET enable_bitmapscan; SET enable_indexscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM ix WHERE ARRAY[branch, id] @> ARRAY[5];
SELECT * FROM ix_answers() EXCEPT SELECT * FROM ix_reference;
RESET enable_indexscan;
SELECT * FROM ix_reference ORDER BY q;
-- never an index-only scan: the table keeps no visibility map
EXPLAIN (COSTS OFF) SELECT branch FROM ix WHERE branch = 3;
RESET enable_seqscan; RESET zipper_lake.enable_pruning;

-- amcheck finds every visible row in every btree
SELECT bt_index_check('ix_branch', true), bt_index_check('ix_frozen', true);

-- VACUUM compacts the current partition (new TIDs) and removes the entries
-- of hidden rows; the answers stay
VACUUM ix;
VACUUM ix;
SELECT bt_index_check('ix_branch', true), bt_index_check('ix_frozen', true);
SET enable_seqscan = off; SET zipper_lake.enable_pruning = off;
SELECT * FROM ix_answers() EXCEPT SELECT * FROM ix_reference;
RESET enable_seqscan; RESET zipper_lake.enable_pruning;

-- the answers after every other path, compared with a sequential scan each
CREATE FUNCTION ix_paths_agree() RETURNS TABLE (path text, differences bigint)
LANGUAGE plpgsql AS $$
DECLARE
  n bigint;
BEGIN
  SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off;
  CREATE TEMP TABLE ix_seq AS SELECT * FROM ix_answers();
  SET LOCAL enable_seqscan = off; SET LOCAL zipper_lake.enable_pruning = off;
  SET LOCAL enable_indexscan = on;
  SELECT count(*) INTO n FROM ((SELECT * FROM ix_answers() EXCEPT SELECT * FROM ix_seq)
                               UNION ALL (SELECT * FROM ix_seq EXCEPT SELECT * FROM ix_answers())) d;
  path := 'index'; differences := n; RETURN NEXT;
  SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = on;
  SELECT count(*) INTO n FROM ((SELECT * FROM ix_answers() EXCEPT SELECT * FROM ix_seq)
                               UNION ALL (SELECT * FROM ix_seq EXCEPT SELECT * FROM ix_answers())) d;
  path := 'bitmap'; differences := n; RETURN NEXT;
  DROP TABLE ix_seq;
END $$;

-- late changes (into history and before the first version), in one batch
TRUNCATE ix_ch;
INSERT INTO ix_ch SELECT g, 50 + g % 3, 'late', timestamptz '2025-12-31' FROM generate_series(1, 3000, 11) g
UNION ALL SELECT g, 60, 'late', timestamptz '2026-01-02 06:00' FROM generate_series(3, 3000, 13) g;
SELECT changes, late FROM zipper_lake.apply_changes('ix', 'ix_ch');
SELECT * FROM ix_paths_agree();
-- inside a transaction, and after it rolled back
BEGIN;
TRUNCATE ix_ch;
INSERT INTO ix_ch SELECT g, 3, 'open', '2026-01-04' FROM generate_series(1, 3000, 2) g;
SELECT changes FROM zipper_lake.apply_changes('ix', 'ix_ch');
SELECT * FROM ix_paths_agree();
ROLLBACK;
SELECT * FROM ix_paths_agree();
-- INSERT enters its rows when it writes them (unique checks included)
INSERT INTO ix SELECT g, g % 17, 'open', '2026-01-05', 'infinity' FROM generate_series(5001, 5200) g;
SELECT * FROM ix_paths_agree();
-- retention, erase, merges of small file groups (VACUUM)
SELECT zipper_lake.drop_history('ix', '2026-01-02 12:00') > 0 AS dropped;
CREATE TEMP TABLE ix_erased (id int);
INSERT INTO ix_erased SELECT g FROM generate_series(1, 3000, 10) g;
SELECT zipper_lake.erase('ix', 'ix_erased') > 0 AS erased;
VACUUM ix;
SELECT * FROM ix_paths_agree();
SELECT bt_index_check('ix_branch', true), bt_index_check('ix_frozen', true);
-- TRUNCATE empties the indexes with the table
BEGIN;
TRUNCATE ix;
SELECT * FROM ix_paths_agree();
SELECT count(*) FROM ix_answers() WHERE rows > 0;
ROLLBACK;

-- COPY enters placeholder entries, which name no row, and the rows' own
-- at its end; VACUUM removes the placeholders (pageinspect counts a leaf)
CREATE TABLE ixc (id int, v text, valid_from timestamptz, valid_to timestamptz) USING zipper_lake;
SELECT zipper_lake.register('ixc', key => '{id}');
CREATE INDEX ixc_v ON ixc (v);
COPY ixc FROM STDIN;
1	a	2026-01-01	infinity
2	b	2026-01-01	infinity
3	a	2026-01-01	2026-01-02
\.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pageinspect;
RESET client_min_messages;
SELECT count(*) AS entries FROM bt_page_items('ixc_v', 1);
SET enable_seqscan = off;
SELECT id FROM ixc WHERE v = 'a' ORDER BY id;
RESET enable_seqscan;
VACUUM ixc;
SELECT count(*) AS entries FROM bt_page_items('ixc_v', 1);
SELECT bt_index_check('ixc_v', true);
-- an old snapshot in another database keeps no entry of a hidden row: the
-- catalog rows that hide it are this database's (dblink holds the snapshot)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dblink;
RESET client_min_messages;
SELECT dblink_connect('other', format('dbname=postgres host=%s port=%s',
                      current_setting('unix_socket_directories'), current_setting('port')));
SELECT dblink_exec('other', 'BEGIN ISOLATION LEVEL REPEATABLE READ');
SELECT * FROM dblink('other', 'SELECT 1') AS t(one int);
CREATE TABLE ixc_ch (id int, v text, change_time timestamptz);
INSERT INTO ixc_ch VALUES (1, 'c', '2026-01-05');
SELECT changes, closed FROM zipper_lake.apply_changes('ixc', 'ixc_ch');
SELECT count(*) AS entries FROM bt_page_items('ixc_v', 1);
VACUUM ixc;
SELECT count(*) AS entries FROM bt_page_items('ixc_v', 1);
SELECT dblink_exec('other', 'COMMIT'), dblink_disconnect('other');
SET enable_seqscan = off;
SELECT * FROM ixc WHERE v IN ('a', 'c') ORDER BY id, valid_from;
RESET enable_seqscan;
SELECT bt_index_check('ixc_v', true);
DROP TABLE ixc, ixc_ch;

-- the planner weighs an index against the ZipperScan: fetching history
-- rows decodes their chunks, which pays for a few rows, not for a
-- branch's rows of the days pruning keeps
CREATE TABLE ixp (id int, iban text, branch int, valid_from timestamptz, valid_to timestamptz)
  USING zipper_lake;
SELECT zipper_lake.register('ixp', key => '{id}', partition_unit => 'day');
CREATE TABLE ixp_ch (id int, iban text, branch int, change_time timestamptz);
INSERT INTO ixp_ch SELECT g, 'IB' || g, g % 50, '2026-01-01' FROM generate_series(1, 20000) g;
SELECT changes FROM zipper_lake.apply_changes('ixp', 'ixp_ch');
DO $$ BEGIN FOR d IN 1..4 LOOP
  TRUNCATE ixp_ch;
  INSERT INTO ixp_ch SELECT g, 'IB' || ((g * 7 + d) % 20000), g % 50, timestamptz '2026-01-01' + d * interval '1 day'
    FROM generate_series(1, 20000) g;
  PERFORM zipper_lake.apply_changes('ixp', 'ixp_ch');
END LOOP; END $$;
CREATE INDEX ixp_iban ON ixp (iban);
CREATE INDEX ixp_branch ON ixp (branch);
ANALYZE ixp;
EXPLAIN (COSTS OFF) SELECT * FROM ixp WHERE iban = 'IB77';
EXPLAIN (COSTS OFF) SELECT * FROM ixp WHERE branch = 7 AND valid_from >= '2026-01-04';
-- EXPLAIN names the index path the ZipperScan was preferred to
CREATE FUNCTION ixp_explain(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN ' || query LOOP
    IF line LIKE '%Preferred To%' THEN
      RETURN NEXT regexp_replace(line, 'cost=[0-9.]+', 'cost=N');
    END IF;
  END LOOP;
END $$;
SELECT * FROM ixp_explain($$SELECT * FROM ixp WHERE branch = 7 AND valid_from >= '2026-01-04'$$);
SELECT count(*) FROM ixp WHERE iban = 'IB77';
SET enable_indexscan = off; SET enable_bitmapscan = off;
SELECT count(*) FROM ixp WHERE iban = 'IB77';
RESET enable_indexscan; RESET enable_bitmapscan;
DROP TABLE ixp, ixp_ch;
DROP FUNCTION ixp_explain(text);

-- CREATE INDEX CONCURRENTLY and REINDEX
CREATE INDEX CONCURRENTLY ix_status ON ix (status, branch);
SELECT bt_index_check('ix_status', true);
REINDEX TABLE ix;
SELECT bt_index_check('ix_branch', true);
SELECT * FROM ix_paths_agree();

-- refused with a hint, changing nothing
CREATE INDEX ON ix USING brin (valid_from);
\echo :SQLSTATE
\set VERBOSITY terse
ALTER TABLE ix ADD CONSTRAINT ix_deferred UNIQUE (id, valid_from) DEFERRABLE;
\echo :SQLSTATE
\set VERBOSITY default
SELECT count(*) AS indexes FROM pg_index WHERE indrelid = 'ix'::regclass;
DROP TABLE ix, ix_ch;
DROP FUNCTION ix_answers(), ix_paths_agree();

-- past the histogram's ends the planner reads the rows at an index's ends
-- (get_actual_variable_range) under a non-vacuumable snapshot: an
-- estimate, not an error (in a new session, whose plans need it)
CREATE TABLE ends (id int, amt int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ends', ARRAY['id']);
INSERT INTO ends SELECT g, g, '2024-01-01'::timestamptz + g * interval '1 minute', 'infinity' FROM generate_series(1, 1000) g;
CREATE INDEX ends_amt ON ends (amt);
ANALYZE ends;
\c
SELECT count(*) FROM ends WHERE amt > 5000;
EXPLAIN (COSTS OFF) SELECT * FROM ends WHERE amt < -1;
SELECT count(*) FROM ends WHERE amt < 0 OR amt > 1000;
DROP TABLE ends;

-- bottom-up deletion: before a btree splits a full leaf page it removes
-- the entries of rows no snapshot sees (here the open versions the
-- batches closed; their keys' pad values do not change), as it does for
-- heap's UPDATEs, so not every hidden row's entry waits for VACUUM; every
-- visible row keeps its entry (amcheck), and the index finds what the
-- sequential scan finds
SET timezone = 'UTC';
CREATE TABLE bu (id int, pad text, n int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('bu', ARRAY['id']);
CREATE TABLE bu_ch (id int, pad text, n int, change_time timestamptz);
INSERT INTO bu_ch SELECT g, repeat(md5(g::text), 12), 0, '2026-01-01' FROM generate_series(1, 200) g;
SELECT changes FROM zipper_lake.apply_changes('bu', 'bu_ch');
CREATE INDEX bu_pad ON bu (pad);
CREATE FUNCTION bu_entries() RETURNS bigint LANGUAGE sql AS $$
  SELECT sum(coalesce(cardinality(tids), 1))
    FROM generate_series(1, pg_relation_size('bu_pad') / 8192 - 1) p,
         bt_page_items('bu_pad', p::int)
   WHERE (bt_page_stats('bu_pad', p::int)).type = 'l'
$$;
DO $$
BEGIN
    FOR b IN 1..6 LOOP
        UPDATE bu_ch SET n = b, change_time = '2026-01-01'::timestamptz + b * interval '1 day';
        PERFORM zipper_lake.apply_changes('bu', 'bu_ch');
        COMMIT;
    END LOOP;
END $$;
-- 200 + 6 x 400 entries went in for 1,400 visible rows
SELECT count(*) AS rows, bu_entries() < 200 + 6 * 400 AS some_removed,
       bu_entries() >= count(*) AS none_missing FROM bu;
SELECT bt_index_check('bu_pad', true);
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT count(*), sum(n) FROM bu WHERE pad IN (repeat(md5('7'), 12), repeat(md5('123'), 12));
SELECT count(*) FROM bu WHERE pad > '';
RESET enable_seqscan; RESET enable_bitmapscan;
SELECT count(*), sum(n) FROM bu WHERE pad IN (repeat(md5('7'), 12), repeat(md5('123'), 12));
DROP TABLE bu, bu_ch;
DROP FUNCTION bu_entries();

-- bottom-up deletion keeps what it knows of a table by the table, not by
-- its storage id alone: ids start over with a new CREATE EXTENSION, and a
-- backend (dblink's here) that read the hidden rows of the first table
-- must not judge the second's entries by them (the first table's keys 1
-- to 100 were closed, the second's stay open)
CREATE DATABASE zl_bu_reuse;
SELECT dblink_connect('reuse', format('dbname=zl_bu_reuse host=%s port=%s',
                      current_setting('unix_socket_directories'), current_setting('port')));
SELECT dblink_exec('reuse', 'CREATE EXTENSION zipper_lake');
SELECT dblink_exec('reuse', 'CREATE EXTENSION amcheck');
SELECT dblink_exec('reuse', $q$
CREATE PROCEDURE churn(tbl text, lo int) LANGUAGE plpgsql AS $f$
BEGIN
  EXECUTE format('CREATE TABLE %I (id int, pad text, n int, valid_from timestamptz NOT NULL,
                  valid_to timestamptz NOT NULL) USING zipper_lake', tbl);
  PERFORM zipper_lake.register(tbl, ARRAY['id']);
  CREATE TABLE IF NOT EXISTS ch (id int, pad text, n int, change_time timestamptz);
  TRUNCATE ch;
  INSERT INTO ch SELECT g, repeat(md5((g % 50)::text), 12), 0, '2026-01-01' FROM generate_series(1, 200) g;
  PERFORM zipper_lake.apply_changes(tbl, 'ch');
  EXECUTE format('CREATE INDEX %I ON %I (pad)', tbl || '_pad', tbl);
  DELETE FROM ch WHERE id < lo;
END $f$ $q$);
SELECT dblink_exec('reuse', $q$
CREATE PROCEDURE batches(tbl text) LANGUAGE plpgsql AS $p$
BEGIN
  FOR b IN 1..6 LOOP
    UPDATE ch SET n = b, change_time = '2026-01-01'::timestamptz + b * interval '1 day';
    PERFORM zipper_lake.apply_changes(tbl, 'ch');
    COMMIT;
  END LOOP;
END $p$ $q$);
SELECT dblink_exec('reuse', $$CALL churn('bu_first', 1)$$);
SELECT dblink_exec('reuse', $$CALL batches('bu_first')$$);
SELECT dblink_exec('reuse', 'DROP EXTENSION zipper_lake CASCADE');
SELECT dblink_exec('reuse', 'CREATE EXTENSION zipper_lake');
SELECT dblink_exec('reuse', $$CALL churn('bu_second', 101)$$);
SELECT dblink_exec('reuse', $$CALL batches('bu_second')$$);
SELECT * FROM dblink('reuse', $$
  SET enable_seqscan = off; SET enable_bitmapscan = off;
  SELECT count(*) FILTER (WHERE valid_to = 'infinity'), count(*) FROM bu_second WHERE pad > ''$$)
  AS t(open bigint, rows bigint);
SELECT * FROM dblink('reuse', $$SELECT bt_index_check('bu_second_pad', true)::text$$) AS t(checked text);
SELECT dblink_disconnect('reuse');
DROP DATABASE zl_bu_reuse;

-- COPY's placeholder TIDs belong to the table's storage: a TRUNCATE of a
-- table created in the same transaction keeps its file but starts a new
-- storage, whose rows must not get the placeholders' TIDs (an index scan
-- would find the wrong rows)
BEGIN;
CREATE TABLE pc (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('pc', ARRAY['id']);
CREATE INDEX pc_v ON pc (v);
COPY pc FROM stdin;
1	a1	2026-01-01	infinity
2	a2	2026-01-01	infinity
3	a3	2026-01-01	infinity
\.
TRUNCATE pc;
COPY pc FROM stdin;
11	k1	2026-01-01	infinity
12	k2	2026-01-01	infinity
13	k3	2026-01-01	infinity
14	k4	2026-01-01	infinity
15	k5	2026-01-01	infinity
16	k6	2026-01-01	infinity
17	k7	2026-01-01	infinity
18	k8	2026-01-01	infinity
19	k9	2026-01-01	infinity
20	k10	2026-01-01	infinity
\.
COMMIT;
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT id, v FROM pc WHERE v = 'k5';
SELECT count(*) FROM pc WHERE v > '';
RESET enable_seqscan; RESET enable_bitmapscan;
SELECT count(*) FROM pc;
DROP TABLE pc;

-- SET TABLESPACE that rolls back after a write: the table is its old file
-- again, the write's index entries stay; the old file's TID counter went
-- past what the new file gave, so the next write's rows do not get those
-- TIDs (the index would find them under the rolled-back values)
SET allow_in_place_tablespaces = true;
CREATE TABLESPACE zl_ts_moved LOCATION '';
CREATE TABLE st (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('st', ARRAY['id']);
CREATE TABLE st_ch (id int, v text, change_time timestamptz);
INSERT INTO st_ch SELECT g, 'first', '2026-01-01' FROM generate_series(1, 10) g;
SELECT changes FROM zipper_lake.apply_changes('st', 'st_ch');
CREATE INDEX st_v ON st (v);
BEGIN;
ALTER TABLE st SET TABLESPACE zl_ts_moved;
UPDATE st_ch SET v = 'rolled back', change_time = '2026-01-02';
SELECT changes FROM zipper_lake.apply_changes('st', 'st_ch');
ROLLBACK;
UPDATE st_ch SET v = 'kept', change_time = '2026-01-03';
SELECT changes FROM zipper_lake.apply_changes('st', 'st_ch');
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT v, count(*) FROM st WHERE v IN ('rolled back', 'kept', 'first') GROUP BY v ORDER BY v;
RESET enable_seqscan; RESET enable_bitmapscan;
SELECT v, count(*) FROM st GROUP BY v ORDER BY v;
DROP TABLE st, st_ch;
DROP TABLESPACE zl_ts_moved;

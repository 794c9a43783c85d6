-- Shards (README "Scaling out"): partitions of a zipper parent that are
-- postgres_fdw foreign tables over zipper tables on another server -- here
-- another database of this server, reached through a loopback server.
-- Every call on the parent gives what one zipper table with the same data
-- gives, and the shards' part commits or rolls back with the caller's.
SET timezone = 'UTC';
SELECT current_database() AS regress_db \gset
\getenv pghost PGHOST
\getenv pgport PGPORT
DROP DATABASE IF EXISTS zl_regress_shards WITH (FORCE);
CREATE DATABASE zl_regress_shards;
\c zl_regress_shards
SET client_min_messages = warning;
CREATE EXTENSION zipper_lake;
RESET client_min_messages;
CREATE TABLE zs_1 (id int, owner text, bal numeric, valid_from timestamptz, valid_to timestamptz)
  USING zipper_lake;
CREATE TABLE zs_2 (LIKE zs_1) USING zipper_lake;
CREATE TABLE zs_other (LIKE zs_1) USING zipper_lake;
CREATE TABLE zs_unregistered (LIKE zs_1) USING zipper_lake;
SELECT zipper_lake.register(t, ARRAY['id'], max_subgroups => 4)
  FROM unnest(ARRAY['zs_1', 'zs_2']::regclass[]) t;
SELECT zipper_lake.register('zs_other', ARRAY['id'], max_subgroups => 5);
\c :regress_db
SET timezone = 'UTC';
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
CREATE SERVER zl_loop FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host :'pghost', port :'pgport', dbname 'zl_regress_shards');
CREATE USER MAPPING FOR CURRENT_USER SERVER zl_loop;

-- a parent with a local leaf and two shards, and one table to compare with
CREATE TABLE zs (id int, owner text, bal numeric, valid_from timestamptz, valid_to timestamptz)
  PARTITION BY HASH (id);
CREATE TABLE zs_0 PARTITION OF zs FOR VALUES WITH (MODULUS 3, REMAINDER 0) USING zipper_lake;
SELECT zipper_lake.register('zs', ARRAY['id'], max_subgroups => 4);
CREATE FOREIGN TABLE zs_1 PARTITION OF zs FOR VALUES WITH (MODULUS 3, REMAINDER 1) SERVER zl_loop;
-- a shard registered otherwise, or not at all, is refused
CREATE FOREIGN TABLE zs_2 PARTITION OF zs FOR VALUES WITH (MODULUS 3, REMAINDER 2) SERVER zl_loop
  OPTIONS (table_name 'zs_other');
CREATE FOREIGN TABLE zs_2 PARTITION OF zs FOR VALUES WITH (MODULUS 3, REMAINDER 2) SERVER zl_loop
  OPTIONS (table_name 'zs_unregistered');
CREATE FOREIGN TABLE zs_2 PARTITION OF zs FOR VALUES WITH (MODULUS 3, REMAINDER 2) SERVER zl_loop;
CREATE TABLE zs_one (LIKE zs) USING zipper_lake;
SELECT zipper_lake.register('zs_one', ARRAY['id'], max_subgroups => 4);

CREATE FUNCTION zs_same(OUT same boolean, OUT versions bigint) LANGUAGE sql AS $$
  SELECT NOT EXISTS ((SELECT * FROM zs EXCEPT ALL SELECT * FROM zs_one)
                     UNION ALL (SELECT * FROM zs_one EXCEPT ALL SELECT * FROM zs)),
         (SELECT count(*) FROM zs) $$;
CREATE FUNCTION zs_apply(call text, OUT same_counts boolean, OUT counts text) LANGUAGE plpgsql AS $$
DECLARE
  on_parent text;
  on_one text;
BEGIN
  EXECUTE format(call, '''zs''') INTO on_parent;
  EXECUTE format(call, '''zs_one''') INTO on_one;
  same_counts := on_parent = on_one;
  counts := on_parent;
END $$;

-- changes with deletes, a truncate (every leaf, counted once) and -U rows
CREATE TABLE zs_ch (id int, owner text, bal numeric, change_time timestamptz, op text);
INSERT INTO zs_ch
  SELECT k % 40, 'o' || k, k, '2026-03-01'::timestamptz + k * interval '37 minutes',
         CASE WHEN k % 9 = 0 THEN 'D' WHEN k % 11 = 0 THEN '-U' ELSE 'U' END
    FROM generate_series(1, 300) k;
INSERT INTO zs_ch VALUES (NULL, NULL, NULL, '2026-03-03 00:00', 'T');
SELECT * FROM zs_apply($$SELECT r::text FROM zipper_lake.apply_changes(%s, 'zs_ch') r$$);
SELECT * FROM zs_same();
SELECT tableoid::regclass AS leaf, count(*) FROM zs GROUP BY 1 ORDER BY 1;

-- late and partial changes
TRUNCATE zs_ch;
INSERT INTO zs_ch
  SELECT k, 'late' || k, -k, '2026-03-02'::timestamptz + k * interval '1 hour', 'U'
    FROM generate_series(1, 40, 3) k;
SELECT * FROM zs_apply($$SELECT r::text FROM zipper_lake.apply_changes(%s, 'zs_ch') r$$);
UPDATE zs_ch SET owner = NULL, change_time = change_time + interval '5 days';
SELECT * FROM zs_apply($$SELECT r::text FROM zipper_lake.apply_changes(%s, 'zs_ch', ignore_nulls => true) r$$);
SELECT * FROM zs_same();

-- a snapshot with deletes: keys missing from it end on every shard, also
-- on a shard the image has no row for; an empty image is refused whole
CREATE TABLE zs_img (id int, owner text, bal numeric);
INSERT INTO zs_img VALUES (3, 'img', 3), (6, 'img', 6);
SELECT * FROM zs_apply($$SELECT r::text FROM zipper_lake.apply_snapshot(%s, 'zs_img', '2026-03-10') r$$);
SELECT * FROM zs_same();
TRUNCATE zs_img;
SELECT * FROM zipper_lake.apply_snapshot('zs', 'zs_img', '2026-03-11');

-- reads: inlined (a ZipperScan for the local leaf, a foreign scan with the
-- period pushed down for each shard) and as functions
EXPLAIN (COSTS OFF, VERBOSE) SELECT * FROM zipper_lake.as_of(NULL::zs, '2026-03-02');
SELECT (SELECT count(*) FROM zipper_lake.as_of(NULL::zs, '2026-03-02'))
     = (SELECT count(*) FROM zipper_lake.as_of(NULL::zs_one, '2026-03-02')) AS same_as_of,
       (SELECT count(*) FROM zipper_lake.changes(NULL::zs, '2026-03-02', '2026-03-04'))
     = (SELECT count(*) FROM zipper_lake.changes(NULL::zs_one, '2026-03-02', '2026-03-04')) AS same_changes;
SET zipper_lake.enable_pruning = off;   -- the function forms
SELECT NOT EXISTS ((SELECT * FROM zipper_lake.as_of(NULL::zs, '2026-03-02')
                    EXCEPT ALL SELECT * FROM zipper_lake.as_of(NULL::zs_one, '2026-03-02'))
                   UNION ALL (SELECT * FROM zipper_lake.current(NULL::zs_one)
                    EXCEPT ALL SELECT * FROM zipper_lake.current(NULL::zs))) AS same_functions;
RESET zipper_lake.enable_pruning;

-- inspect (a row per sub-group of every leaf, shards' from their server),
-- inspect_bytes (added up), verify (each shard on its server)
SELECT leaf, count(*) > 0 AS has_subgroups, sum(row_count) AS row_count
  FROM zipper_lake.inspect('zs') GROUP BY leaf ORDER BY leaf::text;
SELECT (SELECT sum(bytes) FROM zipper_lake.inspect_bytes('zs') WHERE part = 'sub-groups')
     > (SELECT sum(bytes) FROM zipper_lake.inspect_bytes('zs_0') WHERE part = 'sub-groups') AS shards_added;
SELECT * FROM zipper_lake.verify('zs');

-- options and lifecycle reach the shards: the late horizon counts from
-- the newest change of the whole parent
SELECT zipper_lake.set_late_horizon('zs', '1 day'), zipper_lake.set_late_horizon('zs_one', '1 day');
SELECT tbl, late_horizon FROM zipper_lake.registration WHERE tbl::text LIKE 'zs%' ORDER BY 1;
TRUNCATE zs_ch;
INSERT INTO zs_ch VALUES (3, 'newest', 0, '2026-03-15', 'U');   -- key 3: shard zs_2's
SELECT * FROM zs_apply($$SELECT r::text FROM zipper_lake.apply_changes(%s, 'zs_ch') r$$);
SELECT tableoid::regclass AS leaf FROM zs WHERE id IN (1, 3) GROUP BY 1 ORDER BY 1;
-- key 1 is shard zs_1's, whose own newest change is on 03-10: one table
-- refuses 03-13, and so does that shard, whose horizon counts from 03-15
TRUNCATE zs_ch;
INSERT INTO zs_ch VALUES (1, 'too late', 0, '2026-03-13', 'U');
SELECT * FROM zipper_lake.apply_changes('zs', 'zs_ch');
SELECT * FROM zipper_lake.apply_changes('zs_one', 'zs_ch');
SELECT zipper_lake.set_late_horizon('zs', NULL), zipper_lake.set_late_horizon('zs_one', NULL);
CREATE TABLE zs_erase (id int);
INSERT INTO zs_erase VALUES (4), (7);
SELECT * FROM zs_apply($$SELECT zipper_lake.erase(%s, 'zs_erase')::text$$);
SELECT * FROM zs_same();
SELECT * FROM zs_apply($$SELECT zipper_lake.drop_history(%s, '2026-03-05')::text$$);
SELECT * FROM zs_same();

-- the shards' part follows the caller's transaction: rolled back, to a
-- savepoint, and committed
TRUNCATE zs_ch;
INSERT INTO zs_ch SELECT k, 'rb', k, '2026-03-20', 'U' FROM generate_series(1, 12) k;
BEGIN;
SELECT changes FROM zipper_lake.apply_changes('zs', 'zs_ch');
ROLLBACK;
SELECT count(*) AS rolled_back FROM zs WHERE owner = 'rb';
-- TRUNCATE after an apply in one transaction: postgres_fdw would wait for
-- the apply's locks on the shards for ever (src/remote/README.md), refused
BEGIN;
SELECT changes FROM zipper_lake.apply_changes('zs', 'zs_ch');
TRUNCATE zs;
ROLLBACK;
BEGIN;
SAVEPOINT a;
SELECT changes FROM zipper_lake.apply_changes('zs', 'zs_ch');
ROLLBACK TO a;
UPDATE zs_ch SET owner = 'kept';
SELECT changes FROM zipper_lake.apply_changes('zs', 'zs_ch');
COMMIT;
SELECT owner, count(*) FROM zs WHERE owner IN ('rb', 'kept') GROUP BY 1;
SELECT * FROM zipper_lake.apply_changes('zs_one', 'zs_ch');
SELECT * FROM zs_same();
-- values reach the shards as they are, whatever the caller's DateStyle
SET DateStyle = 'SQL, DMY';
UPDATE zs_ch SET owner = 'dmy', change_time = '2026-04-03 10:00+00';   -- 3 April
SELECT * FROM zs_apply($$SELECT r::text FROM zipper_lake.apply_changes(%s, 'zs_ch') r$$);
RESET DateStyle;
SELECT * FROM zs_same();
SELECT DISTINCT valid_from FROM zs WHERE owner = 'dmy';
-- adding a shard (README "Scaling out"): copy_history() moves a leaf's
-- versions and change record to a new table registered the same way
-- (options and history cut), and the new table takes the leaf's place:
-- the local leaf to a shard, a shard here, a shard to another shard
\c zl_regress_shards
SET timezone = 'UTC';
CREATE TABLE zs_3 (LIKE zs_1) USING zipper_lake;
CREATE TABLE zs_4 (LIKE zs_1) USING zipper_lake;
SELECT zipper_lake.register(t, ARRAY['id'], max_subgroups => 4) FROM unnest(ARRAY['zs_3', 'zs_4']::regclass[]) t;
SELECT zipper_lake.drop_history('zs_3', '2026-03-05');   -- zs_4 keeps no cut: refused below
\c :regress_db
SET timezone = 'UTC';
CREATE TABLE zs_2l (LIKE zs_one) USING zipper_lake;
SELECT zipper_lake.register('zs_2l', ARRAY['id'], max_subgroups => 4);
CREATE FOREIGN TABLE zs_3 (id int, owner text, bal numeric, valid_from timestamptz, valid_to timestamptz)
  SERVER zl_loop;
CREATE FOREIGN TABLE zs_4 (id int, owner text, bal numeric, valid_from timestamptz, valid_to timestamptz)
  SERVER zl_loop;
SELECT zipper_lake.copy_history('zs_1', 'zs_4');   -- the history cut differs
SELECT zipper_lake.drop_history('zs_2l', '2026-03-05');
\c zl_regress_shards
SET timezone = 'UTC';
SELECT zipper_lake.drop_history('zs_4', '2026-03-05');
\c :regress_db
SET timezone = 'UTC';
BEGIN;
ALTER TABLE zs DETACH PARTITION zs_0;
ALTER TABLE zs DETACH PARTITION zs_1;
ALTER TABLE zs DETACH PARTITION zs_2;
SELECT zipper_lake.copy_history('zs_0', 'zs_3') AS local_to_shard,
       zipper_lake.copy_history('zs_1', 'zs_4') AS shard_to_shard,
       zipper_lake.copy_history('zs_2', 'zs_2l') AS shard_to_local;
ALTER TABLE zs ATTACH PARTITION zs_3 FOR VALUES WITH (MODULUS 3, REMAINDER 0);
ALTER TABLE zs ATTACH PARTITION zs_4 FOR VALUES WITH (MODULUS 3, REMAINDER 1);
ALTER TABLE zs ATTACH PARTITION zs_2l FOR VALUES WITH (MODULUS 3, REMAINDER 2);
COMMIT;
SELECT * FROM zs_same();
SELECT * FROM zipper_lake.verify('zs');
SELECT zipper_lake.copy_history('zs_0', 'zs_3');   -- not empty now
SELECT zipper_lake.copy_history('zs_2l', 'zs_2l');
SELECT zipper_lake.copy_history('zs', 'zs_one');
-- the record as stored, segment by segment
\c zl_regress_shards
SELECT (SELECT md5(string_agg(r::text, ',' ORDER BY piece NULLS FIRST, segment)) FROM zipper_lake._record_rows('zs_1') r)
     = (SELECT md5(string_agg(r::text, ',' ORDER BY piece NULLS FIRST, segment)) FROM zipper_lake._record_rows('zs_4') r)
       AS same_record, (SELECT count(*) FROM zipper_lake._record_rows('zs_4')) AS record_rows;
\c :regress_db
SET timezone = 'UTC';
-- the record came along: late changes, re-applications and corrections
-- fold on the moved leaves as on one table
TRUNCATE zs_ch;
INSERT INTO zs_ch SELECT k, 'moved' || k, k, '2026-03-16'::timestamptz + k * interval '1 minute', 'U'
  FROM generate_series(1, 40) k;
SELECT * FROM zs_apply($$SELECT r::text FROM zipper_lake.apply_changes(%s, 'zs_ch') r$$);
SELECT * FROM zs_apply($$SELECT r::text FROM zipper_lake.apply_changes(%s, 'zs_ch') r$$);
UPDATE zs_ch SET owner = 'corrected';
SELECT * FROM zs_apply($$SELECT r::text FROM zipper_lake.apply_changes(%s, 'zs_ch') r$$);
SELECT * FROM zs_same();
SELECT * FROM zipper_lake.verify('zs');
DROP TABLE zs_0;
DROP FOREIGN TABLE zs_1, zs_2;
-- nothing is left prepared, and the log keeps only what is not settled
SELECT count(*) AS prepared FROM pg_prepared_xacts;
SELECT zipper_lake.resolve();
SELECT count(*) AS logged FROM zipper_lake.shard_transaction;

-- CDC events: every shard receives them all and takes its keys' changes
-- (also half of a key change, a delete and an upsert of two keys), a
-- truncate reaches every leaf, skipped ones count once
CREATE TABLE zs_ev (event jsonb, pos bigint);
INSERT INTO zs_ev
  SELECT jsonb_build_object('op', CASE WHEN k % 9 = 0 THEN 'd' ELSE 'u' END,
                            'ts_ms', 1775000000000 + k * 60000,
                            'before', jsonb_build_object('id', k % 25),
                            'after', CASE WHEN k % 9 = 0 THEN NULL
                                          ELSE jsonb_build_object('id', (k + k % 2) % 25, 'owner', 'ev' || k, 'bal', k) END), k
    FROM generate_series(1, 120) k;
INSERT INTO zs_ev VALUES ('{"op": "t", "ts_ms": 1775003000000}', 121),
  (NULL, 122),                                  -- a tombstone: skipped
  ('{"op": "c", "ts_ms": 1775003600000, "after": {"id": 5, "owner": "after t", "bal": 5}}', 123);
SELECT * FROM zs_apply($$SELECT r::text FROM zipper_lake.apply_events(%s, 'zs_ev', 'debezium', seq => 'pos') r$$);
SELECT * FROM zs_same();
-- refused: a transaction that used shards cannot be prepared; a role
-- without a password in its user mapping
BEGIN;
SELECT changes FROM zipper_lake.apply_changes('zs', 'zs_ch');
PREPARE TRANSACTION 'zs';
-- reads alone need no decision: a read-only transaction reads the shards
-- (nothing logged), and one that only read them may be prepared
SELECT zipper_lake.resolve() AS settled;
SELECT count(*) AS logged FROM zipper_lake.shard_transaction;
BEGIN READ ONLY;
SELECT count(*) > 0 AS inspected FROM zipper_lake.inspect('zs');
SET LOCAL zipper_lake.enable_pruning = off;
SELECT count(*) > 0 AS read FROM zipper_lake.as_of(NULL::zs, '2026-03-20');
COMMIT;
BEGIN;
SELECT count(*) > 0 AS inspected FROM zipper_lake.inspect('zs');
PREPARE TRANSACTION 'zs_read';
COMMIT PREPARED 'zs_read';
SELECT count(*) AS logged FROM zipper_lake.shard_transaction;
-- a shard read, then first written in a savepoint rolled back, is only
-- read again: the transaction may be prepared, nothing of the write stays
BEGIN;
SELECT count(*) > 0 AS inspected FROM zipper_lake.inspect('zs');
SAVEPOINT b;
UPDATE zs_ch SET owner = 'gone';
SELECT changes FROM zipper_lake.apply_changes('zs', 'zs_ch');
ROLLBACK TO b;
PREPARE TRANSACTION 'zs_read_again';
COMMIT PREPARED 'zs_read_again';
SELECT count(*) AS gone FROM zs WHERE owner = 'gone';
SELECT count(*) AS logged FROM zipper_lake.shard_transaction;
CREATE ROLE zs_user;
GRANT SELECT, INSERT, UPDATE ON zs, zs_ch TO zs_user;
CREATE USER MAPPING FOR zs_user SERVER zl_loop;
SET ROLE zs_user;
SELECT * FROM zipper_lake.apply_changes('zs', 'zs_ch');
RESET ROLE;
DROP USER MAPPING FOR zs_user SERVER zl_loop;
REVOKE ALL ON zs, zs_ch FROM zs_user;
DROP ROLE zs_user;

DROP TABLE zs, zs_one, zs_ch, zs_img, zs_ev, zs_erase;
DROP FUNCTION zs_same(), zs_apply(text);
DROP SERVER zl_loop CASCADE;
DROP DATABASE zl_regress_shards WITH (FORCE);

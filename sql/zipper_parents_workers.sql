-- Applying to a zipper parent in background workers (README "Scaling
-- out"): the same counts and rows as one table, all leaves or none, leaf by
-- leaf in the caller's transaction wherever workers cannot be used.
SET timezone = 'UTC';

CREATE TABLE zw_src (id int PRIMARY KEY, owner text, bal numeric);
SELECT zipper_lake.create_table('zw', 'zw_src', partitions => 4);
SELECT zipper_lake.create_table('zw_one', 'zw_src');
CREATE TABLE zw_ch (id int, owner text, bal numeric, change_time timestamptz, op text);
CREATE TABLE zw_img (id int, owner text, bal numeric);

CREATE FUNCTION zw_same(OUT same boolean, OUT versions bigint) LANGUAGE sql AS $$
  SELECT NOT EXISTS ((SELECT * FROM zw EXCEPT ALL SELECT * FROM zw_one)
                     UNION ALL (SELECT * FROM zw_one EXCEPT ALL SELECT * FROM zw)),
         (SELECT count(*) FROM zw) $$;
-- the transactions that last wrote the leaves' change records: one per
-- worker when workers applied, one when the caller did
CREATE FUNCTION zw_writers() RETURNS bigint LANGUAGE sql AS $$
  SELECT count(DISTINCT h.xmin::text) FROM zipper_lake.record_head h
   WHERE h.tbl IN ('zw_0'::regclass, 'zw_1', 'zw_2', 'zw_3') $$;

-- batches of upserts, deletes, a truncate and late changes, each applied
-- to the parent by three workers and to one table
SET zipper_lake.apply_workers = 3;
INSERT INTO zw_ch
  SELECT k % 60, 'o' || k, k, '2026-03-01'::timestamptz + k * interval '17 minutes',
         CASE WHEN k % 11 = 0 THEN 'D' ELSE 'U' END
    FROM generate_series(1, 600) k;
INSERT INTO zw_ch VALUES (NULL, NULL, NULL, '2026-03-04 00:00', 'T');
SELECT * FROM zipper_lake.apply_changes('zw', 'zw_ch');
SELECT * FROM zipper_lake.apply_changes('zw_one', 'zw_ch');
SELECT zw_writers() AS writers;
SELECT * FROM zw_same();
TRUNCATE zw_ch;
INSERT INTO zw_ch
  SELECT k, 'late' || k, -k, '2026-03-02'::timestamptz + k * interval '1 hour', 'U'
    FROM generate_series(1, 59, 2) k;
SELECT * FROM zipper_lake.apply_changes('zw', 'zw_ch');
SELECT * FROM zipper_lake.apply_changes('zw_one', 'zw_ch');
SELECT * FROM zw_same();
INSERT INTO zw_img SELECT k, 'img', k FROM generate_series(1, 30) k;
SELECT * FROM zipper_lake.apply_snapshot('zw', 'zw_img', '2026-03-10');
SELECT * FROM zipper_lake.apply_snapshot('zw_one', 'zw_img', '2026-03-10');
SELECT zw_writers() AS writers;
SELECT * FROM zw_same();
CREATE TABLE zw_ev (event jsonb, pos bigint);
INSERT INTO zw_ev
  SELECT jsonb_build_object('op', 'u', 'ts_ms', 1773900000000 + k * 1000,
                            'after', jsonb_build_object('id', k % 40, 'owner', 'ev' || k, 'bal', k)), k
    FROM generate_series(1, 200) k;
INSERT INTO zw_ev VALUES ('{"op": "d", "ts_ms": 1773900300000, "before": {"id": 3}}', 201),
                         ('{"schema": {}, "payload": null}', 202);
SELECT * FROM zipper_lake.apply_events('zw', 'zw_ev', 'debezium', seq => 'pos');
SELECT * FROM zipper_lake.apply_events('zw_one', 'zw_ev', 'debezium', seq => 'pos');
SELECT zw_writers() AS writers;
SELECT * FROM zw_same();
SELECT count(*) AS left_prepared FROM pg_prepared_xacts;

-- an error in one worker's leaf (two changes of key 7 at one instant):
-- the worker's message, and nothing applied in any leaf
TRUNCATE zw_ch;
INSERT INTO zw_ch SELECT k, 'x', k, '2026-03-20', 'U' FROM generate_series(1, 40) k;
INSERT INTO zw_ch VALUES (7, 'y', 7, '2026-03-20', 'U');
SELECT * FROM zipper_lake.apply_changes('zw', 'zw_ch');
SELECT count(*) AS applied FROM zw WHERE valid_from = '2026-03-20';
SELECT count(*) AS left_prepared FROM pg_prepared_xacts;
DELETE FROM zw_ch WHERE owner = 'y';

-- in a transaction block the caller's transaction applies, leaf by leaf:
-- its rollback undoes the batch
BEGIN;
SELECT * FROM zipper_lake.apply_changes('zw', 'zw_ch');
SELECT zw_writers() AS writers, count(*) AS applied FROM zw WHERE valid_from = '2026-03-20';
ROLLBACK;
SELECT count(*) AS applied FROM zw WHERE valid_from = '2026-03-20';
-- so does a caller that holds a lock on a leaf (a worker would wait for it)
DO $$
BEGIN
  LOCK TABLE zw_2 IN SHARE MODE;
  PERFORM zipper_lake.apply_changes('zw', 'zw_ch');
END $$;
SELECT zw_writers() AS writers, count(*) AS applied FROM zw WHERE valid_from = '2026-03-20';
SELECT * FROM zipper_lake.apply_changes('zw_one', 'zw_ch');
SELECT * FROM zw_same();

-- the leader takes every leaf's locks first and its workers join its lock
-- group: locks the caller holds (here SHARE on the parent alone) are the
-- workers' too, and no wait among them goes unseen
TRUNCATE zw_ch;
INSERT INTO zw_ch VALUES (1, 'locked', 1, '2026-03-25', 'U');
DO $$
BEGIN
  LOCK TABLE ONLY zw IN SHARE MODE;
  PERFORM zipper_lake.apply_changes('zw', 'zw_ch');
END $$;
SELECT count(*) AS applied FROM zw WHERE owner = 'locked';
-- a role that cannot log in applies in workers too (they connect as the
-- superuser and work as the caller's role)
CREATE ROLE zw_group NOLOGIN;
GRANT SELECT, INSERT, UPDATE ON zw TO zw_group;
GRANT SELECT ON zw_ch TO zw_group;
UPDATE zw_ch SET owner = 'group', change_time = '2026-03-26';
SET ROLE zw_group;
SELECT * FROM zipper_lake.apply_changes('zw', 'zw_ch');
RESET ROLE;
SELECT count(*) AS applied FROM zw WHERE owner = 'group';
SELECT count(*) AS left_prepared FROM pg_prepared_xacts;
-- the table's code a worker runs (an index expression here) runs as the
-- caller's role in a restricted operation: the superuser the worker's
-- session belongs to is out of its reach (SET ROLE refused)
CREATE TABLE zw_seen (current_role_seen name, set_role_refused boolean);
GRANT INSERT ON zw_seen TO zw_group;
CREATE FUNCTION zw_spy_inner() RETURNS void LANGUAGE plpgsql AS $$
DECLARE refused boolean := false;
BEGIN
  BEGIN
    EXECUTE format('SET ROLE %I', (SELECT rolname FROM pg_catalog.pg_roles WHERE oid = 10));
  EXCEPTION WHEN OTHERS THEN
    refused := true;
  END;
  INSERT INTO public.zw_seen VALUES (current_user, refused);
END $$;
CREATE FUNCTION zw_spy(v text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  PERFORM public.zw_spy_inner();
  RETURN v;
END $$;
CREATE INDEX zw_spied ON zw (zw_spy(owner));
TRUNCATE zw_seen;
UPDATE zw_ch SET owner = 'spied', change_time = '2026-03-27';
SET ROLE zw_group;
SELECT changes > 0 AS applied FROM zipper_lake.apply_changes('zw', 'zw_ch');
RESET ROLE;
SELECT DISTINCT current_role_seen, set_role_refused FROM zw_seen;
DROP INDEX zw_spied;
DROP TABLE zw_seen;
DROP FUNCTION zw_spy(text), zw_spy_inner();

-- resolve(): nothing is left to settle; never in a transaction block
SELECT zipper_lake.resolve();
BEGIN;
SELECT zipper_lake.resolve();
ROLLBACK;

RESET zipper_lake.apply_workers;
DROP TABLE zw, zw_one, zw_src, zw_ch, zw_img, zw_ev;
DROP FUNCTION zw_same, zw_writers;
DROP ROLE zw_group;

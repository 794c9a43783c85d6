-- Every bad input to the access method and to registration is refused with
-- a clear error and changes nothing.
SET timezone = 'UTC';
\set SHOW_CONTEXT never

CREATE TABLE acct (id bigint, name text, valid_from timestamptz, valid_to timestamptz)
  USING zipper_lake;
CREATE TABLE heap_t (id int, valid_from timestamptz, valid_to timestamptz);
CREATE TABLE typed (id int, valid_from timestamptz, valid_to date) USING zipper_lake;

\set VERBOSITY default
-- registration
SELECT zipper_lake.register('heap_t', ARRAY['id']);
\echo :SQLSTATE
SELECT zipper_lake.register('acct', ARRAY[]::text[]);
\echo :SQLSTATE
SELECT zipper_lake.register('acct', ARRAY['id', 'id']);
\echo :SQLSTATE
SELECT zipper_lake.register('acct', ARRAY['nope']);
\echo :SQLSTATE
SELECT zipper_lake.register('acct', ARRAY['id'], valid_from => 'missing');
\echo :SQLSTATE
SELECT zipper_lake.register('acct', ARRAY['id'], valid_from => 'id');
\echo :SQLSTATE
SELECT zipper_lake.register('typed', ARRAY['id']);
\echo :SQLSTATE
SELECT zipper_lake.register('acct', ARRAY['id'], partition_unit => 'week');
\echo :SQLSTATE
SELECT zipper_lake.register('acct', ARRAY['id'], history_group_span => '0 days');
\echo :SQLSTATE
SELECT zipper_lake.register('acct', ARRAY['id'], current_group_span => '1 month 2 days');
\echo :SQLSTATE
SELECT zipper_lake.register('acct', ARRAY['id'], max_subgroups => 0);
\echo :SQLSTATE
SELECT zipper_lake.register('acct', ARRAY['id'], time_zone => 'Mars/Olympus');
\echo :SQLSTATE
SELECT zipper_lake.register('acct', ARRAY['id'], time_zone => 'CEST');
\echo :SQLSTATE
SELECT zipper_lake.register('acct', ARRAY['id'], open_end => '-infinity');
\echo :SQLSTATE
SELECT count(*) FROM zipper_lake.registration WHERE tbl = 'acct'::regclass;
SELECT zipper_lake.register('acct', ARRAY['id']);
SELECT zipper_lake.register('acct', ARRAY['id']);
\echo :SQLSTATE
SELECT zipper_lake.create_table('nokey_hist', 'heap_t');
\echo :SQLSTATE
CREATE TABLE has_period (id int PRIMARY KEY, valid_from timestamptz);
SELECT zipper_lake.create_table('has_period_hist', 'has_period');
\echo :SQLSTATE

-- rows
INSERT INTO acct VALUES (1, 'ok', '2026-01-01', 'infinity');
INSERT INTO acct VALUES (NULL, 'no key', '2026-01-01', 'infinity');
\echo :SQLSTATE
INSERT INTO acct VALUES (2, 'empty', '2026-01-02', '2026-01-02');
\echo :SQLSTATE
INSERT INTO acct VALUES (3, 'backwards', '2026-01-03', '2026-01-02');
\echo :SQLSTATE
INSERT INTO acct VALUES (4, 'forever', '-infinity', 'infinity');
\echo :SQLSTATE
INSERT INTO acct VALUES (5, 'no end', '2026-01-01', NULL);
\echo :SQLSTATE
CREATE TABLE acct9999 (id bigint, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('acct9999', ARRAY['id'], open_end => '9999-12-31');
INSERT INTO acct9999 VALUES (1, '2026-01-01', 'infinity');
\echo :SQLSTATE
COPY acct FROM stdin;
5	copy ok	2026-01-01 00:00:00+00	infinity
\N	copy no key	2026-01-01 00:00:00+00	infinity
\.
-- (psql sets no SQLSTATE variable for COPY FROM stdin: once more, showing the SQLSTATE alone)
\set VERBOSITY sqlstate
COPY acct FROM stdin;
5	copy ok	2026-01-01 00:00:00+00	infinity
\N	copy no key	2026-01-01 00:00:00+00	infinity
\.
\set VERBOSITY default
-- nothing of the failed statements is there
SELECT id, name FROM acct ORDER BY id;

-- statements a zipper table refuses
UPDATE acct SET name = 'x';
\echo :SQLSTATE
DELETE FROM acct;
\echo :SQLSTATE
DELETE FROM acct WHERE false;
\echo :SQLSTATE
MERGE INTO acct a USING heap_t h ON a.id = h.id WHEN MATCHED THEN DELETE;
\echo :SQLSTATE
SELECT * FROM acct FOR UPDATE;
\echo :SQLSTATE
CREATE UNLOGGED TABLE unlogged_z (id int) USING zipper_lake;
\echo :SQLSTATE
CREATE TEMP TABLE temp_z (id int) USING zipper_lake;
\echo :SQLSTATE
-- renames would lose the registration
ALTER TABLE acct RENAME COLUMN valid_from TO starts;
\echo :SQLSTATE
ALTER TABLE acct RENAME COLUMN id TO ident;
\echo :SQLSTATE
ALTER TABLE acct DROP COLUMN valid_to;
\echo :SQLSTATE
-- also when the rename comes through an inheritance parent
CREATE TABLE par (valid_from timestamptz);
CREATE TABLE zc (id int, valid_to timestamptz) INHERITS (par) USING zipper_lake;
SELECT zipper_lake.register('zc', ARRAY['id']);
ALTER TABLE par RENAME COLUMN valid_from TO vf;
\echo :SQLSTATE
ALTER TABLE par ALTER COLUMN valid_from TYPE timestamp;
\echo :SQLSTATE
ALTER TABLE acct RENAME COLUMN name TO label;
ALTER TABLE acct ADD COLUMN note text;
SELECT key, valid_from, valid_to FROM zipper_lake.registration WHERE tbl = 'acct'::regclass;
SELECT id, label, note FROM acct ORDER BY id;

-- a regclass argument given as a number that names no relation: a clear
-- error naming the argument, from every function that takes one, whoever
-- calls it
SELECT * FROM zipper_lake.verify(0);
\echo :SQLSTATE
CREATE FUNCTION oid0_errors() RETURNS TABLE (call text, state text, detail text)
LANGUAGE plpgsql AS $$
BEGIN
    FOREACH call IN ARRAY ARRAY[
        'zipper_lake.register(0, ARRAY[''id''])',
        'zipper_lake.set_late_horizon(0, NULL)',
        'zipper_lake.set_track_columns(0, NULL)',
        'zipper_lake.set_history_format(0, ''rows'')',
        'zipper_lake.set_retention(0, NULL)',
        'zipper_lake.drop_history(0, ''2026-01-01'')',
        'zipper_lake.reclaim(0)',
        'zipper_lake.erase(0, ''heap_t'')',
        'zipper_lake.erase(''acct'', 0)',
        'zipper_lake.create_table(''acct_new'', 0)',
        'zipper_lake.apply_changes(0, ''heap_t'')',
        'zipper_lake.apply_changes(''acct'', 0)',
        'zipper_lake.apply_snapshot(0, ''heap_t'', ''2026-01-01'')',
        'zipper_lake.apply_snapshot(''acct'', 0, ''2026-01-01'')',
        'zipper_lake.apply_events(0, ''heap_t'', ''debezium'')',
        'zipper_lake.apply_events(''acct'', 0, ''debezium'')',
        'zipper_lake.inspect(0)',
        'zipper_lake.inspect_record(0)',
        'zipper_lake._verify_storage(0)',
        'zipper_lake._record_instants(0)',
        'zipper_lake._storage_id(0)',
        'zipper_lake._decode_events(0, ''heap_t'', ''debezium'')',
        'zipper_lake._decode_events(''acct'', 0, ''debezium'')'] LOOP
        BEGIN
            EXECUTE 'SELECT * FROM ' || call;
            state := '00000';
            detail := NULL;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL;
        END;
        RETURN NEXT;
    END LOOP;
END
$$;
CREATE TEMP TABLE oid0_as_superuser AS SELECT * FROM oid0_errors();
SELECT * FROM oid0_as_superuser;
-- an ordinary role gets the same, except where a privilege it lacks is
-- checked first (ownership of acct, EXECUTE on the internal _storage_id)
CREATE ROLE zl_nobody;
GRANT SELECT ON oid0_as_superuser TO zl_nobody;
SET ROLE zl_nobody;
SELECT call, state, detail FROM oid0_errors()
EXCEPT SELECT * FROM oid0_as_superuser ORDER BY call;
RESET ROLE;
DROP TABLE oid0_as_superuser;
DROP FUNCTION oid0_errors();
DROP ROLE zl_nobody;

-- _record_put (copy_history's writer) takes piece NULL for the record's
-- head, so it is not STRICT: any other argument its row needs given as
-- NULL is refused by name, and nothing is written
SELECT zipper_lake._record_put('acct', 1, 0, 0, 4294967295, '2026-01-05', 1, NULL, NULL, NULL);
\echo :SQLSTATE
SELECT zipper_lake._record_put('acct', NULL, NULL, NULL, NULL, '2026-01-05', NULL, NULL, NULL, '{}');
SELECT zipper_lake._record_put(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT count(*) AS record_rows FROM zipper_lake._record_rows('acct');
SELECT zipper_lake.set_follow(NULL);
-- a damaged segment _record_put stored (it is the owner's): read, also
-- where an entry is skipped (a chunk of keys that does not want its hash),
-- it is an error, never a read past its end
CREATE TABLE damaged (k text, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('damaged', ARRAY['k']);
SELECT zipper_lake._record_put('damaged', NULL, NULL, NULL, NULL, '2030-01-01', NULL, NULL, '{}', '{}');
SELECT zipper_lake._record_put('damaged', 1, 0, 0, 4294967295, '2030-01-01', 1,
       '\xf0ffffff0f808080808080fcffff010200'::bytea, NULL, NULL);
CREATE TABLE damaged_ch (k text, v text, change_time timestamptz, op text);
INSERT INTO damaged_ch SELECT 'key' || g, 'a', '2026-01-01', 'I' FROM generate_series(1, 5000) g;
SET work_mem = '64kB';
SELECT * FROM zipper_lake.apply_changes('damaged', 'damaged_ch');
\echo :SQLSTATE
RESET work_mem;
DROP TABLE damaged, damaged_ch;

-- every C function of the extension, called with NULL arguments (also
-- after a zipper table, or a zipper table and a changes table): a value
-- or a clean error, never a crash (the functions that are not STRICT read
-- their arguments themselves)
CREATE TABLE nz (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('nz', ARRAY['id']);
CREATE TABLE nz_ch (id int, v text, change_time timestamptz);
CREATE TEMP TABLE null_calls (fn regprocedure, args text, state text);
DO $$
DECLARE
  f record;
  args text;
  st text;
  variant text;
BEGIN
  FOR f IN SELECT p.oid, p.proname, p.pronargs, p.proargtypes
             FROM pg_proc p JOIN pg_namespace ns ON ns.oid = p.pronamespace
            WHERE ns.nspname = 'zipper_lake' AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'c')
              AND p.prorettype <> 'internal'::regtype
              AND p.proname NOT IN ('_load_hooks', '_place_unplaced', 'resolve')
  LOOP
    FOREACH variant IN ARRAY ARRAY['NULL', 'nz', 'nz, nz_ch'] LOOP
      args := '';
      FOR n IN 0 .. f.pronargs - 1 LOOP
        args := args || CASE WHEN n > 0 THEN ', ' ELSE '' END ||
          CASE WHEN n = 0 AND variant <> 'NULL' AND f.proargtypes[0] = 'regclass'::regtype THEN '''nz'''
               WHEN n = 1 AND variant = 'nz, nz_ch' AND f.proargtypes[1] = 'regclass'::regtype THEN '''nz_ch'''
               WHEN f.proargtypes[n] = 'anyelement'::regtype THEN 'NULL::nz'
               ELSE 'NULL::' || format_type(f.proargtypes[n], NULL) END;
      END LOOP;
      BEGIN
        EXECUTE format('SELECT * FROM zipper_lake.%I(%s)', f.proname, args);
        st := '00000';
      EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE;
      END;
      INSERT INTO null_calls VALUES (f.oid, args, st);
    END LOOP;
  END LOOP;
END $$;
SELECT count(DISTINCT fn) >= 30 AS functions_called FROM null_calls;
SELECT state, count(*) AS calls FROM null_calls GROUP BY state ORDER BY state;

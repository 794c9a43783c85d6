-- The privilege table of README "Guarantees", walked: for every SQL
-- function of the extension, a role holding exactly the privileges listed
-- succeeds, and a role missing any one of them gets 42501 and changes
-- nothing.  Each attempt runs in a subtransaction that is rolled back, so
-- every one starts from the same state (its role, grants and effects go).
SET timezone = 'UTC';
\set SHOW_CONTEXT never

CREATE ROLE zl_priv_owner;
GRANT CREATE ON SCHEMA public TO zl_priv_owner;
SET ROLE zl_priv_owner;
CREATE TABLE pv_acct (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('pv_acct', ARRAY['id']);
INSERT INTO pv_acct VALUES (1, 'a', '2026-01-01', '2026-01-02'), (1, 'b', '2026-01-02', 'infinity'),
                        (2, 'x', '2026-01-01', 'infinity');
-- blocks of an aborted write, for reclaim() to make reusable
BEGIN;
INSERT INTO pv_acct VALUES (8, 'aborted', '2026-01-01', 'infinity');
ROLLBACK;
INSERT INTO pv_acct VALUES (9, 'y', '2026-01-01', 'infinity');
-- a zipper table still to register
CREATE TABLE pv_reg (id int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;

RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM zl_priv_owner;

-- the relations the functions read (owned by the superuser, so that the
-- table owner's role holds no privilege on them)
CREATE TABLE pv_ch (id int, v text, change_time timestamptz);
INSERT INTO pv_ch VALUES (2, 'y', '2026-01-03');
CREATE TABLE pv_img (id int, v text);
INSERT INTO pv_img VALUES (1, 'b'), (3, 'z');
CREATE TABLE pv_ev (event jsonb);
INSERT INTO pv_ev VALUES
('{"before": null, "after": {"id": 4, "v": "e"},
  "source": {"ts_ms": 1767484800000, "lsn": 10, "db": "shop", "schema": "public", "table": "pv_acct"},
  "op": "c", "ts_ms": 1767484800000}');
CREATE TABLE pv_keys (id int);
INSERT INTO pv_keys VALUES (2);
CREATE TABLE pv_src (id int PRIMARY KEY, v text);
-- an empty zipper table registered as pv_acct, of another owner, for
-- copy_history()
CREATE ROLE zl_priv_copier;
CREATE TABLE pv_copy (LIKE pv_acct) USING zipper_lake;
SELECT zipper_lake.register('pv_copy', ARRAY['id']);
ALTER TABLE pv_copy OWNER TO zl_priv_copier;
-- a change record to inspect
SELECT changes FROM zipper_lake.apply_changes('pv_acct', 'pv_ch');
TRUNCATE pv_ch;
INSERT INTO pv_ch VALUES (2, 'w', '2026-01-05');

-- everything a call could change: the table's rows and metadata, its
-- record, the registrations and the relations of the schema
CREATE FUNCTION pv_state() RETURNS text LANGUAGE sql AS $$
  SELECT md5(concat_ws('|',
    (SELECT string_agg(a::text, ',' ORDER BY a::text) FROM pv_acct a),
    (SELECT string_agg(c::text, ',' ORDER BY c::text) FROM pv_copy c),
    (SELECT string_agg(h::text, ',') FROM zipper_lake.record_head h WHERE h.tbl = 'pv_copy'::regclass),
    (SELECT string_agg(r::text, ',' ORDER BY r::text) FROM zipper_lake.registration r),
    (SELECT string_agg(g.subgroup_id || ':' || g.row_count, ',' ORDER BY g.subgroup_id)
       FROM zipper_lake.subgroup g JOIN zipper_lake.storage s USING (storage_id)
      WHERE s.relid = 'pv_acct'::regclass),
    (SELECT count(*) FROM zipper_lake.mask m JOIN zipper_lake.storage s USING (storage_id)
      WHERE s.relid = 'pv_acct'::regclass),
    (SELECT count(*) FROM zipper_lake.free_extent f JOIN zipper_lake.storage s USING (storage_id)
      WHERE s.relid = 'pv_acct'::regclass),
    (SELECT string_agg(s.piece || ':' || s.segment || ':' || s.instants, ','
                       ORDER BY s.piece, s.segment)
       FROM zipper_lake.record_segment s WHERE s.tbl = 'pv_acct'::regclass),
    (SELECT h::text FROM zipper_lake.record_head h WHERE h.tbl = 'pv_acct'::regclass),
    (SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class
      WHERE relnamespace = 'public'::regnamespace)))
$$;

-- README "Guarantees", the privilege table: a call and the privileges it
-- needs ("OWNER OF t": membership in the role owning t)
CREATE TABLE pv_walk (ord serial, fn text, call text, needs text[]);
INSERT INTO pv_walk (fn, call, needs) VALUES
  ('register', $$SELECT zipper_lake.register('pv_reg', ARRAY['id'])$$, '{OWNER OF pv_reg}'),
  ('set_late_horizon', $$SELECT zipper_lake.set_late_horizon('pv_acct', '1 day')$$, '{OWNER OF pv_acct}'),
  ('set_track_columns', $$SELECT zipper_lake.set_track_columns('pv_acct', ARRAY['v'])$$, '{OWNER OF pv_acct}'),
  ('set_history_format', $$SELECT zipper_lake.set_history_format('pv_acct', 'rows')$$, '{OWNER OF pv_acct}'),
  ('set_retention', $$SELECT zipper_lake.set_retention('pv_acct', '1 year')$$, '{OWNER OF pv_acct}'),
  ('drop_history', $$SELECT zipper_lake.drop_history('pv_acct', '2026-01-02')$$, '{OWNER OF pv_acct}'),
  ('reclaim', $$SELECT zipper_lake.reclaim('pv_acct')$$, '{OWNER OF pv_acct}'),
  ('erase', $$SELECT zipper_lake.erase('pv_acct', 'pv_keys')$$,
   '{OWNER OF pv_acct, SELECT ON pv_keys}'),
  ('create_table', $$SELECT zipper_lake.create_table('pv_new', 'pv_src')$$,
   '{CREATE ON SCHEMA public, SELECT ON pv_src}'),
  ('apply_changes', $$SELECT * FROM zipper_lake.apply_changes('pv_acct', 'pv_ch')$$,
   '{SELECT ON pv_acct, INSERT ON pv_acct, UPDATE ON pv_acct, SELECT ON pv_ch}'),
  ('apply_snapshot', $$SELECT * FROM zipper_lake.apply_snapshot('pv_acct', 'pv_img', '2026-01-06')$$,
   '{SELECT ON pv_acct, INSERT ON pv_acct, UPDATE ON pv_acct, SELECT ON pv_img}'),
  ('apply_events', $$SELECT * FROM zipper_lake.apply_events('pv_acct', 'pv_ev', 'debezium')$$,
   '{SELECT ON pv_acct, INSERT ON pv_acct, UPDATE ON pv_acct, SELECT ON pv_ev}'),
  ('as_of', $$SELECT count(*) FROM zipper_lake.as_of(NULL::pv_acct, '2026-01-03')$$, '{SELECT ON pv_acct}'),
  ('current', $$SELECT count(*) FROM zipper_lake.current(NULL::pv_acct)$$, '{SELECT ON pv_acct}'),
  ('changes', $$SELECT count(*) FROM zipper_lake.changes(NULL::pv_acct, '2026-01-01', '2026-01-09')$$,
   '{SELECT ON pv_acct}'),
  ('inspect', $$SELECT count(*) FROM zipper_lake.inspect('pv_acct')$$, '{SELECT ON pv_acct}'),
  ('inspect_record', $$SELECT count(*) FROM zipper_lake.inspect_record('pv_acct')$$, '{SELECT ON pv_acct}'),
  ('inspect_bytes', $$SELECT count(*) FROM zipper_lake.inspect_bytes('pv_acct')$$, '{SELECT ON pv_acct}'),
  ('verify', $$SELECT count(*) FROM zipper_lake.verify('pv_acct')$$, '{SELECT ON pv_acct}'),
  ('_verify_storage', $$SELECT count(*) FROM zipper_lake._verify_storage('pv_acct')$$, '{SELECT ON pv_acct}'),
  ('_record_instants', $$SELECT count(*) FROM zipper_lake._record_instants('pv_acct')$$, '{SELECT ON pv_acct}'),
  ('_newest_change', $$SELECT count(*) FROM zipper_lake._newest_change('pv_acct')$$, '{SELECT ON pv_acct}'),
  ('copy_history', $$SELECT zipper_lake.copy_history('pv_acct', 'pv_copy')$$,
   '{SELECT ON pv_acct, OWNER OF pv_copy}'),
  ('_record_rows', $$SELECT count(*) FROM zipper_lake._record_rows('pv_acct')$$, '{SELECT ON pv_acct}'),
  ('_record_put', $$SELECT zipper_lake._record_put('pv_copy', NULL, NULL, NULL, NULL, '2026-01-05', NULL, NULL, '{}', '{}')$$,
   '{OWNER OF pv_copy}'),
  ('_storage_id', $$SELECT zipper_lake._storage_id('pv_acct')$$,
   '{EXECUTE ON FUNCTION zipper_lake._storage_id(regclass), SELECT ON pv_acct}'),
  ('_decode_events', $$SELECT count(*) FROM zipper_lake._decode_events('pv_acct', 'pv_ev', 'debezium')$$,
   '{SELECT ON pv_ev}'),
  ('_time_arg', $$SELECT zipper_lake._time_arg(now(), 'time')$$, '{}'),
  ('_follow_connection_shown', $$SELECT zipper_lake._follow_connection_shown('host=h password=p')$$, '{}');

CREATE TABLE pv_walk_result (ord int, missing int, sqlstate text, unchanged boolean);
DO $$
DECLARE
    w pv_walk;
    m int;
    p text;
    outcome text;
    before text;
    unchanged text;
BEGIN
    FOR w IN SELECT * FROM pv_walk ORDER BY ord LOOP
        -- m = 0: every privilege listed; else all but the m-th
        FOR m IN 0 .. cardinality(w.needs) LOOP
            BEGIN
                CREATE ROLE zl_priv_walker;
                FOR i IN 1 .. cardinality(w.needs) LOOP
                    CONTINUE WHEN i = m;
                    p := w.needs[i];
                    IF p LIKE 'OWNER OF %' THEN
                        EXECUTE format('GRANT %I TO zl_priv_walker',
                                       (SELECT relowner::regrole::text FROM pg_class
                                         WHERE oid = substr(p, 10)::regclass));
                    ELSE
                        EXECUTE format('GRANT %s TO zl_priv_walker', p);
                    END IF;
                END LOOP;
                before := pv_state();
                BEGIN
                    SET LOCAL ROLE zl_priv_walker;
                    EXECUTE w.call;
                    RESET ROLE;
                    outcome := '00000';
                EXCEPTION WHEN OTHERS THEN
                    outcome := SQLSTATE;
                END;
                -- undo the attempt, role and all, carrying its outcome out
                RAISE EXCEPTION USING ERRCODE = 'ZLW00', MESSAGE = outcome,
                                      DETAIL = (pv_state() = before)::text;
            EXCEPTION WHEN SQLSTATE 'ZLW00' THEN
                GET STACKED DIAGNOSTICS outcome = MESSAGE_TEXT, unchanged = PG_EXCEPTION_DETAIL;
                INSERT INTO pv_walk_result VALUES (w.ord, m, outcome, unchanged::boolean);
            END;
        END LOOP;
    END LOOP;
END
$$;

-- with every privilege: success (00000; the writers changed something);
-- with one missing: 42501 each, in the order of the list (the refused
-- statement rolls back: the digest after it is the one before, which only
-- shows that no effect of the table, its metadata or record outlives it)
SELECT w.fn, w.needs,
       min(r.sqlstate) FILTER (WHERE r.missing = 0) AS granted_all,
       bool_and(NOT r.unchanged) FILTER (WHERE r.missing = 0) AS changed,
       array_agg(r.sqlstate ORDER BY r.missing) FILTER (WHERE r.missing > 0) AS one_missing,
       bool_and(r.unchanged) FILTER (WHERE r.missing > 0) AS refusals_changed_nothing
  FROM pv_walk w JOIN pv_walk_result r USING (ord)
 GROUP BY w.ord, w.fn, w.needs ORDER BY w.ord;

-- the functions PUBLIC may not execute: the server calls them (access
-- method handler, trigger on zipper_lake.registration, event triggers),
-- and _storage_id() is internal
SELECT p.oid::regprocedure AS not_for_public
  FROM pg_proc p
 WHERE p.pronamespace = 'zipper_lake'::regnamespace
   AND NOT EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                    WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
 ORDER BY 1::text;
-- every function of the extension is walked above or called by the server
-- only, but resolve(), which needs no privilege and runs outside any
-- transaction block (the walk's are subtransactions): it settles only the
-- caller's own prepared transactions (sql/zipper_parents_workers.sql); and
-- the follower's, which need a preloaded server and a slot: TAP
-- test/t/018_follow.pl checks their privileges
SELECT p.oid::regprocedure AS unwalked
  FROM pg_proc p
 WHERE p.pronamespace = 'zipper_lake'::regnamespace
   AND p.proname NOT IN (SELECT fn FROM pv_walk)
   AND p.proname NOT IN ('tableam_handler', '_place_unplaced', '_load_hooks', 'resolve',
                         'follow', 'pause', 'resume', 'set_follow', 'unfollow');
-- and none is SECURITY DEFINER: each checks the role that calls it
SELECT p.oid::regprocedure AS security_definer
  FROM pg_proc p
 WHERE p.pronamespace = 'zipper_lake'::regnamespace AND p.prosecdef;

DROP TABLE pv_acct, pv_reg, pv_copy, pv_ch, pv_img, pv_ev, pv_keys, pv_src, pv_walk, pv_walk_result;
DROP FUNCTION pv_state();
DROP ROLE zl_priv_owner, zl_priv_copier;

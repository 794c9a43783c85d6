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
CREATE TABLE acct (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('acct', ARRAY['id']);
INSERT INTO acct VALUES (1, 'a', '2026-01-01', '2026-01-02'), (1, 'b', '2026-01-02', 'infinity'),
                        (2, 'x', '2026-01-01', 'infinity');
-- blocks of an aborted write, for reclaim() to make reusable
BEGIN;
INSERT INTO acct VALUES (8, 'aborted', '2026-01-01', 'infinity');
ROLLBACK;
INSERT INTO acct VALUES (9, 'y', '2026-01-01', 'infinity');
-- a zipper table still to register
CREATE TABLE reg_me (id int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM zl_priv_owner;

-- the relations the functions read (owned by the superuser, so that the
-- table owner's role holds no privilege on them)
CREATE TABLE acct_ch (id int, v text, change_time timestamptz);
INSERT INTO acct_ch VALUES (2, 'y', '2026-01-03');
CREATE TABLE acct_img (id int, v text);
INSERT INTO acct_img VALUES (1, 'b'), (3, 'z');
CREATE TABLE acct_ev (event jsonb);
INSERT INTO acct_ev VALUES
('{"before": null, "after": {"id": 4, "v": "e"},
  "source": {"ts_ms": 1767484800000, "lsn": 10, "db": "shop", "schema": "public", "table": "acct"},
  "op": "c", "ts_ms": 1767484800000}');
CREATE TABLE acct_keys (id int);
INSERT INTO acct_keys VALUES (2);
CREATE TABLE src (id int PRIMARY KEY, v text);
-- a change record to inspect
SELECT changes FROM zipper_lake.apply_changes('acct', 'acct_ch');
TRUNCATE acct_ch;
INSERT INTO acct_ch VALUES (2, 'w', '2026-01-05');

-- everything a call could change: the table's rows and metadata, its
-- record, the registrations and the relations of the schema
CREATE FUNCTION walk_state() RETURNS text LANGUAGE sql AS $$
  SELECT md5(concat_ws('|',
    (SELECT string_agg(a::text, ',' ORDER BY a::text) FROM acct a),
    (SELECT string_agg(r::text, ',' ORDER BY r::text) FROM zipper_lake.registration r),
    (SELECT string_agg(g.subgroup_id || ':' || g.row_count, ',' ORDER BY g.subgroup_id)
       FROM zipper_lake.subgroup g JOIN zipper_lake.storage s USING (storage_id)
      WHERE s.relid = 'acct'::regclass),
    (SELECT count(*) FROM zipper_lake.mask m JOIN zipper_lake.storage s USING (storage_id)
      WHERE s.relid = 'acct'::regclass),
    (SELECT count(*) FROM zipper_lake.free_extent f JOIN zipper_lake.storage s USING (storage_id)
      WHERE s.relid = 'acct'::regclass),
    (SELECT string_agg(s.piece || ':' || s.segment || ':' || s.instants, ','
                       ORDER BY s.piece, s.segment)
       FROM zipper_lake.record_segment s WHERE s.tbl = 'acct'::regclass),
    (SELECT h::text FROM zipper_lake.record_head h WHERE h.tbl = 'acct'::regclass),
    (SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class
      WHERE relnamespace = 'public'::regnamespace)))
$$;

-- README "Guarantees", the privilege table: a call and the privileges it
-- needs ("OWNER OF t": membership in the role owning t)
CREATE TABLE walk (ord serial, fn text, call text, needs text[]);
INSERT INTO walk (fn, call, needs) VALUES
  ('register', $$SELECT zipper_lake.register('reg_me', ARRAY['id'])$$, '{OWNER OF reg_me}'),
  ('set_late_horizon', $$SELECT zipper_lake.set_late_horizon('acct', '1 day')$$, '{OWNER OF acct}'),
  ('set_track_columns', $$SELECT zipper_lake.set_track_columns('acct', ARRAY['v'])$$, '{OWNER OF acct}'),
  ('set_history_format', $$SELECT zipper_lake.set_history_format('acct', 'rows')$$, '{OWNER OF acct}'),
  ('set_retention', $$SELECT zipper_lake.set_retention('acct', '1 year')$$, '{OWNER OF acct}'),
  ('drop_history', $$SELECT zipper_lake.drop_history('acct', '2026-01-02')$$, '{OWNER OF acct}'),
  ('reclaim', $$SELECT zipper_lake.reclaim('acct')$$, '{OWNER OF acct}'),
  ('erase', $$SELECT zipper_lake.erase('acct', 'acct_keys')$$,
   '{OWNER OF acct, SELECT ON acct_keys}'),
  ('create_table', $$SELECT zipper_lake.create_table('acct_new', 'src')$$,
   '{CREATE ON SCHEMA public, SELECT ON src}'),
  ('apply_changes', $$SELECT * FROM zipper_lake.apply_changes('acct', 'acct_ch')$$,
   '{SELECT ON acct, INSERT ON acct, UPDATE ON acct, SELECT ON acct_ch}'),
  ('apply_snapshot', $$SELECT * FROM zipper_lake.apply_snapshot('acct', 'acct_img', '2026-01-06')$$,
   '{SELECT ON acct, INSERT ON acct, UPDATE ON acct, SELECT ON acct_img}'),
  ('apply_events', $$SELECT * FROM zipper_lake.apply_events('acct', 'acct_ev', 'debezium')$$,
   '{SELECT ON acct, INSERT ON acct, UPDATE ON acct, SELECT ON acct_ev}'),
  ('as_of', $$SELECT count(*) FROM zipper_lake.as_of(NULL::acct, '2026-01-03')$$, '{SELECT ON acct}'),
  ('current', $$SELECT count(*) FROM zipper_lake.current(NULL::acct)$$, '{SELECT ON acct}'),
  ('changes', $$SELECT count(*) FROM zipper_lake.changes(NULL::acct, '2026-01-01', '2026-01-09')$$,
   '{SELECT ON acct}'),
  ('inspect', $$SELECT count(*) FROM zipper_lake.inspect('acct')$$, '{SELECT ON acct}'),
  ('inspect_record', $$SELECT count(*) FROM zipper_lake.inspect_record('acct')$$, '{SELECT ON acct}'),
  ('verify', $$SELECT count(*) FROM zipper_lake.verify('acct')$$, '{SELECT ON acct}'),
  ('_verify_storage', $$SELECT count(*) FROM zipper_lake._verify_storage('acct')$$, '{SELECT ON acct}'),
  ('_record_instants', $$SELECT count(*) FROM zipper_lake._record_instants('acct')$$, '{SELECT ON acct}'),
  ('_storage_id', $$SELECT zipper_lake._storage_id('acct')$$,
   '{EXECUTE ON FUNCTION zipper_lake._storage_id(regclass), SELECT ON acct}'),
  ('_decode_events', $$SELECT count(*) FROM zipper_lake._decode_events('acct', 'acct_ev', 'debezium')$$,
   '{SELECT ON acct_ev}'),
  ('_time_arg', $$SELECT zipper_lake._time_arg(now(), 'time')$$, '{}');

CREATE TABLE walk_result (ord int, missing int, sqlstate text, unchanged boolean);
DO $$
DECLARE
    w walk;
    m int;
    p text;
    outcome text;
    before text;
    unchanged text;
BEGIN
    FOR w IN SELECT * FROM walk ORDER BY ord LOOP
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
                before := walk_state();
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
                                      DETAIL = (walk_state() = before)::text;
            EXCEPTION WHEN SQLSTATE 'ZLW00' THEN
                GET STACKED DIAGNOSTICS outcome = MESSAGE_TEXT, unchanged = PG_EXCEPTION_DETAIL;
                INSERT INTO walk_result VALUES (w.ord, m, outcome, unchanged::boolean);
            END;
        END LOOP;
    END LOOP;
END
$$;

-- with every privilege: success (00000; the writers changed something);
-- with one missing: 42501 each, in the order of the list, and nothing
-- changed
SELECT w.fn, w.needs,
       min(r.sqlstate) FILTER (WHERE r.missing = 0) AS granted_all,
       bool_and(NOT r.unchanged) FILTER (WHERE r.missing = 0) AS changed,
       array_agg(r.sqlstate ORDER BY r.missing) FILTER (WHERE r.missing > 0) AS one_missing,
       bool_and(r.unchanged) FILTER (WHERE r.missing > 0) AS refusals_changed_nothing
  FROM walk w JOIN walk_result r USING (ord)
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
-- every function of the extension is walked above or called by the server only
SELECT p.oid::regprocedure AS unwalked
  FROM pg_proc p
 WHERE p.pronamespace = 'zipper_lake'::regnamespace
   AND p.proname NOT IN (SELECT fn FROM walk)
   AND p.proname NOT IN ('tableam_handler', '_place_unplaced', '_load_hooks');
-- and none is SECURITY DEFINER: each checks the role that calls it
SELECT p.oid::regprocedure AS security_definer
  FROM pg_proc p
 WHERE p.pronamespace = 'zipper_lake'::regnamespace AND p.prosecdef;

DROP TABLE acct, reg_me, acct_ch, acct_img, acct_ev, acct_keys, src, walk, walk_result;
DROP FUNCTION walk_state();
DROP ROLE zl_priv_owner;

-- Privileges: the functions run with the caller's rights; the metadata is
-- written only on a table owner's or writer's behalf; search_path is pinned.
SET timezone = 'UTC';
\set SHOW_CONTEXT never

CREATE ROLE zl_owner;
CREATE ROLE zl_reader;
CREATE ROLE zl_writer;
GRANT CREATE ON SCHEMA public TO zl_owner;

SET ROLE zl_owner;
CREATE TABLE owned (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('owned', ARRAY['id']);
INSERT INTO owned VALUES (1, 'a', '2026-01-01', 'infinity');
CREATE TABLE owned_ch (id int, v text, change_time timestamptz);
INSERT INTO owned_ch VALUES (1, 'b', '2026-01-02');
GRANT SELECT ON owned TO zl_reader;
GRANT SELECT, INSERT, UPDATE ON owned TO zl_writer;
GRANT SELECT ON owned_ch TO zl_writer;
RESET ROLE;

-- ordinary users can neither read nor write the sub-group metadata directly;
-- inspect() shows it to those who may read the table
SET ROLE zl_reader;
SELECT count(*) FROM zipper_lake.subgroup;
\echo :SQLSTATE
SELECT partition_end, row_count FROM zipper_lake.inspect('owned');
SELECT count(*) FROM zipper_lake.registration WHERE tbl = 'owned'::regclass;
INSERT INTO zipper_lake.subgroup VALUES (0, 0, 0, 0, NULL, NULL, NULL, NULL, 0, 0, 0);
\echo :SQLSTATE
DELETE FROM zipper_lake.mask;
\echo :SQLSTATE
UPDATE zipper_lake.registration SET max_subgroups = 1;
\echo :SQLSTATE
SELECT nextval('zipper_lake.id_seq');
\echo :SQLSTATE
-- a reader can neither register, insert nor apply changes
SELECT zipper_lake.register('owned', ARRAY['id']);
\echo :SQLSTATE
INSERT INTO owned VALUES (2, 'x', '2026-01-01', 'infinity');
\echo :SQLSTATE
SELECT * FROM zipper_lake.apply_changes('owned', 'owned_ch');
\echo :SQLSTATE
SELECT count(*) FROM owned;
RESET ROLE;
CREATE TABLE hidden (id int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('hidden', ARRAY['id']);
CREATE TABLE hidden_ch (id int, change_time timestamptz);
INSERT INTO hidden_ch VALUES (1, '2026-01-03');
SELECT changes FROM zipper_lake.apply_changes('hidden', 'hidden_ch');
SET ROLE zl_reader;
SELECT * FROM zipper_lake.inspect('hidden');
\echo :SQLSTATE
-- the change record too: its pieces, hash ranges, instants and newest time
SELECT * FROM zipper_lake.inspect_record('hidden');
\echo :SQLSTATE
SELECT * FROM zipper_lake.inspect_bytes('hidden');
\echo :SQLSTATE
SELECT * FROM zipper_lake.verify('hidden');
\echo :SQLSTATE
SELECT * FROM zipper_lake.current(NULL::hidden);
\echo :SQLSTATE
-- the internal trigger function is not for anyone's use
CREATE TEMP TABLE t_trig (tbl regclass);
CREATE TRIGGER t_trig AFTER INSERT ON t_trig FOR EACH ROW EXECUTE FUNCTION zipper_lake._place_unplaced();
\echo :SQLSTATE
DROP TABLE t_trig;
RESET ROLE;
DROP TABLE hidden, hidden_ch;

-- a writer needs INSERT and UPDATE on the table and SELECT on the changes
SET ROLE zl_writer;
SELECT changes, inserted, closed FROM zipper_lake.apply_changes('owned', 'owned_ch');
INSERT INTO owned VALUES (2, 'x', '2026-01-01', 'infinity');
SELECT id, v, valid_from, valid_to FROM owned ORDER BY id, valid_from;
RESET ROLE;
REVOKE UPDATE ON owned FROM zl_writer;
SET ROLE zl_writer;
SELECT * FROM zipper_lake.apply_changes('owned', 'owned_ch');
\echo :SQLSTATE
RESET ROLE;
CREATE TABLE secret_ch (id int, v text, change_time timestamptz);
GRANT UPDATE ON owned TO zl_writer;
SET ROLE zl_writer;
SELECT * FROM zipper_lake.apply_changes('owned', 'secret_ch');
\echo :SQLSTATE
RESET ROLE;

-- applying needs SELECT on the table too: its counts would confirm a
-- guessed value (unchanged: the key holds it), a column at a time with
-- ignore_nulls, at any instant with a late change, as heap's UPDATE never
-- lets a role compare what it may not read
CREATE ROLE zl_blind;
GRANT INSERT, UPDATE ON owned TO zl_blind;
CREATE TABLE guess (id int, v text, change_time timestamptz);
INSERT INTO guess VALUES (1, 'b', '2026-01-05');
CREATE TABLE guess_img (id int, v text);
INSERT INTO guess_img VALUES (1, 'b'), (2, 'x');
CREATE TABLE guess_ev (event jsonb);
INSERT INTO guess_ev VALUES
('{"before": null, "after": {"id": 1, "v": "b"},
  "source": {"ts_ms": 1767571200000, "lsn": 10, "db": "shop", "schema": "public", "table": "owned"},
  "op": "u", "ts_ms": 1767571200000}');
GRANT SELECT ON guess, guess_img, guess_ev TO zl_blind;
CREATE TEMP TABLE owned_before AS SELECT * FROM owned;
SET ROLE zl_blind;
SELECT * FROM zipper_lake.apply_changes('owned', 'guess', ignore_nulls => true);
\echo :SQLSTATE
SELECT * FROM zipper_lake.apply_snapshot('owned', 'guess_img', '2026-01-05');
\echo :SQLSTATE
SELECT * FROM zipper_lake.apply_events('owned', 'guess_ev', 'debezium');
\echo :SQLSTATE
RESET ROLE;
-- nothing changed
SELECT count(*) AS versions_changed
  FROM ((TABLE owned EXCEPT ALL TABLE owned_before) UNION ALL
        (TABLE owned_before EXCEPT ALL TABLE owned)) d;
-- SELECT on every column serves as well as on the table; on all but one
-- it does not
GRANT SELECT (id, valid_from, valid_to) ON owned TO zl_blind;
SET ROLE zl_blind;
SELECT * FROM zipper_lake.apply_changes('owned', 'guess');
\echo :SQLSTATE
RESET ROLE;
GRANT SELECT (v) ON owned TO zl_blind;
SET ROLE zl_blind;
SELECT changes, inserted, unchanged FROM zipper_lake.apply_changes('owned', 'guess');
RESET ROLE;
DROP TABLE guess, guess_img, guess_ev, owned_before;
REVOKE ALL ON owned FROM zl_blind;
DROP ROLE zl_blind;

-- row-level security: plain SQL applies the policies; the functions, which
-- would bypass them, refuse such tables
CREATE TABLE guarded (id int, owner name, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('guarded', ARRAY['id']);
INSERT INTO guarded VALUES (1, 'zl_reader', '2026-01-01', 'infinity'), (2, 'zl_owner', '2026-01-01', 'infinity');
ALTER TABLE guarded ENABLE ROW LEVEL SECURITY;
CREATE POLICY mine ON guarded USING (owner = current_user);
GRANT SELECT, INSERT, UPDATE ON guarded TO zl_reader;
CREATE TABLE guarded_ch (id int, owner name, change_time timestamptz);
INSERT INTO guarded_ch VALUES (2, 'zl_reader', '2026-01-02');
GRANT SELECT ON guarded_ch TO zl_reader;
SET ROLE zl_reader;
SELECT id, owner FROM guarded WHERE valid_to = 'infinity';
SELECT id, owner FROM zipper_lake.current(NULL::guarded);
\echo :SQLSTATE
SELECT id, owner FROM zipper_lake.as_of(NULL::guarded, '2026-01-05');
\echo :SQLSTATE
SELECT * FROM zipper_lake.inspect_record('guarded');
\echo :SQLSTATE
SELECT * FROM zipper_lake.apply_changes('guarded', 'guarded_ch');
\echo :SQLSTATE
RESET ROLE;
-- a plan prepared by a role that bypasses the policies is not reused unchecked
PREPARE all_current AS SELECT id, owner FROM zipper_lake.current(NULL::guarded) ORDER BY id;
EXECUTE all_current;
SET ROLE zl_reader;
EXECUTE all_current;
\echo :SQLSTATE
RESET ROLE;
DEALLOCATE all_current;
DROP TABLE guarded, guarded_ch;

-- a hostile search_path cannot redirect the extension's statements
CREATE SCHEMA evil;
CREATE TABLE evil.subgroup (LIKE zipper_lake.subgroup);
CREATE FUNCTION evil.nextval(regclass) RETURNS bigint LANGUAGE sql AS 'SELECT -1::bigint';
CREATE FUNCTION evil.count(anyelement) RETURNS bigint LANGUAGE sql AS 'SELECT -1::bigint';
SET search_path = evil, public;
INSERT INTO owned_ch VALUES (3, 'c', '2026-01-03');
SELECT changes, inserted FROM zipper_lake.apply_changes('owned', 'owned_ch');
INSERT INTO owned VALUES (4, 'd', '2026-01-04', 'infinity');
SELECT count(*) FROM evil.subgroup;
SELECT count(*) FROM zipper_lake.subgroup WHERE subgroup_id < 0 OR file_group < 0;
SELECT count(*) FROM zipper_lake.verify('owned');
RESET search_path;
SELECT id, v FROM owned ORDER BY id, valid_from;

-- register() places the rows loaded before it, running the table's code
-- (here an index expression) as the table's owner in a restricted
-- operation, never as the extension's owner: it sees its owner and cannot
-- SET ROLE
SET ROLE zl_owner;
CREATE TABLE seen (current_role_seen name, set_role_refused boolean);
CREATE FUNCTION spy_inner() RETURNS void LANGUAGE plpgsql AS $$
DECLARE refused boolean := false;
BEGIN
  BEGIN
    EXECUTE 'SET ROLE postgres';
  EXCEPTION WHEN OTHERS THEN
    refused := true;
  END;
  INSERT INTO public.seen VALUES (current_user, refused);
END $$;
CREATE FUNCTION spy(v text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  PERFORM public.spy_inner();
  RETURN v;
END $$;
CREATE TABLE loaded (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
INSERT INTO loaded VALUES (1, 'a', '2026-01-01', 'infinity');
CREATE INDEX loaded_spy ON loaded (spy(v));
TRUNCATE seen;
SELECT zipper_lake.register('loaded', ARRAY['id']);
SELECT DISTINCT current_role_seen, set_role_refused FROM seen;
RESET ROLE;
DROP TABLE loaded, seen;
DROP FUNCTION spy(text), spy_inner();

DROP TABLE owned, owned_ch, secret_ch;
DROP SCHEMA evil CASCADE;
REVOKE CREATE ON SCHEMA public FROM zl_owner;
DROP ROLE zl_owner, zl_reader, zl_writer;

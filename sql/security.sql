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
SET ROLE zl_reader;
SELECT * FROM zipper_lake.inspect('hidden');
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
DROP TABLE hidden;

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

DROP TABLE owned, owned_ch, secret_ch;
DROP SCHEMA evil CASCADE;
REVOKE CREATE ON SCHEMA public FROM zl_owner;
DROP ROLE zl_owner, zl_reader, zl_writer;

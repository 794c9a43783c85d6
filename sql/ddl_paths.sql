-- One C path for DDL (src/hooks/zl_ddl.c): every route that drops or converts a
-- zipper table forgets its metadata, also under session_replication_role =
-- replica, with the extension's event trigger disabled, and in a fresh
-- session; registered columns cannot be dropped, renamed or retyped by any
-- route.
SET timezone = 'UTC';
\set SHOW_CONTEXT never
CREATE FUNCTION dp_make(tbl text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE TABLE %s (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake', tbl);
    PERFORM zipper_lake.register(tbl::regclass, ARRAY['id']);
    EXECUTE format($i$INSERT INTO %s VALUES (1, 'a', '2024-01-01', '2024-01-02'), (1, 'b', '2024-01-02', 'infinity')$i$, tbl);
END $$;
-- rows of the catalog that belong to a storage id or a table oid
CREATE FUNCTION dp_left(sid bigint, rel oid) RETURNS bigint LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM zipper_lake.subgroup WHERE storage_id = sid)
         + (SELECT count(*) FROM zipper_lake.mask WHERE storage_id = sid)
         + (SELECT count(*) FROM zipper_lake.free_extent WHERE storage_id = sid)
         + (SELECT count(*) FROM zipper_lake.storage WHERE storage_id = sid OR relid = rel)
         + (SELECT count(*) FROM zipper_lake.registration WHERE tbl = rel)
$$;

-- DROP TABLE, in replica mode
SELECT dp_make('dp_t1') \gset
SELECT zipper_lake._storage_id('dp_t1') AS sid, 'dp_t1'::regclass::oid AS rel \gset
SELECT dp_left(:sid, :rel) > 0 AS has_metadata;
SET session_replication_role = replica;
DROP TABLE dp_t1;
RESET session_replication_role;
SELECT dp_left(:sid, :rel) AS left_behind;

-- DROP SCHEMA ... CASCADE, with the event trigger disabled
CREATE SCHEMA dp_s;
SELECT dp_make('dp_s.t2') \gset
SELECT zipper_lake._storage_id('dp_s.t2') AS sid, 'dp_s.t2'::regclass::oid AS rel \gset
ALTER EVENT TRIGGER zipper_lake_load_hooks DISABLE;
DROP SCHEMA dp_s CASCADE;
ALTER EVENT TRIGGER zipper_lake_load_hooks ENABLE ALWAYS;
SELECT dp_left(:sid, :rel) AS left_behind;

-- DROP OWNED, in replica mode
CREATE ROLE regress_zl_dp_owner;
GRANT CREATE ON SCHEMA public TO regress_zl_dp_owner;
SET ROLE regress_zl_dp_owner;
SELECT dp_make('dp_t3') \gset
RESET ROLE;
SELECT zipper_lake._storage_id('dp_t3') AS sid, 'dp_t3'::regclass::oid AS rel \gset
SET session_replication_role = replica;
DROP OWNED BY regress_zl_dp_owner;
RESET session_replication_role;
SELECT dp_left(:sid, :rel) AS left_behind;
REVOKE CREATE ON SCHEMA public FROM regress_zl_dp_owner;
DROP ROLE regress_zl_dp_owner;

-- SET ACCESS METHOD, with the event trigger disabled: the rows stay, the metadata goes
SELECT dp_make('dp_t4') \gset
SELECT zipper_lake._storage_id('dp_t4') AS sid, 'dp_t4'::regclass::oid AS rel \gset
ALTER EVENT TRIGGER zipper_lake_load_hooks DISABLE;
ALTER TABLE dp_t4 SET ACCESS METHOD heap;
ALTER EVENT TRIGGER zipper_lake_load_hooks ENABLE ALWAYS;
SELECT dp_left(:sid, :rel) AS left_behind;
SELECT id, v, valid_from, valid_to FROM dp_t4 ORDER BY valid_from;

-- a drop that rolls back keeps the metadata
SELECT dp_make('dp_t5') \gset
SELECT zipper_lake._storage_id('dp_t5') AS sid, 'dp_t5'::regclass::oid AS rel \gset
BEGIN;
DROP TABLE dp_t5;
ROLLBACK;
SELECT dp_left(:sid, :rel) > 0 AS has_metadata;
SELECT count(*) FROM dp_t5;

-- a fresh session, which has not loaded zipper_lake yet, in replica mode:
-- the event trigger loads the library before the DROP runs
\c
SET session_replication_role = replica;
DROP TABLE dp_t5;
RESET session_replication_role;
SELECT dp_left(:sid, :rel) AS left_behind;

-- registered columns: every route that would drop, rename or retype one
SET timezone = 'UTC';
\set SHOW_CONTEXT never
CREATE DOMAIN dp_code AS text;
CREATE TYPE dp_kind AS ENUM ('a', 'b');
CREATE TABLE dp_parent (code dp_code, kind dp_kind, note text);
CREATE TABLE dp_z (valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) INHERITS (dp_parent) USING zipper_lake;
SELECT zipper_lake.register('dp_z', ARRAY['code', 'kind']);
INSERT INTO dp_z VALUES ('x', 'a', 'n', '2024-01-01', 'infinity');
DROP DOMAIN dp_code CASCADE;
DROP TYPE dp_kind CASCADE;
ALTER TABLE dp_parent DROP COLUMN kind;
ALTER TABLE dp_parent RENAME COLUMN code TO c;
ALTER TABLE dp_parent ALTER COLUMN code TYPE text;
ALTER TABLE dp_z ALTER COLUMN valid_to TYPE timestamptz(0);
ALTER TABLE dp_z RENAME valid_from TO vf;
ALTER TABLE dp_z DROP COLUMN valid_from;
-- other changes of registered columns, and any change of other columns, pass
ALTER TABLE dp_z ALTER COLUMN valid_from SET STATISTICS 500;
ALTER TABLE dp_z ALTER COLUMN code SET STORAGE EXTERNAL;
COMMENT ON COLUMN dp_z.valid_to IS 'end of validity';
ALTER TABLE dp_parent RENAME COLUMN note TO remark;
ALTER TABLE dp_parent DROP COLUMN remark;
SELECT attname FROM pg_attribute WHERE attrelid = 'dp_z'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum;
SELECT * FROM dp_z;
SELECT * FROM zipper_lake.verify('dp_z');
-- a drop rolled back to a savepoint leaves nothing to refuse at commit
BEGIN;
SAVEPOINT s;
DROP DOMAIN dp_code CASCADE;
ROLLBACK TO SAVEPOINT s;
COMMIT;
-- with the end-of-command trigger disabled, the drop is refused at commit
ALTER EVENT TRIGGER zipper_lake_column_drops DISABLE;
BEGIN;
DROP DOMAIN dp_code CASCADE;
COMMIT;
ALTER EVENT TRIGGER zipper_lake_column_drops ENABLE ALWAYS;
SELECT attname FROM pg_attribute WHERE attrelid = 'dp_z'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum;
DROP TABLE dp_z, dp_parent;
DROP DOMAIN dp_code;
DROP TYPE dp_kind;

-- one command may drop a registered table and its key's type together,
-- whichever of the two its dependency walk reaches first
CREATE SCHEMA dp_a;
CREATE SCHEMA dp_b;
CREATE DOMAIN dp_a.code AS text;
CREATE TABLE dp_b.t (id dp_a.code, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('dp_b.t', ARRAY['id']);
SELECT zipper_lake._storage_id('dp_b.t') AS sid, 'dp_b.t'::regclass::oid AS rel \gset
DROP SCHEMA dp_a, dp_b CASCADE;
SELECT dp_left(:sid, :rel) AS left_behind;
DROP TABLE dp_t4;
DROP FUNCTION dp_make(text), dp_left(bigint, oid);

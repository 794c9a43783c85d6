-- Triggers on zipper tables: BEFORE row triggers and statement triggers
-- (also with transition tables) work for INSERT and COPY; apply_changes
-- fires none.  Row-level AFTER triggers are refused whichever way they
-- would be created (a row has no place in the table until the statement's
-- sub-groups are written), and so are foreign keys (their checks are such
-- triggers), changing nothing.
SET timezone = 'UTC';
\set SHOW_CONTEXT never

CREATE TABLE trg (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('trg', ARRAY['id']);

CREATE FUNCTION trg_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE '% % % on %: id %, v %', TG_WHEN, TG_LEVEL, TG_OP, TG_TABLE_NAME, NEW.id, NEW.v;
  NEW.v := NEW.v * 10;
  RETURN NEW;
END $$;
CREATE FUNCTION trg_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE '% % % on %', TG_WHEN, TG_LEVEL, TG_OP, TG_TABLE_NAME;
  RETURN NULL;
END $$;
CREATE FUNCTION trg_new_table() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE '% % % on %: new table %', TG_WHEN, TG_LEVEL, TG_OP, TG_TABLE_NAME,
    (SELECT string_agg(format('(%s,%s)', id, v), ' ' ORDER BY id) FROM inserted);
  RETURN NULL;
END $$;

-- what works: BEFORE row triggers (which may change the row), BEFORE and
-- AFTER statement triggers, transition tables
CREATE TRIGGER trg_before_row BEFORE INSERT ON trg FOR EACH ROW EXECUTE FUNCTION trg_row();
CREATE TRIGGER trg_before_stmt BEFORE INSERT ON trg FOR EACH STATEMENT EXECUTE FUNCTION trg_stmt();
CREATE TRIGGER trg_after_stmt AFTER INSERT ON trg FOR EACH STATEMENT EXECUTE FUNCTION trg_stmt();
CREATE TRIGGER trg_transition AFTER INSERT ON trg REFERENCING NEW TABLE AS inserted
  FOR EACH STATEMENT EXECUTE FUNCTION trg_new_table();
INSERT INTO trg VALUES (1, 1, '2026-01-01', 'infinity'), (2, 2, '2026-01-01', 'infinity');
COPY trg FROM STDIN;
3	3	2026-01-01 00:00:00+00	infinity
\.
SELECT * FROM trg ORDER BY id, valid_from;

-- apply_changes and apply_snapshot fire no triggers
CREATE TABLE trg_ch (id int, v int, change_time timestamptz);
INSERT INTO trg_ch VALUES (1, 5, '2026-01-02'), (4, 4, '2026-01-02');
SELECT changes, inserted, closed FROM zipper_lake.apply_changes('trg', 'trg_ch');
CREATE TABLE trg_image (id int, v int);
INSERT INTO trg_image VALUES (2, 6);
SELECT changes, inserted, closed FROM zipper_lake.apply_snapshot('trg', 'trg_image', '2026-01-02 12:00', deletes => false);
SELECT * FROM trg ORDER BY id, valid_from;

-- row-level AFTER triggers on the table, of any event, and constraint triggers
CREATE TRIGGER trg_after_row AFTER INSERT ON trg FOR EACH ROW EXECUTE FUNCTION trg_row();
CREATE TRIGGER trg_after_row AFTER UPDATE OR DELETE ON trg FOR EACH ROW EXECUTE FUNCTION trg_row();
CREATE OR REPLACE TRIGGER trg_before_row AFTER INSERT ON trg FOR EACH ROW EXECUTE FUNCTION trg_row();
CREATE CONSTRAINT TRIGGER trg_constraint AFTER INSERT ON trg
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION trg_row();
CREATE TRIGGER trg_after_row_new AFTER INSERT ON trg REFERENCING NEW TABLE AS inserted
  FOR EACH ROW EXECUTE FUNCTION trg_new_table();

-- foreign keys from a zipper table, however declared
CREATE TABLE trg_ref (id int PRIMARY KEY);
INSERT INTO trg_ref VALUES (1), (2), (3), (4);
ALTER TABLE trg ADD FOREIGN KEY (id) REFERENCES trg_ref;
ALTER TABLE trg ADD CONSTRAINT trg_fk FOREIGN KEY (id) REFERENCES trg_ref NOT VALID;
ALTER TABLE trg ADD COLUMN ref_id int REFERENCES trg_ref;
CREATE TABLE trg_fk (id int REFERENCES trg_ref, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT to_regclass('trg_fk');
-- ... and to one: its unique keys take no references (their triggers
-- would fire after each row)
ALTER TABLE trg ADD PRIMARY KEY (id, valid_from);
CREATE TABLE trg_referencing (id int, valid_from timestamptz, FOREIGN KEY (id, valid_from) REFERENCES trg);
ALTER TABLE trg DROP CONSTRAINT trg_pkey;

-- the table is unchanged: its triggers, constraints and columns
SELECT tgname, tgtype FROM pg_trigger WHERE tgrelid = 'trg'::regclass ORDER BY tgname;
SELECT conname FROM pg_constraint WHERE conrelid = 'trg'::regclass ORDER BY conname;
SELECT attname FROM pg_attribute WHERE attrelid = 'trg'::regclass AND attnum > 0 ORDER BY attnum;
INSERT INTO trg VALUES (5, 5, '2026-01-03', 'infinity');

-- a partitioned table with a zipper partition: its row-level AFTER
-- triggers would be cloned to the partition
CREATE TABLE trg_p (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  PARTITION BY RANGE (id);
CREATE TABLE trg_p1 PARTITION OF trg_p FOR VALUES FROM (1) TO (100)
  USING zipper_lake;
CREATE TABLE trg_p0 PARTITION OF trg_p FOR VALUES FROM (100) TO (200);
SELECT zipper_lake.register('trg_p1', ARRAY['id']);
CREATE TRIGGER trg_p_after_row AFTER INSERT ON trg_p FOR EACH ROW EXECUTE FUNCTION trg_row();
SELECT count(*) FROM pg_trigger WHERE tgname = 'trg_p_after_row';
-- BEFORE row and statement triggers of the parent work for rows routed to it
CREATE TRIGGER trg_p_before_row BEFORE INSERT ON trg_p FOR EACH ROW EXECUTE FUNCTION trg_row();
CREATE TRIGGER trg_p_transition AFTER INSERT ON trg_p REFERENCING NEW TABLE AS inserted
  FOR EACH STATEMENT EXECUTE FUNCTION trg_new_table();
INSERT INTO trg_p VALUES (1, 1, '2026-02-01', 'infinity'), (102, 2, '2025-02-01', 'infinity');
SELECT tableoid::regclass, * FROM trg_p ORDER BY id;

-- a parent that has one: no zipper partition can be created or attached
CREATE TABLE trg_q (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  PARTITION BY RANGE (id);
CREATE TRIGGER trg_q_after_row AFTER INSERT ON trg_q FOR EACH ROW EXECUTE FUNCTION trg_row();
CREATE TABLE trg_q1 PARTITION OF trg_q FOR VALUES FROM (1) TO (100)
  USING zipper_lake;
CREATE TABLE trg_q2 (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
ALTER TABLE trg_q ATTACH PARTITION trg_q2 FOR VALUES FROM (1) TO (100);
SELECT to_regclass('trg_q1'), (SELECT count(*) FROM pg_inherits WHERE inhparent = 'trg_q'::regclass);
-- nor of one with a foreign key
CREATE TABLE trg_f (id int REFERENCES trg_ref, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  PARTITION BY RANGE (id);
CREATE TABLE trg_f1 PARTITION OF trg_f FOR VALUES FROM (1) TO (100)
  USING zipper_lake;
CREATE TABLE trg_f2 (id int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
ALTER TABLE trg_f ATTACH PARTITION trg_f2 FOR VALUES FROM (1) TO (100);
SELECT to_regclass('trg_f1'), (SELECT count(*) FROM pg_inherits WHERE inhparent = 'trg_f'::regclass);

-- triggers before the table is a zipper table: an unregistered one refuses
-- them as a registered one does; a heap table with one cannot be converted
-- (ALTER TABLE ... SET ACCESS METHOD zipper_lake refuses it)
CREATE TABLE trg_unregistered (id int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
CREATE TRIGGER trg_unregistered_after AFTER INSERT ON trg_unregistered
  FOR EACH ROW EXECUTE FUNCTION trg_row();
CREATE TABLE trg_heap (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL);
CREATE TRIGGER trg_heap_after AFTER INSERT ON trg_heap FOR EACH ROW EXECUTE FUNCTION trg_row();
ALTER TABLE trg_heap SET ACCESS METHOD zipper_lake;
SELECT amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.oid = 'trg_heap'::regclass;

-- a row-level AFTER INSERT trigger created by zipper_lake 0.1 (made here by
-- editing the catalog): INSERT and COPY fail instead of firing it without
-- its row, until it is dropped
CREATE TABLE trg_legacy (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('trg_legacy', ARRAY['id']);
CREATE TRIGGER trg_legacy_row BEFORE INSERT ON trg_legacy FOR EACH ROW EXECUTE FUNCTION trg_row();
UPDATE pg_trigger SET tgtype = tgtype & ~2 WHERE tgname = 'trg_legacy_row';   -- BEFORE -> AFTER
ALTER TABLE trg_legacy DISABLE TRIGGER trg_legacy_row;   -- (relcache invalidation)
ALTER TABLE trg_legacy ENABLE TRIGGER trg_legacy_row;
INSERT INTO trg_legacy VALUES (1, 1, '2026-01-01', 'infinity');
COPY trg_legacy FROM STDIN;
2	2	2026-01-01 00:00:00+00	infinity
\.
DROP TRIGGER trg_legacy_row ON trg_legacy;
INSERT INTO trg_legacy VALUES (1, 1, '2026-01-01', 'infinity');
SELECT * FROM trg_legacy;

DROP TABLE trg, trg_ch, trg_image, trg_ref, trg_p, trg_q, trg_q2, trg_f, trg_f2, trg_unregistered,
  trg_heap, trg_legacy;
DROP FUNCTION trg_row(), trg_stmt(), trg_new_table();

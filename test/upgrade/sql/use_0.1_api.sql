-- the new library under 0.1's SQL definitions (before ALTER EXTENSION UPDATE)
SET timezone = 'UTC';
CREATE TABLE compat (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('compat', ARRAY['id']);
CREATE TABLE compat_ch (id int, v text, change_time timestamptz, op text);
INSERT INTO compat_ch VALUES (1, 'a', '2024-01-01', 'I'), (1, 'b', '2024-01-02', 'U');
SELECT * FROM zipper_lake.apply_changes('compat', 'compat_ch');
SELECT count(*) FROM zipper_lake.current(NULL::compat);
SELECT * FROM zipper_lake.verify('compat');
-- 0.1's meaning: no op column means upserts, an empty image is applied
CREATE TABLE compat_no_op (id int, v text, change_time timestamptz);
INSERT INTO compat_no_op VALUES (2, 'x', '2024-01-03');
SELECT * FROM zipper_lake.apply_changes('compat', 'compat_no_op');
CREATE TABLE compat_empty (id int, v text);
SELECT * FROM zipper_lake.apply_snapshot('compat', 'compat_empty', '2024-01-04', false);

-- the new library under 0.1's SQL definitions (before ALTER EXTENSION UPDATE)
SET timezone = 'UTC';
CREATE TABLE compat (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('compat', ARRAY['id']);
CREATE TABLE compat_ch (id int, v text, change_time timestamptz, op text);
INSERT INTO compat_ch VALUES (1, 'a', '2024-01-01', 'I'), (1, 'b', '2024-01-02', 'U');
SELECT * FROM zipper_lake.apply_changes('compat', 'compat_ch');
SELECT count(*) FROM zipper_lake.current(NULL::compat);
SELECT * FROM zipper_lake.verify('compat');

-- written with v0.1: every kind of table and write it supported
SET timezone = 'UTC';
CREATE EXTENSION zipper_lake;

CREATE TABLE acct (id bigint, owner text, balance numeric,
                   valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('acct', ARRAY['id'], max_subgroups => 2, time_zone => 'Asia/Shanghai');
CREATE TABLE acct_ch (id bigint, owner text, balance numeric, change_time timestamptz, op text);
INSERT INTO acct_ch SELECT i, 'o' || i, i * 10, '2024-01-01'::timestamptz + (i % 5) * interval '7 hours', 'I'
  FROM generate_series(1, 200) i;
SELECT * FROM zipper_lake.apply_changes('acct', 'acct_ch');
TRUNCATE acct_ch;
INSERT INTO acct_ch SELECT i, 'o' || i, i * 11, '2024-01-03'::timestamptz + (i % 3) * interval '5 hours',
       CASE WHEN i % 10 = 0 THEN 'D' ELSE 'U' END
  FROM generate_series(1, 200, 2) i;
SELECT * FROM zipper_lake.apply_changes('acct', 'acct_ch');
-- late changes rewrite history
TRUNCATE acct_ch;
INSERT INTO acct_ch SELECT i, 'late' || i, i, '2024-01-02', 'U' FROM generate_series(1, 200, 7) i;
SELECT * FROM zipper_lake.apply_changes('acct', 'acct_ch');
CREATE TABLE acct_image AS SELECT id, owner, balance FROM acct WHERE valid_to = 'infinity' AND id % 4 <> 0;
UPDATE acct_image SET balance = balance + 1 WHERE id % 3 = 0;
SELECT * FROM zipper_lake.apply_snapshot('acct', 'acct_image', '2024-01-05');

CREATE TABLE dated (id int, v text, valid_from date NOT NULL, valid_to date NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('dated', ARRAY['id'], partition_unit => 'month', open_end => '9999-12-31');
INSERT INTO dated SELECT i, 'v' || i, date '2023-01-01' + i, date '2023-03-01' + i FROM generate_series(1, 50) i;
INSERT INTO dated SELECT i, 'w' || i, date '2023-03-01' + i, date '9999-12-31' FROM generate_series(1, 50) i;

-- loaded before registration, as pg_restore does
CREATE TABLE preload (k text, n int, valid_from timestamp NOT NULL, valid_to timestamp NOT NULL) USING zipper_lake;
INSERT INTO preload SELECT 'k' || i, i, '2022-06-01', 'infinity' FROM generate_series(1, 30) i;
SELECT zipper_lake.register('preload', ARRAY['k']);

CREATE TABLE src (code text PRIMARY KEY, label text);
SELECT zipper_lake.create_table('derived', 'src');
INSERT INTO derived VALUES ('a', 'A', '2024-01-01', 'infinity');

-- 0.1 loaded adjacent equal versions unmerged (0.2's verify() reports them)
CREATE TABLE legacy_adjacent (id int, v text, j json, n numeric,
                              valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('legacy_adjacent', ARRAY['id']);
INSERT INTO legacy_adjacent VALUES
  (1, 'a', '{"x": 1}', 1.0, '2024-01-01', '2024-01-02'), (1, 'a', '{"x": 1}', 1.00, '2024-01-02', 'infinity'),
  (2, 'a', '{"x": 1}', 1, '2024-01-01', '2024-01-02'), (2, 'a', '{"x": 2}', 1, '2024-01-02', 'infinity'),
  (3, NULL, NULL, NULL, '2024-01-01', '2024-01-02'), (3, NULL, NULL, NULL, '2024-01-03', 'infinity');

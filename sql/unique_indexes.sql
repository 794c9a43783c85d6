-- Unique indexes (README "Indexes"): the ones legitimate on a zipper table,
-- (id, valid_from) and a business id among open versions, are checked as
-- every write enters its rows: a version that closes never conflicts with
-- its own open row, a conflict fails with 23505 and changes nothing
SET timezone = 'UTC';
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
RESET client_min_messages;
CREATE TABLE uq (id int, iban text, balance int, valid_from timestamptz, valid_to timestamptz)
  USING zipper_lake;
SELECT zipper_lake.register('uq', key => '{id}', partition_unit => 'day');
CREATE TABLE uq_ch (id int, iban text, balance int, change_time timestamptz, op text);
INSERT INTO uq_ch SELECT g, 'DE' || g, g, '2026-01-01', NULL FROM generate_series(1, 500) g;
SELECT changes FROM zipper_lake.apply_changes('uq', 'uq_ch', op => 'op');
ALTER TABLE uq ADD PRIMARY KEY (id, valid_from);
CREATE UNIQUE INDEX uq_iban ON uq (iban) WHERE valid_to = 'infinity';

-- closing versions (changes, deletes) and moving an iban from one key to
-- another in one batch: no conflict
TRUNCATE uq_ch;
INSERT INTO uq_ch SELECT g, 'DE' || g, g + 1, timestamptz '2026-01-02', NULL FROM generate_series(1, 500, 2) g
UNION ALL SELECT g, 'DE' || g, g + 2, '2026-01-01 12:00', NULL FROM generate_series(2, 500, 5) g
UNION ALL SELECT 3, NULL, NULL, '2026-01-03', 'D'
UNION ALL SELECT 4, 'DE3', 4, '2026-01-03', NULL;
SELECT * FROM zipper_lake.apply_changes('uq', 'uq_ch', op => 'op');
SELECT id, iban, valid_from, valid_to FROM uq WHERE id IN (3, 4) ORDER BY id, valid_from;
-- late changes split closed versions: new (id, valid_from) pairs in history
TRUNCATE uq_ch;
INSERT INTO uq_ch SELECT g, 'DE' || g, -g, timestamptz '2026-01-01 18:00', NULL
  FROM generate_series(1, 500, 10) g;
SELECT changes, late FROM zipper_lake.apply_changes('uq', 'uq_ch', op => 'op');
SELECT id, balance, valid_from, valid_to FROM uq WHERE id = 11 ORDER BY valid_from;

-- a batch that gives an open iban to a second key fails, changing nothing
TRUNCATE uq_ch;
INSERT INTO uq_ch VALUES (7, 'DE9', 0, '2026-01-04', NULL), (8, 'DE8', 1, '2026-01-04', NULL);
SELECT * FROM zipper_lake.apply_changes('uq', 'uq_ch', op => 'op');
\echo :SQLSTATE
-- two new keys of one batch with the same iban
TRUNCATE uq_ch;
INSERT INTO uq_ch VALUES (901, 'XX1', 0, '2026-01-04', NULL), (902, 'XX1', 0, '2026-01-05', NULL);
SELECT * FROM zipper_lake.apply_changes('uq', 'uq_ch', op => 'op');
\echo :SQLSTATE
SELECT count(*), count(*) FILTER (WHERE valid_to = 'infinity') AS open FROM uq;
SELECT count(*) FROM uq WHERE id > 900 OR (id IN (7, 8) AND valid_from >= '2026-01-04');

-- INSERT is checked at the end of its statement: within it, across
-- statements, and against stored versions
INSERT INTO uq VALUES (1000, 'NEW1', 0, '2026-02-01', 'infinity'),
                      (1001, 'NEW1', 0, '2026-02-01', 'infinity');
\echo :SQLSTATE
INSERT INTO uq VALUES (1000, 'NEW1', 0, '2026-02-01', 'infinity');
INSERT INTO uq VALUES (1002, 'NEW1', 0, '2026-02-01', 'infinity');
\echo :SQLSTATE
-- COPY too, at the end of its statement
COPY uq FROM STDIN;
1004	COPY1	0	2026-02-01	infinity
1005	COPY1	0	2026-02-01	infinity
\.
\echo :SQLSTATE
COPY uq FROM STDIN;
1004	COPY1	0	2026-02-01	infinity
\.
SELECT id, iban FROM uq WHERE iban = 'COPY1';
-- the business id may repeat among closed versions: the index's predicate
INSERT INTO uq VALUES (1002, 'NEW1', 0, '2026-01-01', '2026-02-01');
SELECT id, iban, valid_from, valid_to FROM uq WHERE iban = 'NEW1' ORDER BY 1, 3;

-- a unique index over rows that break it is not built
\set VERBOSITY terse
CREATE UNIQUE INDEX uq_balance ON uq (balance);
\echo :SQLSTATE
\set VERBOSITY default

-- the indexes answer as a sequential scan does, amcheck is clean, also after VACUUM
SET enable_seqscan = off; SET zipper_lake.enable_pruning = off;
SELECT count(*), sum(balance) FROM uq WHERE iban > 'DE3' AND valid_to = 'infinity';
RESET enable_seqscan; RESET zipper_lake.enable_pruning;
SET enable_indexscan = off; SET enable_bitmapscan = off;
SELECT count(*), sum(balance) FROM uq WHERE iban > 'DE3' AND valid_to = 'infinity';
RESET enable_indexscan; RESET enable_bitmapscan;
SELECT bt_index_check('uq_pkey', true), bt_index_check('uq_iban', true);
VACUUM uq;
VACUUM uq;
SELECT bt_index_check('uq_pkey', true), bt_index_check('uq_iban', true);
-- after VACUUM (compaction gives moved rows new TIDs) writes still check
TRUNCATE uq_ch;
INSERT INTO uq_ch VALUES (5, 'DE7', 0, '2026-01-06', NULL);
SELECT * FROM zipper_lake.apply_changes('uq', 'uq_ch', op => 'op');
\echo :SQLSTATE

-- CREATE UNIQUE INDEX CONCURRENTLY, REINDEX
DROP INDEX uq_iban;
CREATE UNIQUE INDEX CONCURRENTLY uq_iban ON uq (iban) WHERE valid_to = 'infinity';
REINDEX TABLE uq;
SELECT bt_index_check('uq_iban', true);
INSERT INTO uq VALUES (1003, 'DE11', 0, '2026-02-01', 'infinity');
\echo :SQLSTATE

-- exclusion constraints stay refused: zipper_lake keeps versions from overlapping
ALTER TABLE uq ADD EXCLUDE USING gist (tstzrange(valid_from, valid_to) WITH &&);
\echo :SQLSTATE
DROP TABLE uq, uq_ch;

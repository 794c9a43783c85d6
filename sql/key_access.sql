-- Key access (README "Key access"): ZipperScan probes the key directories
-- of the sub-groups for key = constant / parameter, IN, = ANY, IS NULL,
-- multi-column and cross-type keys; every shape returns exactly what a
-- scan without pruning returns, before and after late changes, masks and
-- rollbacks.
SET timezone = 'UTC';

CREATE TABLE ka (id int, name text, v int,
                 valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ka', key => ARRAY['id'], partition_unit => 'day');
CREATE TABLE ka_changes (id int, name text, v int, change_time timestamptz, op text);

-- 300 keys; then three days on which every third key changes
INSERT INTO ka_changes SELECT g, 'k' || g, 0, '2024-01-01', 'u' FROM generate_series(1, 300) g;
SELECT inserted FROM zipper_lake.apply_changes('ka', 'ka_changes');
TRUNCATE ka_changes;
INSERT INTO ka_changes SELECT g, 'k' || g, d, '2024-01-01'::timestamptz + d * interval '1 day', 'u'
  FROM generate_series(1, 300, 3) g, generate_series(1, 3) d;
SELECT inserted, closed FROM zipper_lake.apply_changes('ka', 'ka_changes');

-- the same rows with pruning (and key probes) on and off
CREATE FUNCTION ka_compare(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    probed text[];
    plain text[];
BEGIN
    PERFORM set_config('zipper_lake.enable_pruning', 'on', true);
    EXECUTE format('SELECT coalesce(array_agg(r::text ORDER BY r::text), ''{}'') FROM (%s) r', query)
        INTO probed;
    PERFORM set_config('zipper_lake.enable_pruning', 'off', true);
    EXECUTE format('SELECT coalesce(array_agg(r::text ORDER BY r::text), ''{}'') FROM (%s) r', query)
        INTO plain;
    PERFORM set_config('zipper_lake.enable_pruning', 'on', true);
    RETURN cardinality(probed) || ' rows, ' || CASE WHEN probed = plain THEN 'same' ELSE 'DIFFERENT' END;
END $$;

CREATE TABLE ka_shapes (shape text PRIMARY KEY, query text NOT NULL);
INSERT INTO ka_shapes VALUES
  ('equal',            'SELECT * FROM ka WHERE id = 4'),
  ('equal, reversed',  'SELECT * FROM ka WHERE 4 = id'),
  ('unchanged key',    'SELECT * FROM ka WHERE id = 5'),
  ('absent key',       'SELECT * FROM ka WHERE id = 1000'),
  ('in',               'SELECT * FROM ka WHERE id IN (1, 2, 4, 1000)'),
  ('any',              'SELECT * FROM ka WHERE id = ANY (''{7,8,9}''::int[])'),
  ('any with null',    'SELECT * FROM ka WHERE id = ANY (ARRAY[7, NULL])'),
  ('empty any',        'SELECT * FROM ka WHERE id = ANY (''{}''::int[])'),
  ('int8 constant',    'SELECT * FROM ka WHERE id = 10::int8'),
  ('int8 any',         'SELECT * FROM ka WHERE id = ANY (''{10,13}''::int8[])'),
  ('int2 constant',    'SELECT * FROM ka WHERE id = 13::int2'),
  ('int8 overflow',    'SELECT * FROM ka WHERE id = 4294967306::int8'),
  ('numeric: no probe', 'SELECT * FROM ka WHERE id = 10.0'),
  ('is null',          'SELECT * FROM ka WHERE id IS NULL'),
  ('with bounds',      'SELECT * FROM ka WHERE id = 7 AND valid_from >= ''2024-01-02'''),
  ('as of',            'SELECT * FROM ka WHERE id IN (7, 8) AND valid_from <= ''2024-01-02 12:00'' AND valid_to > ''2024-01-02 12:00'''),
  ('two terms',        'SELECT * FROM ka WHERE id = 7 AND id = 8'),
  ('key or: no probe', 'SELECT * FROM ka WHERE id = 7 OR id = 8'),
  ('stable function',  'SELECT * FROM ka WHERE id = length(current_setting(''timezone''))');

SELECT shape, ka_compare(query) FROM ka_shapes ORDER BY shape;

-- EXPLAIN shows the probe: the term, and the sub-groups that hold the key
EXPLAIN (COSTS OFF) SELECT * FROM ka WHERE id = 4;
EXPLAIN (COSTS OFF) SELECT * FROM ka WHERE id = ANY ('{10,13}'::int8[]) AND valid_from >= '2024-01-03';
EXPLAIN (COSTS OFF) SELECT * FROM ka WHERE id IS NULL;
-- no probe where hashing could disagree with the comparison
EXPLAIN (COSTS OFF) SELECT * FROM ka WHERE id = 10.0;
EXPLAIN (COSTS OFF) SELECT * FROM ka WHERE id = 7 OR id = 8;

-- parameters: a generic plan probes with the parameter's value
PREPARE ka_one(int) AS SELECT id, v, valid_from, valid_to FROM ka WHERE id = $1 ORDER BY valid_from;
PREPARE ka_many(int8[]) AS SELECT id, v, valid_from FROM ka WHERE id = ANY ($1) ORDER BY id, valid_from;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE ka_one(4);
EXECUTE ka_one(4);
EXECUTE ka_one(5);
EXECUTE ka_many('{1,4}');
SET zipper_lake.enable_pruning = off;
EXECUTE ka_one(4);
EXECUTE ka_many('{1,4}');
RESET zipper_lake.enable_pruning;
RESET plan_cache_mode;

-- late changes rewrite history sub-groups; deletes mask rows
TRUNCATE ka_changes;
INSERT INTO ka_changes VALUES
  (4, 'k4', 40, '2024-01-01 12:00', 'u'),      -- late: splits the first version
  (5, NULL, NULL, '2024-01-02 06:00', 'd'),   -- deletes an unchanged key
  (7, 'k7', 70, '2024-01-02 18:00', 'u'),     -- late, inside history
  (301, 'k301', 1, '2024-01-02', 'u');          -- new key
SELECT inserted, closed, deleted, late FROM zipper_lake.apply_changes('ka', 'ka_changes');
SELECT shape, ka_compare(query) FROM ka_shapes ORDER BY shape;
SELECT ka_compare('SELECT * FROM ka WHERE id IN (5, 301)');

-- a rolled back batch: probes see it inside the transaction, not after
BEGIN;
TRUNCATE ka_changes;
INSERT INTO ka_changes VALUES (4, 'k4', 400, '2024-01-05', 'u'), (302, 'k302', 1, '2024-01-05', 'u');
SELECT inserted, closed FROM zipper_lake.apply_changes('ka', 'ka_changes');
SELECT id, v, valid_from, valid_to FROM ka WHERE id IN (4, 302) AND valid_to = 'infinity' ORDER BY id;
SELECT ka_compare('SELECT * FROM ka WHERE id IN (4, 302)');
ROLLBACK;
SELECT id, v, valid_from, valid_to FROM ka WHERE id IN (4, 302) AND valid_to = 'infinity' ORDER BY id;
SELECT shape, ka_compare(query) FROM ka_shapes ORDER BY shape;

-- a cursor over a probe scrolls both ways
BEGIN;
DECLARE ka_cur SCROLL CURSOR FOR SELECT id, v FROM ka WHERE id IN (4, 7);
FETCH 3 FROM ka_cur;
FETCH BACKWARD 2 FROM ka_cur;
FETCH ALL FROM ka_cur;
FETCH BACKWARD ALL FROM ka_cur;
COMMIT;

-- a join from a small outer relation probes once per outer row: a nested
-- loop with the key (and the join's time bounds) as parameters, through
-- the table's merged key index; results equal the plain scan's
CREATE TABLE ka_facts (cust_id int, ts timestamptz);
INSERT INTO ka_facts VALUES (4, '2024-01-01 06:00'), (4, '2024-01-03 12:00'), (7, '2024-01-02 19:00'),
  (7, '2023-12-31'), (5, '2024-01-02 07:00'), (301, '2024-01-03'), (1000, '2024-01-02'), (NULL, '2024-01-02');
ANALYZE ka_facts;
-- (so small a table is cheaper to hash: ask for the nested loop)
SET enable_hashjoin = off;
SET enable_mergejoin = off;
EXPLAIN (COSTS OFF) SELECT f.cust_id, f.ts, d.v FROM ka_facts f
  JOIN ka d ON d.id = f.cust_id AND f.ts >= d.valid_from AND f.ts < d.valid_to;
SELECT f.cust_id, f.ts, d.v FROM ka_facts f
  JOIN ka d ON d.id = f.cust_id AND f.ts >= d.valid_from AND f.ts < d.valid_to ORDER BY 1, 2;
SELECT ka_compare('SELECT f.cust_id, f.ts, d.v, d.valid_from FROM ka_facts f
  JOIN ka d ON d.id = f.cust_id AND f.ts >= d.valid_from AND f.ts < d.valid_to');
SELECT ka_compare('SELECT k.id, ka.v FROM (VALUES (4), (7), (1000)) k(id) JOIN ka ON ka.id = k.id');
SELECT ka_compare('SELECT f.cust_id, d.v FROM ka_facts f LEFT JOIN ka d ON d.id = f.cust_id');
SELECT ka_compare('SELECT f.cust_id, (SELECT count(*) FROM ka d WHERE d.id = f.cust_id) FROM ka_facts f');
RESET enable_hashjoin;
RESET enable_mergejoin;
-- many keys at once go through the merged index too
SELECT ka_compare('SELECT * FROM ka WHERE id = ANY (ARRAY(SELECT generate_series(1, 400, 7)))');

-- multi-column keys, a text column among them
CREATE TABLE ka2 (region text, num int8, v int,
                  valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ka2', key => ARRAY['region', 'num'], partition_unit => 'day');
CREATE TABLE ka2_changes (region text, num int8, v int, change_time timestamptz, op text);
INSERT INTO ka2_changes SELECT r, n, 0, '2024-01-01', 'u'
  FROM unnest(ARRAY['north', 'south', 'east']) r, generate_series(1, 50) n;
INSERT INTO ka2_changes SELECT r, n, 1, '2024-01-02', 'u'
  FROM unnest(ARRAY['north', 'south']) r, generate_series(1, 50, 5) n;
SELECT inserted, closed FROM zipper_lake.apply_changes('ka2', 'ka2_changes');
SELECT ka_compare(q) FROM (VALUES
  ('SELECT * FROM ka2 WHERE region = ''north'' AND num = 6'),
  ('SELECT * FROM ka2 WHERE region IN (''north'', ''east'') AND num = ANY (''{1,6,99}''::int4[])'),
  ('SELECT * FROM ka2 WHERE region = ''north'' COLLATE "C" AND num = 6'),
  ('SELECT * FROM ka2 WHERE region = ''north'''),
  ('SELECT * FROM ka2 WHERE region = ''north''::varchar AND num = 6::int2')) t(q);
-- a rescan whose keys are too many to probe (1025 x 1025 combinations)
-- reads every sub-group, not the previous outer row's keys
SELECT ka_compare('SELECT o.n, (SELECT count(*) FROM ka2 WHERE region = ANY (o.regions) AND num = ANY (o.nums))
  FROM (VALUES (1, ARRAY[''north''], ARRAY[6::int8]),
               (2, ARRAY(SELECT ''r'' || g FROM generate_series(1, 1023) g) || ARRAY[''north'', ''east''],
                   ARRAY(SELECT g::int8 FROM generate_series(1, 1025) g))) o(n, regions, nums)');
SELECT o.n, (SELECT count(*) FROM ka2 WHERE region = ANY (o.regions) AND num = ANY (o.nums))
  FROM (VALUES (1, ARRAY['north'], ARRAY[6::int8]),
               (2, ARRAY(SELECT 'r' || g FROM generate_series(1, 1023) g) || ARRAY['north', 'east'],
                   ARRAY(SELECT g::int8 FROM generate_series(1, 1025) g))) o(n, regions, nums) ORDER BY 1;
EXPLAIN (COSTS OFF) SELECT * FROM ka2 WHERE region IN ('north', 'east') AND num = ANY ('{1,6,99}'::int4[]);
-- half a key is not probed
EXPLAIN (COSTS OFF) SELECT * FROM ka2 WHERE region = 'north';

-- a zipper table tbl (id, v) with daily partitions, and tbl_changes: keys
-- 1..nkeys each changed once a day from 2024-01-01 for ndays days, applied
CREATE FUNCTION ka_daily(tbl text, nkeys int, ndays int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    inserted bigint;
BEGIN
    EXECUTE format('CREATE TABLE %I (id int, v int, valid_from timestamptz NOT NULL,'
                   ' valid_to timestamptz NOT NULL) USING zipper_lake', tbl);
    PERFORM zipper_lake.register(tbl::regclass, key => ARRAY['id'], partition_unit => 'day');
    EXECUTE format('CREATE TABLE %I (id int, v int, change_time timestamptz, op text)', tbl || '_changes');
    EXECUTE format('INSERT INTO %I SELECT g, d, ''2024-01-01''::timestamptz + d * interval ''1 day'', ''u'''
                   ' FROM generate_series(1, %s) g, generate_series(0, %s) d',
                   tbl || '_changes', nkeys, ndays - 1);
    SELECT a.inserted INTO inserted
      FROM zipper_lake.apply_changes(tbl::regclass, (tbl || '_changes')::regclass) a;
    RETURN inserted;
END $$;

-- sub-groups without a key directory (history written before version 0.2)
-- are read whole, and say so
SELECT ka_daily('ka3', 20, 3) AS inserted;
UPDATE zipper_lake.subgroup SET key_directory = NULL
 WHERE storage_id = zipper_lake._storage_id('ka3') AND partition_end <> 'infinity';
EXPLAIN (COSTS OFF) SELECT * FROM ka3 WHERE id = 3;
SELECT ka_compare('SELECT * FROM ka3 WHERE id = 3');

-- single probes: once a backend's probes of a table have looked at as
-- many sub-groups as the merged key index would hold rows (600 here), the
-- index is built, from every sub-group, not only those the bounds keep;
-- later probes find the sub-groups it covers in it, newer ones in their
-- own directories
SELECT ka_daily('kb', 100, 6) AS inserted;
EXPLAIN (COSTS OFF, VERBOSE) SELECT * FROM kb WHERE id = 3;
-- probes of n keys, each of the sub-groups holding versions from since on
CREATE FUNCTION kb_probes(n int, since timestamptz) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    FOR g IN 1..n LOOP
        PERFORM count(*) FROM kb WHERE id = g % 100 AND valid_from >= since;
    END LOOP;
END $$;
-- 150 probes whose bounds keep 2 of the 6 sub-groups: 300 looks, not yet
SELECT kb_probes(150, '2024-01-05');
EXPLAIN (COSTS OFF, VERBOSE) SELECT * FROM kb WHERE id = 3;
-- 60 probes of all 6: 360 more, and the index is built
SELECT kb_probes(60, '-infinity');
EXPLAIN (COSTS OFF, VERBOSE) SELECT * FROM kb WHERE id = 3 AND valid_from >= '2024-01-05';
SELECT ka_compare('SELECT * FROM kb WHERE id = 3'),
       ka_compare('SELECT * FROM kb WHERE id = 3 AND valid_from >= ''2024-01-03''');
TRUNCATE kb_changes;
INSERT INTO kb_changes VALUES (3, 30, '2024-01-08', 'u'), (4, 40, '2024-01-03 12:00', 'u');
SELECT inserted, closed, late FROM zipper_lake.apply_changes('kb', 'kb_changes');
EXPLAIN (COSTS OFF, VERBOSE) SELECT * FROM kb WHERE id = 3;
SELECT ka_compare('SELECT * FROM kb WHERE id = 3'), ka_compare('SELECT * FROM kb WHERE id = 4'),
       ka_compare('SELECT * FROM kb WHERE id = 4 AND valid_from >= ''2024-01-03''');
BEGIN;
TRUNCATE kb_changes;
INSERT INTO kb_changes VALUES (4, 41, '2024-01-09', 'u'), (5, NULL, '2024-01-02 12:00', 'd');
SELECT inserted, closed, late FROM zipper_lake.apply_changes('kb', 'kb_changes');
SELECT ka_compare('SELECT * FROM kb WHERE id = 4'), ka_compare('SELECT * FROM kb WHERE id = 5');
SELECT valid_to FROM kb WHERE id = 5 AND valid_from = '2024-01-02';
ROLLBACK;
SELECT ka_compare('SELECT * FROM kb WHERE id = 4'), ka_compare('SELECT * FROM kb WHERE id = 5');
SELECT valid_to FROM kb WHERE id = 5 AND valid_from = '2024-01-02';
-- twenty batches later the index lacks more than 16 sub-groups: single
-- probes go on using it for the others (no rebuild per probe) until what
-- they looked at outside it pays for building it again
CREATE TABLE kb_one (LIKE kb_changes);
DO $$
BEGIN
    FOR g IN 1..20 LOOP
        TRUNCATE kb_one;
        INSERT INTO kb_one VALUES (50 + g, 100 + g, '2024-01-10'::timestamptz + g * interval '1 minute', 'u');
        PERFORM zipper_lake.apply_changes('kb', 'kb_one');
    END LOOP;
END $$;
SELECT count(*) > 6 + 16 AS more_than_16_newer FROM zipper_lake.inspect('kb');
EXPLAIN (COSTS OFF, VERBOSE) SELECT * FROM kb WHERE id = 3;
SELECT ka_compare('SELECT * FROM kb WHERE id = 3'), ka_compare('SELECT * FROM kb WHERE id = 55');
SELECT kb_probes(60, '-infinity');
EXPLAIN (COSTS OFF, VERBOSE) SELECT * FROM kb WHERE id = 3;
SELECT ka_compare('SELECT * FROM kb WHERE id = 3'), ka_compare('SELECT * FROM kb WHERE id = 55');

-- zipper_lake.key_cache_memory bounds the key directories a backend keeps
-- and, as much again, its merged key indexes: below the index's 256 kB of
-- buckets none is built, and probes read the directories (kept or not)
SELECT ka_daily('kc', 40, 3) AS inserted;
SET zipper_lake.key_cache_memory = '64kB';
SHOW zipper_lake.key_cache_memory;
EXPLAIN (COSTS OFF, VERBOSE) SELECT * FROM kc WHERE id = ANY ('{1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20}'::int[]);
SELECT ka_compare('SELECT * FROM kc WHERE id = ANY (''{1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20}''::int[])');
RESET zipper_lake.key_cache_memory;
EXPLAIN (COSTS OFF, VERBOSE) SELECT * FROM kc WHERE id = ANY ('{1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20}'::int[]);
SELECT ka_compare('SELECT * FROM kc WHERE id = ANY (''{1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20}''::int[])');
SET zipper_lake.key_cache_memory = '10kB';

-- an INSERT checks its rows against the stored versions a chunk of keys at
-- a time, holding the current sub-groups' key directories; a constraint
-- whose key lookup empties the (small) cache makes it read them again
CREATE TABLE kd_other (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('kd_other', ARRAY['id']);
INSERT INTO kd_other SELECT g, 0, '2026-01-01', 'infinity' FROM generate_series(1, 20000) g;
CREATE FUNCTION kd_probe(k int) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM kd_other WHERE id = k;
    RETURN true;
END $$;
CREATE TABLE kd (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL,
                 CHECK (kd_probe(id))) USING zipper_lake;
SELECT zipper_lake.register('kd', ARRAY['id']);
INSERT INTO kd SELECT g, 1, '2026-01-01', 'infinity' FROM generate_series(1, 9000) g;
SET work_mem = '64kB';
SET zipper_lake.key_cache_memory = '64kB';
-- adjacent versions with equal values: every key's two become one
INSERT INTO kd SELECT g, 1, '2025-12-01', '2026-01-01' FROM generate_series(1, 9000) g;
RESET zipper_lake.key_cache_memory;
RESET work_mem;
SELECT count(*) AS versions,
       count(*) FILTER (WHERE valid_from = '2025-12-01' AND valid_to = 'infinity') AS merged
  FROM kd;
SELECT count(*) AS problems FROM zipper_lake.verify('kd');

DROP TABLE ka, ka_changes, ka_shapes, ka_facts, ka2, ka2_changes, ka3, ka3_changes, kb, kb_changes, kb_one, kc, kc_changes, kd, kd_other;
DROP FUNCTION ka_compare(text);
DROP FUNCTION kb_probes(int, timestamptz);
DROP FUNCTION kd_probe(int);
DROP FUNCTION ka_daily(text, int, int);

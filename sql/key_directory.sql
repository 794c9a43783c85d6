-- Key directories (src/storage/README.md, "Key hashing and key
-- directories"): a sub-group stores the key hashes of its rows in position
-- order, 4 bytes a row, and the positions as runs; readers sort them by
-- hash once per backend.  Directories of the earlier form, (hash, position)
-- pairs sorted by hash, 8 bytes a row, are still read.
SET timezone = 'UTC';

CREATE TABLE kdf (id int, v int, valid_from timestamptz NOT NULL,
                 valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('kdf', key => ARRAY['id'], partition_unit => 'day');
CREATE TABLE kdf_changes (id int, v int, change_time timestamptz, op text);
INSERT INTO kdf_changes SELECT g, g, '2024-01-01', 'u' FROM generate_series(1, 400) g;
SELECT inserted FROM zipper_lake.apply_changes('kdf', 'kdf_changes');

-- a key's hash as the writer makes it (one int key: hash_combine(0, hashint4))
CREATE FUNCTION kdf_hash(id int) RETURNS bigint LANGUAGE sql AS
  $$ SELECT (hashint4(id)::bigint + 2654435769) & 4294967295 $$;
-- four bytes, lowest first (the byte order of this machine's catalog)
CREATE FUNCTION kdf_le4(x bigint) RETURNS bytea LANGUAGE sql AS $$
  SELECT decode(lpad(to_hex(x & 255), 2, '0') || lpad(to_hex((x >> 8) & 255), 2, '0') ||
                lpad(to_hex((x >> 16) & 255), 2, '0') || lpad(to_hex((x >> 24) & 255), 2, '0'),
                'hex') $$;
-- the table's one sub-group (the current partition's, rows on pages) and
-- each row's position in it: 291 positions a TID block from its first one
-- (README "Row identifiers")
CREATE VIEW kdf_sg AS
SELECT subgroup_id, first_tid_block, row_count, key_directory FROM zipper_lake.subgroup
 WHERE storage_id = zipper_lake._storage_id('kdf');
CREATE VIEW kdf_rows AS
SELECT t.id, kdf_hash(t.id) AS hash,
       ((t.ctid::text::point)[0]::int - s.first_tid_block) * 291 + (t.ctid::text::point)[1]::int - 1
         AS position
  FROM kdf t, kdf_sg s;
SELECT count(*) AS subgroups, sum(row_count) AS row_count FROM kdf_sg;

-- the stored form: version byte 2, a few bytes of counts and runs, then the
-- hashes in position order; never a multiple of 8 bytes long
SELECT get_byte(key_directory, 0) AS version,
       octet_length(key_directory) - 4 * row_count AS bytes_besides_hashes,
       octet_length(key_directory) % 8 <> 0 AS not_pairs,
       position((SELECT string_agg(kdf_le4(hash), ''::bytea ORDER BY position) FROM kdf_rows)
                IN key_directory) AS hashes_at
  FROM kdf_sg;

-- key lookups: one key, a few, many (the merged key index)
CREATE FUNCTION kdf_lookups() RETURNS TABLE (shape text, found bigint, sum_v bigint)
LANGUAGE sql AS $$
  SELECT 'one key', count(*), sum(v) FROM kdf WHERE id = 77
  UNION ALL
  SELECT 'three keys', count(*), sum(v) FROM kdf WHERE id IN (1, 250, 400, 401)
  UNION ALL
  SELECT 'forty keys', count(*), sum(v) FROM kdf WHERE id = ANY (ARRAY(SELECT g * 10 FROM generate_series(1, 41) g))
$$;
SELECT * FROM kdf_lookups();
EXPLAIN (COSTS OFF) SELECT * FROM kdf WHERE id = 77;

-- the earlier form, written by hand: sorted (hash, position) pairs
UPDATE zipper_lake.subgroup s
   SET key_directory = (SELECT string_agg(kdf_le4(hash) || kdf_le4(position), ''::bytea
                                          ORDER BY hash, position) FROM kdf_rows)
  FROM kdf_sg k WHERE s.subgroup_id = k.subgroup_id;
SELECT octet_length(key_directory) = 8 * row_count AS pairs FROM kdf_sg;
\c
SET timezone = 'UTC';
SELECT * FROM kdf_lookups();
SELECT count(*) AS problems FROM zipper_lake.verify('kdf');

-- the lookups do use the directory: one that lists no row (version 2, no
-- rows, no runs) hides every row from them
UPDATE zipper_lake.subgroup s SET key_directory = '\x020000'::bytea
  FROM kdf_sg k WHERE s.subgroup_id = k.subgroup_id;
\c
SELECT * FROM kdf_lookups();

-- keys whose hashes share their top 8 bits, loaded in key order (apply
-- writes in hash order, which leaves a reader nothing to sort), crowd the
-- few buckets a reader sorts a directory by first: the sort hands them to
-- its fallback, and lookups still find every one
CREATE TABLE kdf_crowd (id int, v int, valid_from timestamptz NOT NULL,
                        valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('kdf_crowd', key => ARRAY['id'], partition_unit => 'day');
TRUNCATE kdf_changes;
INSERT INTO kdf_changes SELECT g, g, '2024-01-01', 'u' FROM generate_series(1, 200000) g
 WHERE kdf_hash(g) >> 24 = 0;
INSERT INTO kdf_crowd SELECT id, v, change_time, 'infinity' FROM kdf_changes ORDER BY id;
SELECT count(*) AS subgroups, sum(row_count) AS row_count FROM zipper_lake.subgroup
 WHERE storage_id = zipper_lake._storage_id('kdf_crowd');
\c
-- one at a time (a binary search of the directory each), then all at once
CREATE FUNCTION kdf_one_by_one() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    k int;
    c bigint;
    total bigint := 0;
BEGIN
    FOR k IN SELECT id FROM kdf_changes LOOP
        EXECUTE format('SELECT count(*) FROM kdf_crowd WHERE id = %s', k) INTO c;
        total := total + c;
    END LOOP;
    RETURN total;
END $$;
SELECT kdf_one_by_one() AS found;
EXPLAIN (COSTS OFF) SELECT * FROM kdf_crowd WHERE id = ANY (ARRAY(SELECT id FROM kdf_changes));
SELECT count(*) AS found, count(*) = (SELECT count(*) FROM kdf_changes) AS all_keys,
       sum(v) = (SELECT sum(v) FROM kdf_changes) AS same_values
  FROM kdf_crowd WHERE id = ANY (ARRAY(SELECT id FROM kdf_changes));
SELECT count(*) AS problems FROM zipper_lake.verify('kdf_crowd');

-- verify() compares every directory, as the backend has it, with its rows'
-- key hashes: one byte of a stored hash changed by hand (rolled back) is
-- reported.  New connections, so that no directory is cached already (the
-- cache takes a sub-group's directory as immutable).
\c
BEGIN;
UPDATE zipper_lake.subgroup
   SET key_directory = set_byte(key_directory, length(key_directory) - 1,
                                255 - get_byte(key_directory, length(key_directory) - 1))
 WHERE storage_id = zipper_lake._storage_id('kdf_crowd');
SELECT check_name, detail ~ '^Sub-group \d+ key directory names position \d+ with key hash [0-9a-f]{8}; the row read there is position \d+ with key hash [0-9a-f]{8}\.$' AS names_row_and_hashes
  FROM zipper_lake.verify('kdf_crowd');
ROLLBACK;
\c
SELECT count(*) AS problems FROM zipper_lake.verify('kdf_crowd');

DROP VIEW kdf_rows, kdf_sg;
DROP FUNCTION kdf_lookups(), kdf_one_by_one(), kdf_hash(int), kdf_le4(bigint);
DROP TABLE kdf, kdf_crowd, kdf_changes;

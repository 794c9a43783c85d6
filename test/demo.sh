#!/usr/bin/env bash
# Build, install, start a local PostgreSQL 15 (as an unprivileged user) and
# run a short demo of the main job: a zipper table kept from change batches
# and queried as of any time.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

zl_install_packages
zl_build
zl_start_cluster
dropdb --if-exists zl_demo >/dev/null
createdb zl_demo
psql -d zl_demo -v ON_ERROR_STOP=1 -e <<'SQL'
SET timezone = 'UTC';
CREATE EXTENSION zipper_lake;

-- a zipper table for the accounts of a source system
CREATE TABLE account (id bigint, owner text, balance numeric,
                      valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('account', key => ARRAY['id']);

-- day 1: three accounts open
CREATE TABLE changes (id bigint, owner text, balance numeric, change_time timestamptz, op text);
INSERT INTO changes VALUES
  (1, 'ann', 100, '2026-03-01 09:00', 'I'),
  (2, 'bob', 250, '2026-03-01 10:30', 'I'),
  (3, 'cyd',  80, '2026-03-01 11:00', 'I');
SELECT * FROM zipper_lake.apply_changes('account', 'changes');

-- day 2: a deposit, a no-op, a closed account, and a change that arrived late
TRUNCATE changes;
INSERT INTO changes VALUES
  (1, 'ann', 160, '2026-03-02 14:00', 'U'),
  (2, 'bob', 250, '2026-03-02 15:00', 'U'),
  (3, NULL, NULL, '2026-03-02 16:00', 'D'),
  (2, 'bob', 200, '2026-03-01 18:00', 'U');
SELECT * FROM zipper_lake.apply_changes('account', 'changes');

-- the full history, stamped with the source's own change times
SELECT * FROM account ORDER BY id, valid_from;

-- what was true at a point in time, what is current, what changed on a day
SELECT * FROM zipper_lake.as_of(NULL::account, '2026-03-01 20:00') ORDER BY id;
SELECT * FROM zipper_lake.current(NULL::account) ORDER BY id;
SELECT * FROM zipper_lake.changes(NULL::account, '2026-03-02', '2026-03-03') ORDER BY id, valid_from;

-- closed versions live in the partition of their end date, open ones in the current partition
SELECT partition_end, window_start, first_start, last_start, row_count, masked_rows
  FROM zipper_lake.inspect('account');

-- plain SQL on the period columns is pruned the same way
EXPLAIN (COSTS OFF) SELECT * FROM account WHERE valid_from <= '2026-03-01 20:00' AND valid_to > '2026-03-01 20:00';
SELECT * FROM zipper_lake.verify('account');
SQL
echo
echo "The demo database zl_demo is left running: psql -h $ZL_DIR -p $ZL_PORT -U $ZL_PGUSER zl_demo"

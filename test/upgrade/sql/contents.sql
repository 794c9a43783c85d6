-- everything a version must keep: rows, placement, registrations
SET timezone = 'UTC';
SELECT 'acct', id, owner, balance, valid_from, valid_to FROM acct ORDER BY id, valid_from;
SELECT 'dated', id, v, valid_from, valid_to FROM dated ORDER BY id, valid_from;
SELECT 'preload', k, n, valid_from, valid_to FROM preload ORDER BY k, valid_from;
SELECT 'derived', code, label, valid_from, valid_to FROM derived ORDER BY code, valid_from;
SELECT 'as_of', count(*), sum(balance) FROM zipper_lake.as_of(NULL::acct, '2024-01-02 12:00');
SELECT 'changes', count(*) FROM zipper_lake.changes(NULL::acct, '2024-01-02', '2024-01-04');
SELECT 'inspect', t, i.partition_end, i.file_group, i.sub_group, i.window_start, i.first_start,
       i.last_start, i.row_count, i.masked_rows, i.first_block, i.blocks
  FROM unnest(ARRAY['acct', 'dated', 'preload', 'derived']) t,
       zipper_lake.inspect(t::regclass) i ORDER BY 1, 2, 3, 4, 5;
SELECT 'registration', tbl::text, key, valid_from, valid_to, partition_unit, history_group_span,
       current_group_span, max_subgroups, open_end, time_zone FROM zipper_lake.registration
 WHERE tbl::text IN ('acct', 'dated', 'preload', 'derived') ORDER BY 2;
SELECT 'verify', t, v.* FROM unnest(ARRAY['acct', 'dated', 'preload', 'derived']) t,
       zipper_lake.verify(t::regclass) v;

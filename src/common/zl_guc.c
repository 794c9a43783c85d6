/*-------------------------------------------------------------------------
 *
 * zl_guc.c
 *	  The settings of zipper_lake: every variable, defined at load.
 *
 * The README describes each with the feature it tunes.  The variables
 * are read where they act: pruning and in-scan aggregates by the planner and the scan,
 * the columnar chunk size and compression by the columnar writer, the key
 * cache by the key directories and the merged key index, the retained
 * memory by zl_malloc.c's assign hook.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_guc.h"
#include "common/zl_common_internal.h"

#include "utils/guc.h"

bool		zipper_lake_enable_pruning = true;
bool		zipper_lake_enable_scan_aggregates = true;
bool		zipper_lake_columnar_current = true;
int			zipper_lake_columnar_chunk_rows = ZL_CHUNK_ROWS_DEFAULT;
int			zipper_lake_relocate_min_blocks = ZL_RELOCATE_MIN_BLOCKS_DEFAULT;
int			zipper_lake_columnar_compression = ZL_COMPRESSION_ZSTD;
int			zipper_lake_key_cache_memory = ZL_KEY_CACHE_KB_DEFAULT;
int			zipper_lake_retained_memory = ZL_RETAINED_MEMORY_KB_DEFAULT;
int			zipper_lake_maintenance_pause = 0;
int			zipper_lake_apply_workers = 0;
int			zipper_lake_apply_prepared_pause = 0;
bool		zipper_lake_follow_advance_slot = true;
int			zipper_lake_apply_worker_idle = 4000;
char	   *zipper_lake_parent_newest_change = NULL;
char	   *zipper_lake_shard_rows = NULL;

static const struct config_enum_entry compression_options[] = {
	{"zstd", ZL_COMPRESSION_ZSTD, false},
	{"lz4", ZL_COMPRESSION_LZ4, false},
	{NULL, 0, false}
};

void
zl_guc_init(void)
{
	DefineCustomBoolVariable("zipper_lake.enable_pruning",
							 "Prunes partitions, file groups and sub-groups of zipper tables by their period metadata.",
							 "Turn off only to compare results with unpruned scans.",
							 &zipper_lake_enable_pruning,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("zipper_lake.enable_scan_aggregates",
							 "Computes count, sum, min, max and avg of a zipper table's rows in its scan.",
							 "Turn off only to compare results with the executor's Agg node.",
							 &zipper_lake_enable_scan_aggregates,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("zipper_lake.columnar_current",
							 "VACUUM writes the open versions of tables with columnar history column by column.",
							 "Reads of open versions get faster and the table smaller; off keeps them in rows (README \"Storage formats\").",
							 &zipper_lake_columnar_current,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("zipper_lake.columnar_chunk_rows",
							"Rows of a chunk of columnar sub-groups written from now on.",
							"For tests of chunk skipping on small tables; keep the default otherwise.",
							&zipper_lake_columnar_chunk_rows,
							ZL_CHUNK_ROWS_DEFAULT, 16, 65535,
							PGC_USERSET,
							GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("zipper_lake.relocate_min_blocks",
							"Fewest free blocks for which VACUUM moves sub-groups off the end of the file.",
							"For tests of the moves on small tables; keep the default otherwise.",
							&zipper_lake_relocate_min_blocks,
							ZL_RELOCATE_MIN_BLOCKS_DEFAULT, 1, INT_MAX,
							PGC_USERSET,
							GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("zipper_lake.columnar_compression",
							 "Compression of the chunks of columnar sub-groups written from now on.",
							 "zstd (the default) stores history smaller; lz4 decompresses faster.",
							 &zipper_lake_columnar_compression,
							 ZL_COMPRESSION_ZSTD,
							 compression_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("zipper_lake.retained_memory",
							"Freed memory a backend keeps for reuse instead of giving it back to the operating system.",
							"Applies take their memory again without page faults; 0 sets the C library's initial thresholds.",
							&zipper_lake_retained_memory,
							ZL_RETAINED_MEMORY_KB_DEFAULT, 0, INT_MAX / 1024,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, zl_assign_retained_memory, NULL);
	DefineCustomIntVariable("zipper_lake.key_cache_memory",
							"Memory a backend keeps key directories in, and as much again for merged key indexes.",
							"Key lookups of a table whose merged key index would need more probe each sub-group's directory.",
							&zipper_lake_key_cache_memory,
							ZL_KEY_CACHE_KB_DEFAULT, 64, MAX_KILOBYTES,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("zipper_lake.maintenance_pause",
							"Time VACUUM's maintenance worker waits before it commits what it did, and once after the first of several moves.",
							"For tests of crashes and concurrent sessions during a merge; keep 0 otherwise.",
							&zipper_lake_maintenance_pause,
							0, 0, 3600 * 1000,
							PGC_SUSET,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("zipper_lake.apply_workers",
							"Background workers that apply a batch to the leaves of a zipper parent at once.",
							"0 applies leaf by leaf in the caller's transaction; more needs max_prepared_transactions (README \"Scaling out\").",
							&zipper_lake_apply_workers,
							0, 0, 64,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("zipper_lake.apply_worker_idle",
							"Time an apply worker waits, idle and with warm caches, for the next batch of its database and role.",
							"Needs shared_preload_libraries = 'zipper_lake'; a connected worker holds up DROP DATABASE, which waits five seconds.",
							&zipper_lake_apply_worker_idle,
							4000, 0, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("zipper_lake.apply_prepared_pause",
							"Time apply workers wait once every one is ready: the coordinator before it commits, each other one after it before it finishes its prepared transaction; a caller that used shards waits once they are prepared, and after its commit.",
							"For tests of crashes between the two commits; keep 0 otherwise.",
							&zipper_lake_apply_prepared_pause,
							0, 0, 3600 * 1000,
							PGC_SUSET,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("zipper_lake.follow_advance_slot",
							 "Whether followers advance their slot after each batch they commit.",
							 "For tests of a crash between a batch's commit and the advance (off: the slot shows the applied transactions again); keep on otherwise.",
							 &zipper_lake_follow_advance_slot,
							 true,
							 PGC_SIGHUP,
							 GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("zipper_lake.parent_newest_change",
							   "Internal: the newest change of the zipper parent a shard's table belongs to.",
							   "Set by the parent's server for each call it makes on a shard (README \"Scaling out\"); it only moves the late horizon later.",
							   &zipper_lake_parent_newest_change,
							   "",
							   PGC_USERSET,
							   GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE | GUC_NO_RESET_ALL,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zipper_lake.shard_rows",
							   "Internal: the keys a shard's call takes, by the hash partitioning of its zipper parent.",
							   "Set by the parent's server for apply_events() on a shard, which receives every event (README \"Scaling out\").",
							   &zipper_lake_shard_rows,
							   "",
							   PGC_USERSET,
							   GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE | GUC_NO_RESET_ALL,
							   NULL, NULL, NULL);
	MarkGUCPrefixReserved("zipper_lake");
}

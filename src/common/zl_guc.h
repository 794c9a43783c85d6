/*-------------------------------------------------------------------------
 *
 * zl_guc.h
 *	  The settings of zipper_lake (zl_guc.c).
 *
 * Each setting zipper_lake.<name> is the C variable zipper_lake_<name>;
 * memory settings hold kilobytes, like work_mem.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_GUC_H
#define ZL_GUC_H

#include "common/zl_common.h"

#include "common/zl_common.h"

extern bool zipper_lake_enable_pruning;
extern bool zipper_lake_enable_scan_aggregates;
extern bool zipper_lake_columnar_current;
extern int	zipper_lake_columnar_chunk_rows;
extern int	zipper_lake_relocate_min_blocks;
extern int	zipper_lake_columnar_compression;
extern int	zipper_lake_key_cache_memory;
extern int	zipper_lake_retained_memory;
extern int	zipper_lake_maintenance_pause;
extern int	zipper_lake_apply_workers;
extern int	zipper_lake_apply_prepared_pause;
extern bool zipper_lake_follow_advance_slot;
extern int	zipper_lake_apply_worker_idle;
extern char *zipper_lake_parent_newest_change;
extern char *zipper_lake_shard_rows;

/* zipper_lake.columnar_compression */
typedef enum ZLCompression
{
	ZL_COMPRESSION_ZSTD,
	ZL_COMPRESSION_LZ4
} ZLCompression;

/*
 * Rows of a chunk of columnar sub-groups (zl_columnar_write.c): small
 * enough that reading one row (a key probe) decodes little, large enough
 * for zstd and the directory (measured: README "Storage formats").
 */
#define ZL_CHUNK_ROWS_DEFAULT	1024

/* zipper_lake.relocate_min_blocks: free blocks worth moving sub-groups for (zl_relocate.c) */
#define ZL_RELOCATE_MIN_BLOCKS_DEFAULT	128

/* zipper_lake.key_cache_memory: key directories, and as much for indexes */
#define ZL_KEY_CACHE_KB_DEFAULT		(256 * 1024)
#define ZL_KEY_CACHE_BYTES			((Size) zipper_lake_key_cache_memory * 1024)

/* zipper_lake.retained_memory (zl_malloc.c) */
#define ZL_RETAINED_MEMORY_KB_DEFAULT	(256 * 1024)

extern void zl_guc_init(void);

#endif							/* ZL_GUC_H */

/*-------------------------------------------------------------------------
 *
 * zl_storage_internal.h
 *	  What stays inside storage/.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_STORAGE_INTERNAL_H
#define ZL_STORAGE_INTERNAL_H

#include "storage/zl_storage.h"

/* the metapage (zl_storage.c) */
#define ZL_MAGIC				0x5A4C4D31	/* "ZLM1" */
#define ZL_FORMAT_VERSION		1

/* bytes of a columnar sub-group's stream on each of its pages */
#define ZL_STREAM_PAGE_BYTES	(BLCKSZ - SizeOfPageHeaderData)

/* recently read buffers (zl_recentbuf.c) */
extern Buffer zl_read_block(Relation rel, BlockNumber block);
extern void zl_remember_block(Relation rel, BlockNumber block, Buffer buffer);

/* the columnar writer's pages (zl_storage.c) */
extern void zl_page_writer_add_bytes(ZLPageWriter *writer, const char *data, Size len);

/* the positions of a range of key hashes (zl_keys.c) */
extern int32 *zl_key_directory_range(const bytea *dir, uint32 lo, uint32 hi,
									 int *npositions);

#endif							/* ZL_STORAGE_INTERNAL_H */

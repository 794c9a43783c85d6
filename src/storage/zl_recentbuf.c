/*-------------------------------------------------------------------------
 *
 * zl_recentbuf.c
 *	  Reading a block through the buffer this backend last found it in.
 *
 * An apply reads the open versions of its keys by position, one or two to
 * a page of the current partition (zl_subgroup_read.c): ReadBuffer's look-up of
 * each page in the shared buffer mapping table is two cache misses of a
 * table as large as shared_buffers, a twentieth of an apply's time.  The
 * next apply reads mostly the same pages, or pages the apply before
 * wrote, so the backend remembers in which buffer it found or wrote each
 * block (zl_storage.c's page writer tells it), in a direct-mapped table of
 * RECENT_SLOTS slots (192 kB, made on first use), and asks
 * ReadRecentBuffer() to pin that buffer: it checks under the buffer
 * header's lock that the buffer still holds the block (the tag names the
 * relation file, fork and block), so a stale or colliding guess only
 * costs the ReadBuffer() it falls back to.
 *
 *-------------------------------------------------------------------------
 */
#include "storage/zl_storage_internal.h"

#include "storage/bufmgr.h"
#include "utils/memutils.h"

#define RECENT_SLOTS	16384	/* a power of two */

typedef struct RecentSlot
{
	Oid			relnode;
	BlockNumber block;
	Buffer		buffer;
} RecentSlot;

static RecentSlot *recent = NULL;

static RecentSlot *
recent_slot(Relation rel, BlockNumber block)
{
	if (recent == NULL)
		recent = MemoryContextAllocZero(TopMemoryContext, sizeof(RecentSlot) * RECENT_SLOTS);
	return &recent[(block ^ (rel->rd_node.relNode * 2654435761U)) & (RECENT_SLOTS - 1)];
}

/* the buffer a block of the relation is in now (read or just written) */
void
zl_remember_block(Relation rel, BlockNumber block, Buffer buffer)
{
	RecentSlot *slot = recent_slot(rel, block);

	slot->relnode = rel->rd_node.relNode;
	slot->block = block;
	slot->buffer = buffer;
}

/* ReadBuffer(rel, block), pinning the buffer it was last found in if it still holds it */
Buffer
zl_read_block(Relation rel, BlockNumber block)
{
	RecentSlot *slot = recent_slot(rel, block);
	Buffer		buffer;

	if (slot->relnode == rel->rd_node.relNode && slot->block == block &&
		BufferIsValid(slot->buffer) &&
		ReadRecentBuffer(rel->rd_node, MAIN_FORKNUM, block, slot->buffer))
		return slot->buffer;
	buffer = ReadBuffer(rel, block);
	zl_remember_block(rel, block, buffer);
	return buffer;
}

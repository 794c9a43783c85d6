/*-------------------------------------------------------------------------
 *
 * zl_prune.c
 *	  Pruning bounds: which sub-groups a read needs, and which rows.
 *
 * A read is described by bounds on the two period columns, as inclusive
 * instant ranges: valid_from in [from_lo, from_hi] AND valid_to in
 * [to_lo, to_hi] — or, for changes(), OR instead of AND.  as_of(T) is
 * valid_from <= T AND valid_to > T; current() is valid_to = open end.
 *
 * Every sub-group knows two ranges without reading a page: its rows'
 * valid_to lie in the range of its partition (the dates of that partition
 * in the table's zone, or exactly the open end in the current partition)
 * and their valid_from lie in [first_start, last_start].  From these:
 *
 *   ZL_SKIP       no row can qualify: the sub-group is not read;
 *   ZL_ALL_MATCH  every row qualifies: rows are returned with no period
 *                 check at all;
 *   ZL_CHECK      rows are checked one by one.
 *
 * Unplaced sub-groups (rows loaded before registration) are always
 * checked.  With zipper_lake.enable_pruning off, every sub-group is
 * ZL_CHECK, which gives the unpruned reference answer.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "access/zl_access_internal.h"

#include "access/stratnum.h"

/* bounds that let every row through (either: OR the two columns) */
ZLScanBounds
zl_bounds_init(bool either)
{
	ZLScanBounds b = {either, ZL_UNBOUNDED_LO, ZL_UNBOUNDED_HI,
	ZL_UNBOUNDED_LO, ZL_UNBOUNDED_HI};

	return b;
}

/*
 * Narrow one column's range by "column <strategy> value" (a btree strategy
 * number).  Strict comparisons at the infinities empty the range instead of
 * wrapping around.
 */
void
zl_bounds_narrow(ZLScanBounds *b, bool on_valid_from, int strategy, int64 value)
{
	int64	   *lo = on_valid_from ? &b->from_lo : &b->to_lo;
	int64	   *hi = on_valid_from ? &b->from_hi : &b->to_hi;

	switch (strategy)
	{
		case BTLessStrategyNumber:
			if (value == PG_INT64_MIN)
				*hi = PG_INT64_MIN, *lo = PG_INT64_MAX;
			else
				*hi = Min(*hi, value - 1);
			break;
		case BTLessEqualStrategyNumber:
			*hi = Min(*hi, value);
			break;
		case BTEqualStrategyNumber:
			*lo = Max(*lo, value);
			*hi = Min(*hi, value);
			break;
		case BTGreaterEqualStrategyNumber:
			*lo = Max(*lo, value);
			break;
		case BTGreaterStrategyNumber:
			if (value == PG_INT64_MAX)
				*hi = PG_INT64_MIN, *lo = PG_INT64_MAX;
			else
				*lo = Max(*lo, value + 1);
			break;
		default:
			elog(ERROR, "unexpected bound strategy %d", strategy);
	}
}

static bool
ranges_overlap(int64 lo1, int64 hi1, int64 lo2, int64 hi2)
{
	return lo1 <= hi2 && lo2 <= hi1;
}

static bool
range_within(int64 lo, int64 hi, int64 outer_lo, int64 outer_hi)
{
	return outer_lo <= lo && hi <= outer_hi;
}

bool
zl_bounds_match(const ZLScanBounds *b, int64 from, int64 to)
{
	bool		from_ok = b->from_lo <= from && from <= b->from_hi;
	bool		to_ok = b->to_lo <= to && to <= b->to_hi;

	return b->either ? (from_ok || to_ok) : (from_ok && to_ok);
}

/* an instant that zl_partition_of() can take a day off or add a day to */
static bool
within_calendar(int64 instant)
{
	return instant > MIN_TIMESTAMP + 2 * USECS_PER_DAY &&
		instant < END_TIMESTAMP - 2 * USECS_PER_DAY;
}

/*
 * The catalog filter for bounds: every sub-group decide() does not skip
 * passes it.  The valid_to range becomes a range of partitions, widened by
 * a day on each side because instants cut into local dates need not be in
 * order where clocks go back (see zl_partition_range); an end that is not
 * an ordinary instant leaves that side open.
 */
/* the first partition that can hold a valid_to of to_lo or later */
static DateADT
first_partition_from(const ZLTableOptions *opts, int64 to_lo)
{
	if (to_lo >= opts->open_end)
		return ZL_CURRENT_PARTITION;	/* placed versions end at most there */
	if (within_calendar(to_lo))
		return zl_partition_of(opts, to_lo - USECS_PER_DAY);
	return DATEVAL_NOBEGIN;
}

void
zl_bounds_filter(const ZLTableOptions *opts, const ZLScanBounds *b, ZLSubGroupFilter *f)
{
	/* placed versions end after they begin (zl_place.c checks it) */
	int64		to_lo_of_from = (b->from_lo != ZL_UNBOUNDED_LO && b->from_lo < PG_INT64_MAX) ?
		b->from_lo + 1 : ZL_UNBOUNDED_LO;
	int64		to_lo = b->either ? b->to_lo : Max(b->to_lo, to_lo_of_from);

	f->either = b->either;
	f->from_lo = b->from_lo;
	f->from_hi = b->from_hi;
	f->from_min_partition = first_partition_from(opts, to_lo_of_from);
	f->min_partition = DATEVAL_NOBEGIN;
	f->max_partition = DATEVAL_NOEND;	/* the current partition included */

	if (to_lo > b->to_hi)
	{
		/* nothing qualifies by valid_to: no partition passes */
		f->min_partition = DATEVAL_NOEND;
		f->max_partition = DATEVAL_NOBEGIN;
		return;
	}
	f->min_partition = first_partition_from(opts, to_lo);
	if (b->to_hi < opts->open_end && within_calendar(b->to_hi))
		f->max_partition = zl_partition_of(opts, b->to_hi + USECS_PER_DAY);
}

static ZLPruneDecision
decide(const ZLTableOptions *opts, const ZLScanBounds *b, const ZLSubGroup *sg)
{
	int64		to_lo,
				to_hi;
	bool		from_any,
				from_all,
				to_any,
				to_all;

	if (!sg->placed)
		return ZL_CHECK;
	if (!b->either && b->from_lo == ZL_UNBOUNDED_LO && b->from_hi == ZL_UNBOUNDED_HI &&
		b->to_lo == ZL_UNBOUNDED_LO && b->to_hi == ZL_UNBOUNDED_HI)
		return ZL_ALL_MATCH;	/* no bounds (a key probe alone) */

	zl_partition_range(opts, sg->partition_end, &to_lo, &to_hi);
	to_any = ranges_overlap(to_lo, to_hi, b->to_lo, b->to_hi);
	to_all = range_within(to_lo, to_hi, b->to_lo, b->to_hi);
	from_any = ranges_overlap(sg->first_start, sg->last_start, b->from_lo, b->from_hi);
	from_all = range_within(sg->first_start, sg->last_start, b->from_lo, b->from_hi);

	if (b->either)
	{
		if (!from_any && !to_any)
			return ZL_SKIP;
		return (from_all || to_all) ? ZL_ALL_MATCH : ZL_CHECK;
	}
	if (!from_any || !to_any)
		return ZL_SKIP;
	return (from_all && to_all) ? ZL_ALL_MATCH : ZL_CHECK;
}

/* the decision for one sub-group (prune false: check every row) */
ZLPruneDecision
zl_prune_decide(const ZLTableOptions *opts, const ZLScanBounds *bounds, bool prune,
				const ZLSubGroup *sg)
{
	return prune ? decide(opts, bounds, sg) : ZL_CHECK;
}

/*
 * Decide every sub-group of a scan and count the sub-groups kept; the
 * partitions and file groups kept are counted on request
 * (zl_prune_count_groups): sorting them costs more than a point lookup.
 */
void
zl_prune(const ZLTableOptions *opts, const ZLScanBounds *bounds, bool prune,
		 const ZLSubGroup *sgs, int n, uint8 *decisions, ZLPruneStats *stats)
{
	memset(stats, 0, sizeof(*stats));
	for (int i = 0; i < n; i++)
	{
		decisions[i] = prune ? decide(opts, bounds, &sgs[i]) : ZL_CHECK;
		if (decisions[i] != ZL_SKIP)
		{
			stats->subgroups_kept++;
			if (decisions[i] == ZL_ALL_MATCH)
				stats->subgroups_unchecked++;
		}
	}
	stats->subgroups_total = stats->subgroups_loaded = n;
}

/*
 * The partitions and file groups of the sub-groups, and of those kept,
 * each kept when anything in it is read.
 */
void
zl_prune_count_groups(const ZLSubGroup *sgs, int n, const uint8 *decisions,
					  ZLPruneStats *stats)
{
	int64	   *partitions = palloc(sizeof(int64) * Max(n, 1) * 2);
	int64	   *file_groups = palloc(sizeof(int64) * Max(n, 1) * 2);
	int			nkept = 0;

	for (int i = 0; i < n; i++)
	{
		const ZLSubGroup *sg = &sgs[i];
		int64		partition = sg->placed ? sg->partition_end : PG_INT64_MIN;

		partitions[i] = partition;
		file_groups[i] = sg->file_group;
		if (decisions[i] != ZL_SKIP)
		{
			partitions[n + nkept] = partition;
			file_groups[n + nkept] = sg->file_group;
			nkept++;
		}
	}
	stats->partitions_total = zl_count_distinct(partitions, n);
	stats->file_groups_total = zl_count_distinct(file_groups, n);
	stats->partitions_kept = zl_count_distinct(partitions + n, nkept);
	stats->file_groups_kept = zl_count_distinct(file_groups + n, nkept);
	pfree(partitions);
	pfree(file_groups);
}

/* ---------- what the read helpers select ---------- */

/*
 * What each helper selects, written once: the function form turns it into
 * pruning bounds (api/zl_read.c), the planner into the quals of the
 * subquery it inlines (planner/zl_inline.c).
 */
static const ZLReadHelper read_helpers[] = {
	{"as_of", 1, {"as_of time"}, false, 2, {
			{true, BTLessEqualStrategyNumber, 1},
			{false, BTGreaterStrategyNumber, 1}}},
	{"current", 0, {NULL}, false, 1, {
			{false, BTEqualStrategyNumber, ZL_TERM_OPEN_END}}},
	{"changes", 2, {"start of the window", "end of the window"}, true, 5, {
			{true, BTGreaterEqualStrategyNumber, 1},
			{true, BTLessStrategyNumber, 2},
			{false, BTGreaterEqualStrategyNumber, 1},
			{false, BTLessStrategyNumber, 2},
			{false, BTLessStrategyNumber, ZL_TERM_OPEN_END}}},	/* open versions have not ended */
};

const ZLReadHelper *
zl_read_helper(const char *name)
{
	for (int i = 0; i < lengthof(read_helpers); i++)
		if (strcmp(read_helpers[i].name, name) == 0)
			return &read_helpers[i];
	return NULL;
}

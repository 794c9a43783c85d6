/*-------------------------------------------------------------------------
 *
 * zl_aggregate_memo.c
 *	  A small direct-mapped memo of keys already in a hash table, for the
 *	  ZipperAggregate's per-row lookups (zl_aggregate_group.c's groups,
 *	  zl_aggregate_distinct.c's distinct inputs).
 *
 * Finding a row's group in a TupleHashTable costs a slot store, a call of
 * the key type's hash function and of its equality operator through fmgr,
 * and a probe of the table: half the grouped node's time when the key is
 * "branch", an integer with 100 values among a million rows.  When the
 * table's equality is bitwise on the datum, a memo of 1024 slots in front
 * of it answers nearly every row with one multiplication and compare: slot
 * hash(key) holds the last key seen there and what the table gave for it.
 *
 * Bitwise means: one key column of a pass-by-value type whose equality
 * operator (the GROUP BY / DISTINCT clause's) is the same-type member of
 * the built-in btree families integer_ops (int2, int4, int8), oid_ops,
 * datetime_ops (date, timestamp, timestamptz), time_ops or bool_ops.
 * Their equality functions compare the datum's low typlen bytes as an
 * integer (bool: zero or not), so two datums are equal exactly when those
 * bits are; the memo compares them so.  Anything else -- floats (-0 = 0,
 * NaN), numeric, text under any collation, a user's operator -- has no
 * memo and every row goes to the table.
 *
 * The memo only remembers a key after the table gave it an entry, and is
 * cleared whenever the table is emptied or dropped; the caller never asks
 * it about NULL (a group of the NULL key is remembered apart).  So a hit
 * is an entry that is in the table, and a miss costs only the table's own
 * lookup.  Its 16 kB are a constant besides the bounded table.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "access/zl_access.h"
#include "planner/zl_planner_internal.h"

#include "catalog/pg_opfamily.h"
#include "utils/lsyscache.h"

/* btree operator families of PostgreSQL 15 without a macro in pg_opfamily_d.h */
#define DATETIME_BTREE_FAMILY	434
#define TIME_BTREE_FAMILY		1996

/*
 * The memo for a single key of type type under the equality eqop, or NULL
 * when that equality is not certainly bitwise (then the table decides).
 */
ZLKeyMemo *
zl_key_memo_create(Oid type, Oid eqop)
{
	static const Oid bitwise_families[] = {
		INTEGER_BTREE_FAM_OID, OID_BTREE_FAM_OID, DATETIME_BTREE_FAMILY,
		TIME_BTREE_FAMILY, BOOL_BTREE_FAM_OID
	};
	Oid			left,
				right;
	int16		typlen;
	bool		typbyval;
	bool		bitwise = false;
	ZLKeyMemo  *memo;

	op_input_types(eqop, &left, &right);
	if (left != right || getBaseType(type) != left)
		return NULL;
	get_typlenbyval(left, &typlen, &typbyval);
	if (!typbyval || (typlen != 1 && typlen != 2 && typlen != 4 && typlen != 8))
		return NULL;
	for (int i = 0; i < lengthof(bitwise_families); i++)
		if (op_in_opfamily(eqop, bitwise_families[i]))
			bitwise = true;
	if (!bitwise || (typlen == 1 && !op_in_opfamily(eqop, BOOL_BTREE_FAM_OID)))
		return NULL;

	memo = palloc(sizeof(ZLKeyMemo));
	memo->mask = typlen == 8 ? ~(uint64) 0 : ((uint64) 1 << (typlen * 8)) - 1;
	memo->is_bool = typlen == 1;
	zl_key_memo_clear(memo);
	return memo;
}

/* forget every key (the table was emptied) */
void
zl_key_memo_clear(ZLKeyMemo *memo)
{
	memset(memo->entries, 0, sizeof(memo->entries));
}

/*-------------------------------------------------------------------------
 *
 * zl_keyprobe.c
 *	  Key predicates of plain SQL: which keys a ZipperScan reads.
 *
 * Every placed sub-group stores a key directory: its rows' key hashes and
 * positions, sorted by hash (zl_keys.c).  A query that names the keys it
 * wants — "id = 42", "id = $1", "id IN (1, 2)", "id = ANY ($1)", "id IS
 * NULL", one such term for every column of a multi-column key — lets the
 * ZipperScan hash those keys and read only the rows the directories name
 * (zl_scan_set_keys): a key's history costs a binary search per sub-group
 * and a page or two per version instead of a scan of the table.
 *
 * Planner
 * -------
 * A term is recognized when its operator is an equality of the key
 * column type's default hash operator family (cross-type ones too, like
 * int4 = int8: the family promises equal hashes for equal values) and its
 * other side has no Var of the query level, no volatile function and no
 * sub-plan.  Its collation must be the column's, or both must be
 * deterministic (then hashing ignores it).  Where hashing would disagree
 * with the comparison (a cast on the column, another family's operator)
 * nothing is recognized and the scan reads every kept sub-group.  The
 * terms stay in the plan's filter too: they recheck every row the probe
 * returns, so hash collisions never show.
 *
 * Executor
 * --------
 * When the scan starts, each term is evaluated to its values (none for
 * NULL, IS NULL or an empty array: key columns are never NULL), hashed by
 * the family's hash function for the value's type with the column's
 * collation, and the hashes of all combinations are combined in key order
 * exactly as zl_key_hash() combines a stored key's.  More than
 * ZL_KEYPROBE_MAX_KEYS combinations are not probed: the scan then reads
 * every kept sub-group and the filter does the work.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "planner/zl_planner_internal.h"

#include "access/hash.h"
#include "catalog/pg_am.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_opclass.h"
#include "commands/defrem.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "optimizer/optimizer.h"
#include "optimizer/paths.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_locale.h"

#define ZL_KEYPROBE_MAX_KEYS	(1024 * 1024)

typedef enum KeyTermKind
{
	KEY_EQUAL,					/* column = value */
	KEY_ANY,					/* column = ANY (array) */
	KEY_IS_NULL					/* column IS NULL */
} KeyTermKind;

/* a recognized term, as custom_private keeps it */
typedef struct KeyTerm
{
	KeyTermKind kind;
	int			value_arg;		/* KEY_EQUAL: which argument is the value */
	Oid			hash_proc;		/* for the value's type (the element's for ANY) */
} KeyTerm;

struct ZLKeyProbe
{
	int			nterms;
	KeyTermKind *kinds;
	ExprState **values;			/* the value side (NULL for IS NULL) */
	FmgrInfo   *hash;
	Oid		   *collation;		/* the key column's */
	Oid		   *element_type;	/* KEY_ANY: the array's element type */
};

/* a Var of key column attnum of the scanned relation, under binary relabelings */
static bool
is_key_var(Node *node, Index rti, AttrNumber attnum)
{
	while (node != NULL && IsA(node, RelabelType))
		node = (Node *) ((RelabelType *) node)->arg;
	return node != NULL && IsA(node, Var) && ((Var *) node)->varno == rti &&
		((Var *) node)->varlevelsup == 0 && ((Var *) node)->varattno == attnum;
}

static bool
collations_agree(Oid column, Oid comparison)
{
	if (column == comparison || !OidIsValid(column))
		return true;
	return OidIsValid(comparison) &&
		get_collation_isdeterministic(column) && get_collation_isdeterministic(comparison);
}

/*
 * The hash function the key column's family gives values of type
 * value_type, if opno (column on the left) is one of its equalities.
 */
static Oid
family_hash_proc(Form_pg_attribute att, Oid opno, Oid value_type)
{
	Oid			family = zl_default_opfamily(att->atttypid, HASH_AM_OID, NULL);

	if (!OidIsValid(family) || !OidIsValid(opno))
		return InvalidOid;
	if (get_op_opfamily_strategy(opno, family) != HTEqualStrategyNumber)
		return InvalidOid;
	return get_opfamily_proc(family, value_type, value_type, HASHSTANDARD_PROC);
}

/* is clause a term on key column att?  Fills term when it is */
static bool
recognize_term(Expr *clause, Index rti, Form_pg_attribute att, KeyTerm *term)
{
	if (IsA(clause, NullTest))
	{
		NullTest   *test = (NullTest *) clause;

		if (test->nulltesttype != IS_NULL || test->argisrow ||
			!is_key_var((Node *) test->arg, rti, att->attnum))
			return false;
		term->kind = KEY_IS_NULL;
		term->value_arg = 0;
		term->hash_proc = InvalidOid;
		return true;
	}
	if (IsA(clause, OpExpr) && list_length(((OpExpr *) clause)->args) == 2)
	{
		OpExpr	   *op = (OpExpr *) clause;

		if (!collations_agree(att->attcollation, op->inputcollid))
			return false;
		for (int side = 0; side < 2; side++)
		{
			Node	   *value = list_nth(op->args, 1 - side);
			Oid			opno = side == 0 ? op->opno : get_commutator(op->opno);

			if (!is_key_var(list_nth(op->args, side), rti, att->attnum) ||
				!zl_is_scan_constant(value, rti))
				continue;
			term->hash_proc = family_hash_proc(att, opno, exprType(value));
			if (!OidIsValid(term->hash_proc))
				return false;
			term->kind = KEY_EQUAL;
			term->value_arg = 1 - side;
			return true;
		}
		return false;
	}
	if (IsA(clause, ScalarArrayOpExpr))
	{
		ScalarArrayOpExpr *op = (ScalarArrayOpExpr *) clause;
		Node	   *array = lsecond(op->args);
		Oid			element_type = get_element_type(exprType(array));

		if (!op->useOr || !is_key_var(linitial(op->args), rti, att->attnum) ||
			!zl_is_scan_constant(array, rti) || !OidIsValid(element_type) ||
			!collations_agree(att->attcollation, op->inputcollid))
			return false;
		term->hash_proc = family_hash_proc(att, op->opno, element_type);
		if (!OidIsValid(term->hash_proc))
			return false;
		term->kind = KEY_ANY;
		term->value_arg = 1;
		return true;
	}
	return false;
}

/*
 * The key terms among a list of clauses (bare clauses or RestrictInfos):
 * one per key column, in key order, with what the executor needs of each
 * (*info: int lists of kind, value side and hash function), or NIL when
 * some key column has none.  *outer (if asked) gets the other relations
 * the chosen terms refer to: join clauses make a parameterized scan.
 */
List *
zl_keyprobe_extract(List *clauses, Index rti, const ZLTableOptions *opts,
					TupleDesc tupdesc, List **info, Relids *outer)
{
	List	   *terms = NIL;

	*info = NIL;
	if (outer != NULL)
		*outer = NULL;
	for (int k = 0; k < opts->nkeys; k++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, opts->key_attnums[k] - 1);
		ListCell   *lc;
		bool		found = false;

		foreach(lc, clauses)
		{
			Expr	   *clause = lfirst(lc);
			KeyTerm		term;

			RestrictInfo *rinfo = NULL;

			if (IsA(clause, RestrictInfo))
			{
				rinfo = (RestrictInfo *) clause;
				if (rinfo->pseudoconstant)
					continue;
				clause = rinfo->clause;
			}
			if (recognize_term(clause, rti, att, &term))
			{
				if (outer != NULL && rinfo != NULL)
					*outer = bms_union(*outer, bms_del_member(bms_copy(rinfo->clause_relids), rti));
				terms = lappend(terms, clause);
				*info = lappend(*info, list_make3_oid(term.kind, term.value_arg,
													  term.hash_proc));
				found = true;
				break;
			}
		}
		if (!found)
		{
			*info = NIL;
			return NIL;
		}
	}
	return terms;
}

/* is an equivalence class member the key column of arg? */
static bool
member_is_key_column(PlannerInfo *root, RelOptInfo *rel, EquivalenceClass *ec,
					 EquivalenceMember *em, void *arg)
{
	return is_key_var((Node *) em->em_expr, rel->relid, *(AttrNumber *) arg);
}

/*
 * Join clauses that could give a key column its values from other
 * relations: those the planner derives from equivalence classes ("d.id =
 * f.cust_id" is one) and the rel's other join clauses.  A scan
 * parameterized by those relations probes once per outer row.
 */
List *
zl_keyprobe_join_clauses(PlannerInfo *root, RelOptInfo *rel, const ZLTableOptions *opts)
{
	List	   *clauses = list_copy(rel->joininfo);

	for (int k = 0; k < opts->nkeys; k++)
	{
		AttrNumber	attnum = opts->key_attnums[k];

		clauses = list_concat(clauses,
							  generate_implied_equalities_for_column(root, rel,
																	 member_is_key_column,
																	 &attnum,
																	 rel->lateral_referencers));
	}
	return clauses;
}

/* ---------- executor ---------- */

ZLKeyProbe *
zl_keyprobe_init(List *terms, List *info, const ZLTableOptions *opts, TupleDesc tupdesc,
				 PlanState *parent)
{
	ZLKeyProbe *probe = palloc0(sizeof(ZLKeyProbe));
	ListCell   *lc1,
			   *lc2;
	int			k = 0;

	probe->nterms = list_length(terms);
	probe->kinds = palloc0(sizeof(KeyTermKind) * probe->nterms);
	probe->values = palloc0(sizeof(ExprState *) * probe->nterms);
	probe->hash = palloc0(sizeof(FmgrInfo) * probe->nterms);
	probe->collation = palloc0(sizeof(Oid) * probe->nterms);
	probe->element_type = palloc0(sizeof(Oid) * probe->nterms);
	forboth(lc1, terms, lc2, info)
	{
		Expr	   *clause = lfirst(lc1);
		List	   *term = lfirst(lc2);
		Expr	   *value = NULL;

		probe->kinds[k] = (KeyTermKind) linitial_oid(term);
		if (probe->kinds[k] == KEY_EQUAL)
			value = list_nth(((OpExpr *) clause)->args, (int) lsecond_oid(term));
		else if (probe->kinds[k] == KEY_ANY)
		{
			value = lsecond(((ScalarArrayOpExpr *) clause)->args);
			probe->element_type[k] = get_element_type(exprType((Node *) value));
		}
		if (value != NULL)
		{
			probe->values[k] = ExecInitExpr(value, parent);
			fmgr_info(lthird_oid(term), &probe->hash[k]);
		}
		probe->collation[k] = TupleDescAttr(tupdesc, opts->key_attnums[k] - 1)->attcollation;
		k++;
	}
	return probe;
}

/* the hashes of one term's values, into *hashes; their number */
static int
term_hashes(ZLKeyProbe *probe, int k, ExprContext *econtext, uint32 **hashes)
{
	bool		isnull;
	Datum		value;

	*hashes = NULL;
	if (probe->kinds[k] == KEY_IS_NULL)
		return 0;
	value = ExecEvalExprSwitchContext(probe->values[k], econtext, &isnull);
	if (isnull)
		return 0;
	if (probe->kinds[k] == KEY_EQUAL)
	{
		*hashes = palloc(sizeof(uint32));
		(*hashes)[0] = DatumGetUInt32(FunctionCall1Coll(&probe->hash[k], probe->collation[k],
														value));
		return 1;
	}
	else
	{
		ArrayType  *array = DatumGetArrayTypeP(value);
		int16		typlen;
		bool		typbyval;
		char		typalign;
		Datum	   *elements;
		bool	   *nulls;
		int			nelements,
					n = 0;

		get_typlenbyvalalign(probe->element_type[k], &typlen, &typbyval, &typalign);
		deconstruct_array(array, probe->element_type[k], typlen, typbyval, typalign,
						  &elements, &nulls, &nelements);
		*hashes = palloc(sizeof(uint32) * Max(nelements, 1));
		for (int e = 0; e < nelements; e++)
			if (!nulls[e])
				(*hashes)[n++] = DatumGetUInt32(FunctionCall1Coll(&probe->hash[k],
																  probe->collation[k],
																  elements[e]));
		return n;
	}
}

/*
 * The sorted, distinct hashes of every key the terms name (*nhashes may be
 * 0: no key), or NULL when there are too many to probe.  Allocated in the
 * caller's context.
 */
uint32 *
zl_keyprobe_hashes(ZLKeyProbe *probe, ExprContext *econtext, int *nhashes)
{
	uint32	   *combined = palloc(sizeof(uint32));
	int64		ncombined = 1;

	combined[0] = 0;			/* zl_key_hash() starts from 0, too */
	for (int k = 0; k < probe->nterms; k++)
	{
		uint32	   *hashes;
		int			n = term_hashes(probe, k, econtext, &hashes);
		uint32	   *next;
		int64		nnext = 0;

		if (ncombined * n > ZL_KEYPROBE_MAX_KEYS)
			return NULL;
		next = palloc(sizeof(uint32) * Max(ncombined * n, 1));
		for (int64 c = 0; c < ncombined; c++)
			for (int h = 0; h < n; h++)
				next[nnext++] = hash_combine(combined[c], hashes[h]);
		combined = next;
		ncombined = nnext;
	}
	qsort(combined, ncombined, sizeof(uint32), zl_key_hash_cmp);
	*nhashes = 0;
	for (int64 c = 0; c < ncombined; c++)
		if (*nhashes == 0 || combined[*nhashes - 1] != combined[c])
			combined[(*nhashes)++] = combined[c];
	return combined;
}

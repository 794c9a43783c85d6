/*-------------------------------------------------------------------------
 *
 * zl_apply_workers.c
 *	  Applying a batch to a zipper parent's leaves in background workers.
 *
 * With zipper_lake.apply_workers = n >= 2, apply_changes, apply_snapshot
 * and apply_events called on a zipper parent (README "Scaling out"), as a
 * statement of their own (outside a transaction block, READ COMMITTED,
 * in a transaction that has written nothing yet, with no lock on a leaf
 * and a source other sessions can read), apply the batch in
 * min(n, leaves) background workers, worker w taking leaves w, w + n, ...
 * as a serial call takes them (zl_apply_call_leaves), each in a
 * transaction of its own.  All leaves commit or none, by two-phase commit
 * with a coordinator:
 *
 *  1. Worker 0, the coordinator, starts first and takes a transaction id
 *     X; the others start after it.
 *  2. Every other worker applies its leaves and PREPAREs its transaction
 *     as "zipper_lake:X:w"; the coordinator applies its leaves and waits.
 *  3. When every worker has prepared, the leader tells the coordinator to
 *     commit: that commit is the decision, durable in the commit log.
 *     Then the others COMMIT PREPARED.  If any worker fails, or the
 *     leader is interrupted before the decision, the coordinator aborts
 *     and the others ROLLBACK PREPARED; the leader raises the worker's
 *     error.
 *
 * After a crash, a prepared transaction "zipper_lake:X:w" is settled by
 * X alone (zl_apply_resolver.c): committed if X committed, rolled back if
 * X aborted or never finished.  The leader settles what earlier calls
 * left in its database before it starts workers.
 *
 * So the batch commits when the call returns, not with the caller's
 * transaction (which is why it must be a statement of its own: a later
 * rollback would not undo it, and a prepared transaction would keep
 * locks the caller could wait on); readers see the coordinator's leaves
 * first and the others' a moment later.  Everything else is applied leaf
 * by leaf in the caller's transaction.
 *
 * Waits: the leader first takes the call's locks (lock_leaves: the
 * parent's, then every leaf's and its writer lock, in partition order) as
 * the leader of a lock group its workers join for the job, so its own
 * waits are lock waits the deadlock detector sees, and its workers wait
 * neither for it nor for each other; their waits on other sessions are
 * seen as the group's.  Workers connect as the bootstrap superuser and
 * work as the leader's role and security context, with its time zone,
 * date styles and work_mem, in READ COMMITTED.  Each reads the batch with
 * its own snapshot: the source must not change during the call.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "common/zl_guc.h"
#include "catalog/zl_catalog.h"
#include "storage/zl_storage.h"
#include "apply/zl_apply.h"
#include "apply/zl_apply_internal.h"
#include "remote/zl_remote.h"

#include "access/table.h"
#include "access/twophase.h"
#include "catalog/pg_authid.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/lwlock.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/partcache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "partitioning/partdesc.h"

PGDLLEXPORT void zipper_lake_apply_worker_main(Datum main_arg);

#define MAX_APPLY_WORKERS 64

/*
 * The leader's settings a worker takes for each job: what converts and
 * shows values as the caller's session would, and the memory it may use.
 */
static const char *const copied_settings[] = {"TimeZone", "DateStyle", "IntervalStyle", "work_mem"};
#define NSETTINGS lengthof(copied_settings)

typedef enum WorkerState
{
	WORKER_STARTING,
	WORKER_READY,				/* applied: prepared, or (the coordinator) waiting */
	WORKER_FAILED,
	WORKER_FINISHED				/* committed or rolled back */
} WorkerState;

typedef enum Decision
{
	DECISION_NONE,
	DECISION_COMMIT,
	DECISION_ABORT
} Decision;

typedef struct WorkerSlot
{
	slock_t		mutex;
	WorkerState state;
	PGPROC	   *proc;			/* to wake it */
	int			pid;
	ApplyCounts counts;
	int			sqlerrcode;
	char		message[512];
	char		detail[512];
	char		hint[256];
} WorkerSlot;

typedef struct WorkersShared
{
	Oid			database;
	Oid			user;			/* the leader's role and security context */
	int			sec_context;
	PGPROC	   *leader;
	int			leader_pid;
	char		settings[NSETTINGS][64];	/* the leader's values of copied_settings */
	ZLApplyCall call;
	int			nworkers;
	pg_atomic_uint64 coordinator_xid;	/* X, a FullTransactionId; 0 until known */
	pg_atomic_uint32 decision;
	WorkerSlot	slots[FLEXIBLE_ARRAY_MEMBER];
} WorkersShared;

/* ---------- the workers ---------- */

static void
report(WorkersShared *shared, int w, WorkerState state)
{
	WorkerSlot *slot = &shared->slots[w];

	SpinLockAcquire(&slot->mutex);
	slot->state = state;
	SpinLockRelease(&slot->mutex);
	SetLatch(&shared->leader->procLatch);
}

/* the coordinator waits for the leader's decision */
static Decision
await_decision(WorkersShared *shared)
{
	for (;;)
	{
		Decision	d = (Decision) pg_atomic_read_u32(&shared->decision);

		if (d != DECISION_NONE)
			return d;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1000L,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* the others follow X: commit when it committed, once it is over */
static bool
await_coordinator(TransactionId coordinator)
{
	while (TransactionIdIsInProgress(coordinator))
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100L,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return TransactionIdDidCommit(coordinator);
}

static void
worker_gid(char *gid, uint64 coordinator_xid, int w)
{
	snprintf(gid, GIDSIZE, ZL_APPLY_GID_PREFIX UINT64_FORMAT ":%d", coordinator_xid, w);
}

/* apply worker w's leaves in the current transaction */
static void
apply_share(WorkersShared *shared, int w)
{
	ZLApplyLeaves *leaves;
	ApplyCounts counts = {0};

	PushActiveSnapshot(GetTransactionSnapshot());
	leaves = zl_apply_leaves_begin(shared->call.relid, w, shared->nworkers);
	zl_apply_call_leaves(&shared->call, leaves, w, shared->nworkers, &counts);
	zl_apply_leaves_end(leaves);
	PopActiveSnapshot();
	shared->slots[w].counts = counts;
}

/* keep an error for the leader to raise */
static void
keep_error(WorkersShared *shared, int w)
{
	WorkerSlot *slot = &shared->slots[w];
	ErrorData  *edata;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	edata = CopyErrorData();
	MemoryContextSwitchTo(old);
	slot->sqlerrcode = edata->sqlerrcode;
	strlcpy(slot->message, edata->message ? edata->message : "", sizeof(slot->message));
	strlcpy(slot->detail, edata->detail ? edata->detail : "", sizeof(slot->detail));
	strlcpy(slot->hint, edata->hint ? edata->hint : "", sizeof(slot->hint));
	report(shared, w, WORKER_FAILED);
}

/* how a worker is started: its pool slot (-1: none), else its job slot */
typedef struct WorkerStart
{
	int			pool_slot;
	int			w;
} WorkerStart;

static WorkersShared *
attach_job(dsm_handle job, dsm_segment **seg)
{
	*seg = dsm_attach(job);
	if (*seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zipper_lake apply worker found no job"),
				 errdetail("The call that started it has ended.")));
	return dsm_segment_address(*seg);
}

/* job slot w of a job: apply, prepare (or, the coordinator, wait), then finish */
/*
 * Join the leader's lock group for a job: the locks the leader took for
 * the call (every leaf's, in partition order) do not make its workers
 * wait, and the deadlock detector sees the leader and its workers as one.
 */
static void
join_leader(WorkersShared *shared)
{
	if (!BecomeLockGroupMember(shared->leader, shared->leader_pid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zipper_lake apply worker found its leader gone")));
}

/* after a job (holding no lock): leave the leader's group, as ProcKill does */
static void
leave_leader(void)
{
	PGPROC	   *leader = MyProc->lockGroupLeader;
	LWLock	   *partition_lock;

	if (leader == NULL)
		return;
	partition_lock = LockHashPartitionLockByProc(leader);
	LWLockAcquire(partition_lock, LW_EXCLUSIVE);
	dlist_delete(&MyProc->lockGroupLink);
	MyProc->lockGroupLeader = NULL;
	LWLockRelease(partition_lock);
}

/* the leader's role and settings, and READ COMMITTED, for a job */
static void
take_leader_context(WorkersShared *shared)
{
	/*
	 * The session is the bootstrap superuser's (a pooled worker serves
	 * leaders of any role): restricted, so that the table's code the apply
	 * runs (index expressions, constraints, triggers) cannot SET ROLE to it.
	 */
	SetUserIdAndSecContext(shared->user, shared->sec_context | SECURITY_RESTRICTED_OPERATION);
	for (int i = 0; i < NSETTINGS; i++)
		SetConfigOption(copied_settings[i], shared->settings[i], PGC_USERSET, PGC_S_SESSION);
	SetConfigOption("default_transaction_isolation", "read committed", PGC_USERSET, PGC_S_SESSION);
	SetConfigOption("default_transaction_read_only", "off", PGC_USERSET, PGC_S_SESSION);
}

static void
run_job(WorkersShared *shared, int w)
{
	char		gid[GIDSIZE];

	shared->slots[w].proc = MyProc;
	shared->slots[w].pid = MyProcPid;
	pgstat_report_activity(STATE_RUNNING, w == 0 ? "zipper_lake apply (coordinator)" :
						   "zipper_lake apply");
	if (pg_atomic_read_u32(&shared->decision) == DECISION_ABORT)
	{
		report(shared, w, WORKER_FINISHED);		/* given up before it began */
		return;
	}
	PG_TRY();
	{
		join_leader(shared);
		take_leader_context(shared);
		StartTransactionCommand();
		if (w == 0)
			pg_atomic_write_u64(&shared->coordinator_xid,
								U64FromFullTransactionId(GetTopFullTransactionId()));
		else
		{
			/* a transaction block, to be prepared; its id right after X */
			BeginTransactionBlock();
			CommitTransactionCommand();
			StartTransactionCommand();
			(void) GetTopTransactionId();
		}
		SetLatch(&shared->leader->procLatch);
		apply_share(shared, w);
		if (w > 0)
		{
			worker_gid(gid, pg_atomic_read_u64(&shared->coordinator_xid), w);
			if (!PrepareTransactionBlock(gid))
				elog(ERROR, "could not prepare transaction %s", gid);
			CommitTransactionCommand();
		}
	}
	PG_CATCH();
	{
		keep_error(shared, w);
		PG_RE_THROW();
	}
	PG_END_TRY();
	report(shared, w, WORKER_READY);

	if (w == 0)
	{
		Decision	decision = await_decision(shared);

		if (zipper_lake_apply_prepared_pause > 0)
			pg_usleep(zipper_lake_apply_prepared_pause * 1000L);
		if (decision == DECISION_COMMIT)
			CommitTransactionCommand();		/* the decision, in the commit log */
		else
			AbortCurrentTransaction();
		/* the others follow */
		for (int i = 1; i < shared->nworkers; i++)
			if (shared->slots[i].proc != NULL)
				SetLatch(&shared->slots[i].proc->procLatch);
	}
	else
	{
		bool		commit = await_coordinator(XidFromFullTransactionId(
																	 FullTransactionIdFromU64(pg_atomic_read_u64(&shared->coordinator_xid))));

		if (zipper_lake_apply_prepared_pause > 0)
			pg_usleep(zipper_lake_apply_prepared_pause * 1000L);
		StartTransactionCommand();
		FinishPreparedTransaction(gid, commit);
		CommitTransactionCommand();
	}
	leave_leader();
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, 0);
	report(shared, w, WORKER_FINISHED);
}

/*
 * A worker: connects to the leader's database, runs its job as the
 * leader's role, then (in the pool) waits for further jobs of that
 * database and role.
 */
void
zipper_lake_apply_worker_main(Datum main_arg)
{
	WorkerStart start;
	dsm_handle	job = DatumGetUInt32(main_arg);
	int			w;
	dsm_segment *seg;
	WorkersShared *shared;
	Oid			database;
	Oid			user;

	memcpy(&start, MyBgworkerEntry->bgw_extra, sizeof(start));
	w = start.w;
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	if (start.pool_slot >= 0)
		zl_apply_pool_first_job(start.pool_slot, &database, &user, &job, &w);
	shared = attach_job(job, &seg);
	/* as the bootstrap superuser, a NOLOGIN role's too; each job as its leader's */
	BackgroundWorkerInitializeConnectionByOid(shared->database, InvalidOid, 0);
	SetConfigOption("zipper_lake.apply_workers", "0", PGC_USERSET, PGC_S_SESSION);
	for (;;)
	{
		run_job(shared, w);
		dsm_detach(seg);
		if (start.pool_slot < 0 || !zl_apply_pool_next_job(start.pool_slot, &job, &w))
			break;
		shared = attach_job(job, &seg);
	}
	proc_exit(0);
}

/* ---------- the leader ---------- */

static void abandon_workers(bool wait);

/* the call running in workers, for the callbacks: at most one per backend */
static struct
{
	dsm_segment *seg;
	WorkersShared *shared;
	BackgroundWorkerHandle *handles[MAX_APPLY_WORKERS];	/* launched */
	pid_t		pids[MAX_APPLY_WORKERS];	/* taken from the pool */
} running;

/* may this call run in workers?  (the design comment says why each) */
static bool
workers_allowed(const ZLApplyCall *call, int *nworkers)
{
	Relation	parent;
	PartitionDesc pd;
	bool		allowed = true;

	if (zipper_lake_apply_workers < 2 || !zl_is_partitioned_table(call->relid))
		return false;
	if (IsTransactionBlock() || GetCurrentTransactionNestLevel() > 1 || IsolationUsesXactSnapshot() ||
		FullTransactionIdIsValid(GetTopFullTransactionIdIfAny()) ||
		get_rel_persistence(call->source_relid) == RELPERSISTENCE_TEMP)
	{
		ereport(DEBUG1,
				(errmsg_internal("zipper_lake: applying leaf by leaf in the caller's transaction")));
		return false;
	}
	if (max_prepared_xacts == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zipper_lake.apply_workers needs max_prepared_transactions"),
				 errdetail("max_prepared_transactions is 0; a call on a zipper parent in workers prepares a transaction per worker but one."),
				 errhint("Set max_prepared_transactions to zipper_lake.apply_workers times the calls that run at once, or set zipper_lake.apply_workers to 0.")));
	parent = table_open(call->relid, AccessShareLock);
	pd = RelationGetPartitionDesc(parent, true);
	*nworkers = Min(Min(zipper_lake_apply_workers, pd->nparts),
					Min(MAX_APPLY_WORKERS, max_prepared_xacts + 1));
	for (int i = 0; i < pd->nparts && allowed; i++)
	{
		LOCKTAG		tag;

		if (zl_remote_is_shard(pd->oids[i]))
		{
			allowed = false;	/* shards apply in the caller's transaction */
			break;
		}

		SET_LOCKTAG_RELATION(tag, MyDatabaseId, pd->oids[i]);
		for (LOCKMODE mode = AccessShareLock; mode <= MaxLockMode && allowed; mode++)
			allowed = !LockHeldByMe(&tag, mode);
	}
	table_close(parent, AccessShareLock);
	return allowed && *nworkers >= 2;
}

/* a worker for job slot w: from the pool (zl_apply_pool.c), or launched */
static void
start_worker(int w)
{
	BackgroundWorker bgw;
	WorkerStart start;
	dsm_handle	job = dsm_segment_handle(running.seg);
	PGPROC	   *pooled = zl_apply_pool_take(job, w, &start.pool_slot, &running.pids[w]);
	MemoryContext old_context;
	bool		registered;

	if (pooled != NULL)
		return;
	start.w = w;
	zl_bgworker_init(&bgw, "zipper_lake apply worker", "zipper_lake_apply_worker_main",
					 BgWorkerStart_ConsistentState, BGW_NEVER_RESTART);
	bgw.bgw_main_arg = UInt32GetDatum(job);
	memcpy(bgw.bgw_extra, &start, sizeof(start));
	/* the abort callback reads the handle after the portal's memory is gone */
	old_context = MemoryContextSwitchTo(TopMemoryContext);
	registered = RegisterDynamicBackgroundWorker(&bgw, &running.handles[w]);
	MemoryContextSwitchTo(old_context);
	if (!registered)
	{
		zl_apply_pool_release(start.pool_slot);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start zipper_lake apply worker %d", w),
				 errdetail("Every background worker slot is taken (max_worker_processes)."),
				 errhint("Raise max_worker_processes, or lower zipper_lake.apply_workers; nothing was applied.")));
	}
}

static WorkerState
slot_state(WorkersShared *shared, int w)
{
	WorkerState state;

	SpinLockAcquire(&shared->slots[w].mutex);
	state = shared->slots[w].state;
	SpinLockRelease(&shared->slots[w].mutex);
	return state;
}

/* was a worker started (launched or taken from the pool) for job slot w? */
static bool
worker_started(int w)
{
	return running.handles[w] != NULL || running.pids[w] != 0;
}

/* the worker of job slot w, 0 when not known yet */
static pid_t
worker_pid(int w)
{
	pid_t		pid = 0;

	if (running.handles[w] != NULL)
	{
		if (GetBackgroundWorkerPid(running.handles[w], &pid) != BGWH_STARTED)
			return 0;
		return pid;
	}
	return running.pids[w];
}

/* has the worker of job slot w stopped? */
static bool
worker_gone(int w)
{
	pid_t		pid;

	if (running.handles[w] != NULL)
		return GetBackgroundWorkerPid(running.handles[w], &pid) == BGWH_STOPPED;
	return running.pids[w] != 0 && BackendPidGetProc(running.pids[w]) == NULL;
}

static void
wait_a_moment(void)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100L,
					 PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
}

/*
 * Wait until workers first..last-1 reached state (or failed, or are
 * gone); the index of one that failed, or -1.
 */
static int
await_workers(int first, int last, WorkerState state)
{
	WorkersShared *shared = running.shared;

	for (;;)
	{
		bool		all = true;

		for (int w = first; w < last; w++)
		{
			WorkerState s = slot_state(shared, w);

			if (s == WORKER_FAILED)
				return w;
			if (s < state)
			{
				if (worker_gone(w))
					return w;
				all = false;
			}
		}
		if (all)
			return -1;
		wait_a_moment();
		CHECK_FOR_INTERRUPTS();
	}
}

/* wait until every worker finished or is gone, whatever happens; false if one is gone unfinished */
static bool
await_finish(int nworkers)
{
	bool		all_finished = true;

	HOLD_INTERRUPTS();
	for (int w = 0; w < nworkers; w++)
	{
		while (worker_started(w) && slot_state(running.shared, w) < WORKER_FINISHED &&
			   !worker_gone(w))
			wait_a_moment();
		if (worker_started(w) && slot_state(running.shared, w) < WORKER_FINISHED)
			all_finished = false;
	}
	RESUME_INTERRUPTS();
	return all_finished;
}

/* tell the coordinator (no error raised here) */
static void
decide(Decision decision)
{
	WorkersShared *shared = running.shared;

	if (shared == NULL)
		return;
	if (pg_atomic_read_u32(&shared->decision) == DECISION_NONE)
		pg_atomic_write_u32(&shared->decision, decision);
	if (shared->slots[0].proc != NULL)
		SetLatch(&shared->slots[0].proc->procLatch);
}

static void
forget_running(void)
{
	for (int w = 0; w < MAX_APPLY_WORKERS; w++)
		if (running.handles[w] != NULL)
			pfree(running.handles[w]);
	if (running.seg != NULL)
		dsm_detach(running.seg);
	memset(&running, 0, sizeof(running));
}

/*
 * Give up a call before its decision: abort, and stop the workers still
 * applying (their transactions abort; those that prepared follow the
 * coordinator, which aborts); with wait, until every one has finished,
 * so that nothing of the call is left when its error is raised.
 */
static void
abandon_workers(bool wait)
{
	WorkersShared *shared = running.shared;

	decide(DECISION_ABORT);
	for (int w = 0; w < shared->nworkers; w++)
	{
		pid_t		pid = worker_pid(w);

		if (slot_state(shared, w) >= WORKER_READY)
			continue;
		if (running.handles[w] != NULL)
			TerminateBackgroundWorker(running.handles[w]);
		else if (pid != 0)
			(void) kill(pid, SIGTERM);
	}
	if (wait)
		(void) await_finish(shared->nworkers);
}

/* the leader's transaction aborts (an error, an interrupt): so does the call */
static void
workers_xact_callback(XactEvent event, void *arg)
{
	if (running.shared == NULL)
		return;
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		abandon_workers(false);
		forget_running();
	}
}

static void
raise_worker_error(int w)
{
	WorkerSlot *slot = &running.shared->slots[w];

	abandon_workers(true);

	/*
	 * A worker stopped between its PREPARE and its report left its
	 * transaction prepared, holding its leaves' locks: the coordinator has
	 * aborted by now, so it is rolled back.
	 */
	(void) zl_apply_resolve();
	if (slot_state(running.shared, w) != WORKER_FAILED)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("zipper_lake apply worker %d exited before it finished", w),
				 errhint("See the server log; nothing was applied.")));
	ereport(ERROR,
			(errcode(slot->sqlerrcode),
			 errmsg("%s", slot->message),
			 slot->detail[0] ? errdetail("%s", slot->detail) : 0,
			 slot->hint[0] ? errhint("%s", slot->hint) : 0,
			 errcontext("zipper_lake apply worker %d", w)));
}

/*
 * The leader, the leader of a lock group its workers join, takes the locks
 * of the call first: SHARE UPDATE EXCLUSIVE on the parent (no partition
 * comes or goes, no other call in workers runs), and ROW EXCLUSIVE and the
 * writer lock of every leaf in partition order, as a call leaf by leaf
 * takes them.  Its waits are then ordinary lock waits the deadlock
 * detector sees, and its workers, members of its group, never wait for it
 * nor for each other.
 */
static void
lock_leaves(Oid relid)
{
	ZLParent   *parent;

	BecomeLockGroupLeader();
	parent = zl_parent_open(relid, ShareUpdateExclusiveLock);
	zl_apply_lock_leaves(parent, 0, 1);
	zl_parent_close(parent);
}

/*
 * Apply a call on a zipper parent in background workers, when settings
 * and the caller's transaction allow (else false: leaf by leaf).  The
 * batch is committed or rolled back when this returns.
 */
bool
zl_apply_in_workers(const ZLApplyCall *call, ApplyCounts *total)
{
	static bool callback_registered = false;
	int			nworkers = zipper_lake_apply_workers;
	WorkersShared *shared;
	Size		size;
	int			failed;

	if (!workers_allowed(call, &nworkers))
		return false;
	(void) zl_apply_resolve();	/* what earlier calls left would block the workers */
	lock_leaves(call->relid);
	if (!callback_registered)
	{
		RegisterXactCallback(workers_xact_callback, NULL);
		callback_registered = true;
	}

	size = offsetof(WorkersShared, slots) + sizeof(WorkerSlot) * nworkers;
	running.seg = dsm_create(size, 0);
	dsm_pin_mapping(running.seg);
	shared = running.shared = dsm_segment_address(running.seg);
	memset(shared, 0, size);
	shared->database = MyDatabaseId;
	GetUserIdAndSecContext(&shared->user, &shared->sec_context);
	for (int i = 0; i < NSETTINGS; i++)
		strlcpy(shared->settings[i], GetConfigOption(copied_settings[i], false, false),
				sizeof(shared->settings[i]));
	shared->leader = MyProc;
	shared->leader_pid = MyProcPid;
	shared->call = *call;
	shared->nworkers = nworkers;
	pg_atomic_init_u64(&shared->coordinator_xid, 0);
	pg_atomic_init_u32(&shared->decision, DECISION_NONE);
	for (int w = 0; w < nworkers; w++)
		SpinLockInit(&shared->slots[w].mutex);

	/* the coordinator first, with its transaction id, then the others */
	start_worker(0);
	while (pg_atomic_read_u64(&shared->coordinator_xid) == 0)
	{
		if (slot_state(shared, 0) == WORKER_FAILED || worker_gone(0))
			raise_worker_error(0);
		wait_a_moment();
		CHECK_FOR_INTERRUPTS();
	}
	for (int w = 1; w < nworkers; w++)
		start_worker(w);

	failed = await_workers(0, nworkers, WORKER_READY);
	if (failed >= 0)
		raise_worker_error(failed);	/* the abort callback tells the others */
	decide(DECISION_COMMIT);
	if (!await_finish(nworkers))
		(void) zl_apply_resolve();	/* what a worker that died left prepared */
	if (!TransactionIdDidCommit(XidFromFullTransactionId(
														 FullTransactionIdFromU64(pg_atomic_read_u64(&shared->coordinator_xid)))))
		raise_worker_error(0);
	for (int w = 0; w < nworkers; w++)
		zl_apply_add_counts(total, &shared->slots[w].counts);
	forget_running();
	return true;
}

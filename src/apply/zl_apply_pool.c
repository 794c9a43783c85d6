/*-------------------------------------------------------------------------
 *
 * zl_apply_pool.c
 *	  Idle apply workers kept for the next batch.
 *
 * A background worker that applied its share of a batch
 * (zl_apply_workers.c) has its caches warm: the key directories and merged
 * key indexes of its leaves, the catalog, and memory already faulted in
 * (a fresh backend spends about as long on page faults as on the apply).
 * With shared_preload_libraries = 'zipper_lake', such a worker waits, idle,
 * up to zipper_lake.apply_worker_idle for the next job of its database and
 * role, and a leader takes idle workers before it launches new ones,
 * worker w again for job slot w when it can, so each worker keeps applying
 * the same leaves.  Without the preload there is no pool: each job starts
 * its workers afresh.
 *
 * The pool is an array in shared memory under one spinlock: a slot is
 * FREE, BUSY (reserved by a leader or running a job) or IDLE (a worker
 * waits on its latch for a job handle).  An idle worker that times out
 * frees its slot and exits; the idle time stays short by default because
 * a backend connected to a database holds up DROP DATABASE, which waits
 * five seconds for other sessions to leave.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "common/zl_guc.h"
#include "apply/zl_apply.h"
#include "apply/zl_apply_internal.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"

#define POOL_SLOTS 64

typedef enum PoolState
{
	POOL_FREE,
	POOL_BUSY,
	POOL_IDLE
} PoolState;

typedef struct PoolSlot
{
	PoolState	state;
	Oid			database;
	Oid			user;
	PGPROC	   *proc;			/* the worker, once it runs */
	int			last_w;			/* the job slot it served last */
	dsm_handle	job;			/* the job to run (BUSY) */
	int			w;
} PoolSlot;

typedef struct ApplyPool
{
	slock_t		mutex;
	PoolSlot	slots[POOL_SLOTS];
} ApplyPool;

static ApplyPool *pool = NULL;
static bool holds_slot = false;	/* in a pooled worker: its slot is its own */
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
pool_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(ApplyPool)));
}

static void
pool_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	pool = ShmemInitStruct("zipper_lake apply pool", sizeof(ApplyPool), &found);
	if (!found)
	{
		memset(pool, 0, sizeof(ApplyPool));
		SpinLockInit(&pool->mutex);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* _PG_init: the pool exists when the library is preloaded */
void
zl_apply_pool_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = pool_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = pool_shmem_startup;
}

/*
 * A worker for job slot w of job: an idle one of this database and role
 * (the one that served w last, if idle), woken (*launched false), or a
 * slot reserved for a new one (its index in *pool_slot, *launched true,
 * -1 without a pool or a free slot).  Returns the pooled worker's PGPROC
 * (its pid in *pid), NULL when one must be launched.
 */
PGPROC *
zl_apply_pool_take(dsm_handle job, int w, int *pool_slot, pid_t *pid)
{
	PoolSlot   *chosen = NULL;
	PGPROC	   *proc = NULL;

	*pool_slot = -1;
	if (pool == NULL)
		return NULL;
	SpinLockAcquire(&pool->mutex);
	for (int i = 0; i < POOL_SLOTS; i++)
	{
		PoolSlot   *s = &pool->slots[i];

		if (s->state == POOL_IDLE && s->database == MyDatabaseId && s->user == GetUserId() &&
			(chosen == NULL || s->last_w == w))
			chosen = s;
	}
	if (chosen != NULL)
	{
		proc = chosen->proc;
		*pid = proc->pid;
	}
	else
		for (int i = 0; i < POOL_SLOTS && chosen == NULL; i++)
			if (pool->slots[i].state == POOL_FREE)
			{
				chosen = &pool->slots[i];
				chosen->proc = NULL;
				chosen->database = MyDatabaseId;
				chosen->user = GetUserId();
			}
	if (chosen != NULL)
	{
		chosen->state = POOL_BUSY;
		chosen->job = job;
		chosen->w = w;
		*pool_slot = chosen - pool->slots;
	}
	SpinLockRelease(&pool->mutex);
	if (proc != NULL)
		SetLatch(&proc->procLatch);
	return proc;
}

/* a launch into a reserved slot failed: free it */
void
zl_apply_pool_release(int pool_slot)
{
	if (pool == NULL || pool_slot < 0)
		return;
	SpinLockAcquire(&pool->mutex);
	pool->slots[pool_slot].state = POOL_FREE;
	SpinLockRelease(&pool->mutex);
}

/* a pooled worker exits, by an error or when idle too long: its slot is free */
static void
leave_pool(int code, Datum arg)
{
	if (holds_slot)
		zl_apply_pool_release(DatumGetInt32(arg));
	holds_slot = false;
}

/* in a worker: its first job, from the slot the leader reserved */
void
zl_apply_pool_first_job(int pool_slot, Oid *database, Oid *user, dsm_handle *job, int *w)
{
	PoolSlot   *s = &pool->slots[pool_slot];

	holds_slot = true;
	before_shmem_exit(leave_pool, Int32GetDatum(pool_slot));
	SpinLockAcquire(&pool->mutex);
	if (s->state != POOL_BUSY || s->proc != NULL)
	{
		/* its leader gave up before it started, and the slot went on */
		SpinLockRelease(&pool->mutex);
		holds_slot = false;
		proc_exit(0);
	}
	s->proc = MyProc;
	*database = s->database;
	*user = s->user;
	*job = s->job;
	*w = s->w;
	SpinLockRelease(&pool->mutex);
}

/*
 * In a worker that finished a job: wait, idle, for the next one; false
 * (the slot freed) once zipper_lake.apply_worker_idle passed without one.
 */
bool
zl_apply_pool_next_job(int pool_slot, dsm_handle *job, int *w)
{
	PoolSlot   *s = &pool->slots[pool_slot];
	TimestampTz idle_since = GetCurrentTimestamp();

	SpinLockAcquire(&pool->mutex);
	s->last_w = *w;
	s->state = POOL_IDLE;
	s->proc = MyProc;
	SpinLockRelease(&pool->mutex);
	pgstat_report_activity(STATE_IDLE, NULL);
	for (;;)
	{
		bool		taken;
		bool		timed_out = false;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100L,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		SpinLockAcquire(&pool->mutex);
		taken = s->state == POOL_BUSY;
		if (taken)
		{
			*job = s->job;
			*w = s->w;
		}
		else if (TimestampDifferenceExceeds(idle_since, GetCurrentTimestamp(),
											zipper_lake_apply_worker_idle))
		{
			s->state = POOL_FREE;
			timed_out = true;
		}
		SpinLockRelease(&pool->mutex);
		if (taken)
			return true;
		if (timed_out)
		{
			holds_slot = false;
			return false;
		}
	}
}

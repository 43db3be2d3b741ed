/*
 * sqllock's lock protocol at the level of its SQL statements, for spin.
 *
 * README.md beside this file maps every step to the statement and the Go
 * function it stands for, says what is abstracted away and why the
 * configurations below cover what matters. Change this file with the code.
 *
 * Time is discrete: one Clock tick is one unit of database time. Every
 * timestamp is kept relative to "now" (expires_at - now, clamped at -1), so
 * the state space is finite although time never stops. Local clocks run at
 * a rate within 10% of the database clock's (see "Local deadlines" below).
 * Each statement is one atomic step: its send, its execution under the row
 * locks it takes, and its response (README: why that loses no violation).
 *
 * Configurations (-D switches; model/check runs each):
 *   CFG_LEASE      3 processes, 2 names: leases, renewal, drift, re-entry,
 *                  fresh inserts, the reaper, lost responses, failed releases
 *   CFG_MARKERS    3 processes, 1 name: crash detection through session
 *                  markers, sessions ended by the server, a crash
 *   CFG_QUEUE      3 processes, 1 name: the fair queue with heartbeats,
 *                  re-enqueue, leaving, dead waiters, the reaper
 *   CFG_QUEUEFAULTS 1 name: the fair queue with lost responses and
 *                  failed releases (rows that still count holds)
 *   CFG_MARKQUEUE  1 name: the fair queue with a marked process whose
 *                  session ends and restarts, MinHold
 *                  (these five: safety, by assertions, exhaustive)
 *   CFG_CRASH      progress when the holder dies (LTL progress_crash)
 *   CFG_FAIRWAKE   two fair waiters in one Locker: the head of the queue is
 *                  the one that polls (LTL progress_fair)
 *   CFG_FAILOVER   3 processes, 2 names, no markers: an unplanned PostgreSQL
 *                  failover that loses the commits not yet replicated, the
 *                  timeline in the tokens and the failover pause (safety,
 *                  exhaustive)
 *   CFG_ALL        everything of the safety configurations at once, too
 *                  large to search exhaustively: a swarm of bitstate runs
 * Mutants (model/mutants/*.pml) define one MUT_* switch and include this
 * file.
 */

#define NP 3            /* client processes, each its own Locker unless LOCKER says */

#ifdef CFG_LEASE
#define NN 2
#define PIN 1           /* process 0 uses name 0, process 2 name 1, process 1 either */
#define REENTRY
#define REAPER
#define FAULTS 1
#ifndef GIVEUP
#define GIVEUP 1
#endif
#define CRASHES 0
#endif

#ifdef CFG_MARKERS
#define NN 1
#define MARKERS
#define MAXTOK 2
#define HASSESS(p) (p < 2)  /* process 2 has no session connection: lease only */
#define FAULTS 0
#define SESSFAULTS 1
#define GIVEUP 0
#define CRASHES 1
#endif

#ifdef CFG_QUEUE
#define NN 1
#define QUEUE
#define USEDROW
#define ALLFAIR(p) (p < 2)  /* processes 0 and 1 wait fairly, process 2 does not */
#define MAXTOK 2
#define REAPER
#define FAULTS 0
#define GIVEUP 1
#define CRASHES 0       /* without markers or a restart, a crash is a process
                         * never scheduled again: already a behaviour here */
#endif

#ifdef CFG_QUEUEFAULTS
#define NN 1
#define QUEUE
#define USEDROW
#define ALLFAIR(p) (p < 2)
#define MAXTOK 2
#define FAULTS 1        /* lost responses: rows that still count holds */
#define GIVEUP 0
#define CRASHES 0
#endif

#ifdef CFG_CRASH
#define NN 1
#define QUEUE
#define MARKERS
#define HASSESS(p) (p < 2)  /* the process that never crashes needs none */
#define FAULTS 0
#define GIVEUP 0
#define CRASHES 2       /* processes 0 and 1; process 2 never crashes */
#define CRASHABLE(p) (p < 2)
#define ROUNDS 1
#define TIMELY
#endif

#ifdef CFG_FAIRWAKE
#define NN 1
#define QUEUE
#define WAITLIST
#define FAULTS 0
#define GIVEUP 0
#define CRASHES 0
#define ROUNDS 1
#define TIMELY
#define ALLFAIR(p) (p < 2)          /* processes 0 and 1 are fair waiters */
#define LOCKER(p) (p < 2 -> 0 : 1)  /* ... of one Locker; process 2 is another */
#endif

#ifdef CFG_MARKQUEUE
#define NN 1
#define QUEUE
#define MARKERS
#define MINHOLD
#define HASSESS(p) (p == 0) /* one marked process (README: why one suffices) */
#define ALLFAIR(p) (p < 2)  /* processes 0 and 1 wait fairly, process 2 does not */
#define MAXTOK 2
#define IDMAX 3
#define FAULTS 0
#define SESSFAULTS 1
#define GIVEUP 0
#define CRASHES 0       /* a crash is a session ending plus a stall: both here */
#endif

#ifdef CFG_FAILOVER     /* README: the failover, and why no markers */
#define NN 2
#define PIN 1           /* process 0 uses name 0, process 2 name 1, process 1 either */
#define FAILOVER
#define REAPER
#define MAXTOK 2        /* tokens drawn per timeline */
#define FAULTS 0
#define GIVEUP 0
#define CRASHES 0
#endif

#ifdef CFG_ALL          /* everything at once: bitstate search only (README) */
#define NN 2
#define PIN 1           /* process 0 uses name 0, process 2 name 1, process 1 either */
#define QUEUE           /* each acquisition chooses to be fair or not */
#define USEDROW
#define MARKERS
#define MINHOLD
#define HASSESS(p) (p < 2)
#define REENTRY
#define REAPER
#define FAULTS 1
#define SESSFAULTS 1
#define GIVEUP 1
#define CRASHES 1
#endif

#ifdef CFG_X            /* experiments: features from -D switches */
#ifndef FAULTS
#define FAULTS 0
#endif
#ifndef GIVEUP
#define GIVEUP 0
#endif
#ifndef CRASHES
#define CRASHES 0
#endif
#endif

#ifndef NN
#error "choose a configuration: -DCFG_LEASE, -DCFG_MARKERS, -DCFG_QUEUE, -DCFG_QUEUEFAULTS, -DCFG_MARKQUEUE, -DCFG_CRASH, -DCFG_FAIRWAKE, -DCFG_FAILOVER or -DCFG_ALL"
#endif
#ifndef CRASHABLE
#define CRASHABLE(p) true
#endif
#ifndef LOCKER
#define LOCKER(p) (p)
#endif
#ifndef SESSFAULTS
#define SESSFAULTS FAULTS
#endif
#ifndef HASSESS
#define HASSESS(p) true
#endif

/* The steps of the background processes (clock, heartbeats, sessions,
 * reaper, crashes) are deterministic. In the liveness configurations they
 * are d_steps: the intermediate states of an atomic sequence would count as
 * states where every other process is disabled, and weak fairness would
 * then allow a waiter never to be scheduled. */
#ifdef TIMELY
#define STEP d_step
#else
#define STEP atomic
#endif

/* ---- durations, in database ticks ---- */
#define TTL 3           /* lease of a hold */
#define TTLS 1          /* TTL of a short inner (reentrant) hold */
#define G 2             /* crash grace */
#define WTTL 3          /* waiter TTL */
#define MHV 4           /* MinHold, when an acquisition sets one (longer than TTL and G) */

/* MINHOLD: each takeover or fresh insert sets min_hold_until to now or now +
 * MHV (the option, drawn at every try); the last release leaves the row to
 * lapse at min_hold_until, and a contender's shortening never cuts below
 * it. Without MINHOLD, min_hold_until is always now (MinHold 0). */
#ifdef MINHOLD
#ifndef MHWHO
#define MHWHO(p) true   /* whose acquisitions may set a MinHold */
#endif
#define SETMH(n) if :: rmh[n] = 0 :: MHWHO(p) -> rmh[n] = MHV fi
#define RELEXP(n) rexp[n] = rmh[n]                          /* GREATEST(min_hold_until, now) */
#define SHORTEN(n) if :: rmh[n] > G && rmh[n] < rexp[n] -> rexp[n] = rmh[n] :: rmh[n] > G && rmh[n] >= rexp[n] -> skip :: else -> rexp[n] = G fi
#define MHCLEAR(n) rmh[n] = 0
#else
#define SETMH(n) skip
#define RELEXP(n) rexp[n] = 0
#define SHORTEN(n) rexp[n] = G
#define MHCLEAR(n) skip
#endif

/*
 * Local deadlines and clock drift. A process measures a deadline of L local
 * ticks from a send at db time s on a clock whose rate r (local ticks per db
 * tick) differs from the database's by less than RHO: it still believes at
 * db time s + k iff k * r < L, that is for k < ceil(L / r). So the deadline
 * is a countdown in db ticks, started at the send, of ceil(L / r) for some
 * r in (1 - RHO, 1 + RHO): from ceil(L / (1 + RHO)) to the ceiling of just
 * under L / (1 - RHO). The model draws one of the two extremes at each
 * send (the belief is monotone in it: the slow end threatens safety).
 *
 *                    L local         RHO 10%     RHO 20% (MUT_DRIFT)
 *   lease deadline   0.9*TTL = 2.7   3..3        3..4
 *   session deadline 0.9*G = 1.8     2..2        2..3
 *   MUT_SESSION_DEADLINE: 1.1*G = 2.2, RHO 10%: 3..3
 */
#ifdef MUT_DRIFT
#define LDL_LO 3
#define LDL_HI 4
#define SDL_LO 2
#define SDL_HI 3
#else
#define LDL_LO 3
#define LDL_HI 3
#ifdef MUT_SESSION_DEADLINE
#define SDL_LO 3
#define SDL_HI 3
#else
#define SDL_LO 2
#define SDL_HI 2
#endif
#endif
#ifdef TIMELY
/* the liveness configurations do not check beliefs: no deadlines kept */
#define STARTLDL(x) x = 0
#define STARTSDL(x) x = 0
#else
#if LDL_LO == LDL_HI
#define STARTLDL(x) x = LDL_HI
#else
#define STARTLDL(x) if :: x = LDL_LO :: x = LDL_HI fi
#endif
#if SDL_LO == SDL_HI
#define STARTSDL(x) x = SDL_HI
#else
#define STARTSDL(x) if :: x = SDL_LO :: x = SDL_HI fi
#endif
#endif

/* ---- bounds of the state space ---- */
#ifndef MAXTOK
#define MAXTOK 3        /* tokens drawn per stripe / per name row */
#endif
#ifndef IDMAX
#define IDMAX 4         /* waiter ids */
#endif
#define SMAX 2          /* session incarnations (marker keys) per process */
#define INF 255         /* queue id of a contender that is not queued */

#define OWN(p) (p + NP * life[p])   /* owner id: a restarted process is a new owner */

/* ======== the database ======== */
/* dblock_locks, one row per name */
bool  rex[NN];          /* the row exists */
byte  rtok[NN];         /* token */
byte  rown[NN];         /* owner_host + owner_id */
byte  rhc[NN];          /* hold_count */
short rexp[NN];         /* expires_at - now, clamped at -1 */
byte  rsk[NN];          /* session_key (marker incarnation of the owner), 0 none */
#ifdef MINHOLD
byte  rmh[NN];          /* min_hold_until - now, clamped at 0 */
#endif
#ifdef QUEUE
bool  rq[NN];           /* queued (MySQL): false proves the name has no waiter row */
#endif
/* dblock_fences: both names on one stripe */
byte  fence;
#ifdef FAILOVER
/* The primary's WAL timeline: 1, then 2 after the failover. dblock_timelines
 * (migration 6): whether timeline 1 and 2 are recorded, and the pause left
 * on timeline 2 (first_seen(2) + P - now, clamped at 0). Timeline 1 is
 * recorded by the migration, first seen at -infinity. */
byte  tl = 1;
#ifdef MUT_FAILOVER_FIRST_RECORD
bool  rec1;             /* recorded by the first take on timeline 1 */
#else
bool  rec1 = 1;         /* migration 6 records the timeline it runs on, before any step */
#endif
bool  rec2;
byte  pl;
/* The standby: the primary's state at the last moment its WAL reached the
 * standby. fo: 0 before that moment, 1 after it, 2 failed over. Timeline 2
 * is not recorded before the failover: nothing of it to copy. */
byte  fo;
bool  sb_rex[NN];
byte  sb_rtok[NN];
byte  sb_rown[NN];
byte  sb_rhc[NN];
short sb_rexp[NN];
byte  sb_fence;
bool  sb_rec1;
#endif
/* dblock_waiters: at most one row per process (one Acquire at a time) */
bool  wrow[NP];
byte  wid[NP];          /* identity column: FIFO order */
byte  wnm[NP];
short wexp[NP];         /* expires_at - now, clamped at -1 */
byte  wsk[NP];          /* session_key, 0 none */
byte  nextid;
/* session markers (pg_advisory_lock / GET_LOCK): held by the server session */
bool  salive[NP];       /* the marker of incarnation sinc[p] is held */

/* ======== the clients ======== */
byte  life[NP];         /* restarts after a crash */
byte  hn[NP];           /* the name being acquired or held */
byte  hc[NP];           /* holds the process has: 0, 1 (outer), 2 (outer + inner) */
byte  htok[NP];
byte  hkey[NP];         /* marker key the hold relies on, 0 none */
byte  ldl[NP];          /* db ticks left until the lease deadline, by the local clock */
byte  tid[NP];          /* Ticket.ID(), 0 when not queued */
byte  tkey[NP];         /* the Ticket's key: the marker key at Enqueue, kept for re-enqueues */
byte  sinc[NP];         /* current session incarnation (its marker key), 0 none yet */
bool  sup[NP];          /* the Locker trusts its session */
byte  sdl[NP];          /* db ticks left until the session deadline, by the local clock */
bool  crashreq[NP];
bool  ended[NP];        /* the Client has finished its rounds */
byte  crashes;
#ifdef WAITLIST
bool  inwl[NP];         /* on its Locker's waitlist */
byte  arr[NP];          /* arrival order on the waitlist */
byte  arrseq;
bool  tkt[NP];          /* the waitlist knows the waiter's ticket (setTicket) */
bool  wake[NP];         /* the waiter's one-slot wake channel */
#endif

/* ======== ghosts for the properties ======== */
byte  lasttok[NN];      /* last token issued per name */
byte  got;              /* acquisitions counted by the liveness configurations */
#ifdef FAILOVER
bool  stale[NP];        /* the belief rests on a statement sent before the failover */
#endif

/* ======== safety properties ======== */
#ifdef MARKERS
#define KEY(p) (sup[p] -> sinc[p] : 0)
#define MKALIVE(q, k) (salive[q] && sinc[q] == (k))
#define SESSOK(p) (hkey[p] == 0 || (sup[p] && sinc[p] == hkey[p] && sdl[p] > 0))
#ifdef MUT_NO_MARKER_CHECK
#define GONE(q, k) true         /* mutant: shortens without looking at the marker */
#else
#define GONE(q, k) (!MKALIVE(q, k))
#endif
#else
#define KEY(p) 0
#define SESSOK(p) true
#endif

/* ---- the failover (FAILOVER): tokens and the pause ---- */
#ifdef FAILOVER
/* A token is at least one above its timeline's base (T << 40 in the code,
 * T's first MAXTOK values here, so the bound is per timeline). */
#ifdef MUT_FAILOVER_NO_TIMELINE
#define TLBASE 0                        /* mutant: the token without the timeline */
#else
#define TLBASE ((tl - 1) * MAXTOK)
#endif
/* P, the failover pause (WithFailoverPause). A hold believes for at most
 * P after its last successful take or renewal (Locker.belief): here TTL =
 * P, so its local deadline is the lease's. */
#if defined(MUT_FAILOVER_NO_PAUSE)
#define PAUSE 0                         /* mutant: WithFailoverPause(0) */
#elif defined(MUT_FAILOVER_SHORT_PAUSE)
#define PAUSE (TTL - 1)                 /* mutant: P below the belief */
#else
#define PAUSE TTL
#endif
/* the timeline of token t (its high bits) */
#define TOKTL(t) (((t) + MAXTOK - 1) / MAXTOK)
/* pgNoEarlierTimeline: no timeline below tl is recorded */
#define NOEARLIER (tl == 1 || !rec1)
/* pgPausePassedTake / Fresh: tl is recorded, and its pause is over (timeline
 * 1, recorded by the migration at -infinity, never pauses) */
#define PASSED (tl == 1 -> rec1 : rec2 && pl == 0)
/* pgPauseOverTake: the takeover of a row whose token is t may succeed: no
 * pause, a row tokened on the current timeline (its holders all took it
 * on this server), or the pause over */
#define TAKEOK(t) (PAUSE == 0 || TOKTL(t) >= tl || PASSED)
/* pgPauseOverFresh: the insert of a fresh row may succeed */
#define INSOK (PAUSE == 0 || NOEARLIER || PASSED)
/* The re-entry waits for the pause too (the model's finding, README): the
 * promoted server may bring back a row whose release it lost; its owner
 * would re-enter it while the holder that took the lock after that
 * release, lost too, still believes. MUT_FAILOVER_REENTRY: the rule as
 * e0c1ccb has it, re-entries never paused. */
#ifdef MUT_FAILOVER_REENTRY
#define REOK(t) true
#else
#define REOK(t) TAKEOK(t)
#endif
/* pgRecordTimeline, in pgInsert: the insert (the second statement of
 * every take that did not succeed at once) records tl when it is missing,
 * first seen now, whether or not it inserts; it is judged without it. */
inline record() {
	if
	:: tl == 1 && !rec1 -> rec1 = 1         /* only in MUT_FAILOVER_FIRST_RECORD */
	:: tl == 2 && !rec2 -> rec2 = 1; pl = PAUSE
	:: else
	fi
}
#define FRESH(p) stale[p] = 0
/* a belief from before the failover, whose statement the failover may have
 * lost, ends before a take can succeed on the new primary */
#define PAUSECOVERS(p) (stale[p] && !NOEARLIER && (rec2 -> pl >= ldl[p] : PAUSE >= ldl[p]))
#else
#define TLBASE 0
#define TAKEOK(t) true
#define INSOK true
#define REOK(t) true
inline record() { skip }
#define FRESH(p) skip
#define PAUSECOVERS(p) false
#endif
/* the token of a take: GREATEST(t + 1, base + 1); TOKFULL: over the bound */
#define NEXTTOK(t) ((t) + 1 > TLBASE + 1 -> (t) + 1 : TLBASE + 1)
#define TOKFULL(t) (NEXTTOK(t) > TLBASE + MAXTOK)

/* p believes it holds hn[p]: a hold, not released, and neither its lease
 * deadline nor (with a marker) its session deadline has passed by its own
 * clock. That is Lock.Err() == nil when the process looks. */
#define BEL(p) (hc[p] > 0 && ldl[p] > 0 && SESSOK(p))
/* what p believes is true in the database: the row is p's, with p's token,
 * and its lease has not lapsed by the database clock */
#define LEASE(p) (!BEL(p) || (rex[hn[p]] && rown[hn[p]] == OWN(p) && rtok[hn[p]] == htok[p] && rexp[hn[p]] > 0) || PAUSECOVERS(p))
#define EXCL(p, q) (!(BEL(p) && BEL(q) && hn[p] == hn[q]))

/* Checked after every step that can make either false: every step that
 * writes a lock row, starts or extends a belief, and every clock tick. */
inline check() {
	assert(EXCL(0, 1) && EXCL(0, 2) && EXCL(1, 2));
#ifndef ONLY_EXCL       /* the mutants of exclusion must be caught by EXCL itself */
	assert(LEASE(0) && LEASE(1) && LEASE(2))
#endif
}

/* a token is written into the row of name n: it must exceed every earlier
 * one of n, across takeovers, sweeps and fresh inserts */
inline issued(n, t) {
	assert(t > lasttok[n]);
	lasttok[n] = t
}

/* waiter w's row, seen by p waiting for n, is live but its marker is gone */
#define WGONE(w, p, n) (w != p && wrow[w] && wnm[w] == n && wexp[w] > G && wsk[w] != 0 && !MKALIVE(w, wsk[w]))

/* a live waiter of name n older than queue id q (the head-of-line rule) */
#define WLIVE(i, n, q) (wrow[i] && wnm[i] == n && wid[i] < q && wexp[i] > 0)
#define OLDER(n, q) (WLIVE(0, n, q) || WLIVE(1, n, q) || WLIVE(2, n, q))

/* A fair waiter is alive while its process runs and holds its ticket
 * (tid != 0). Where live processes are timely (TIMELY: the liveness
 * configurations), no lock may be taken by anyone whose queue id is above a
 * live waiter's of that name. In the safety configurations processes may
 * stall for any time, so a live waiter's row may lapse and be passed by
 * design. */
#ifdef TIMELY
#define PASSES(w, p, n, q) (w != p && tid[w] != 0 && hn[w] == n && tid[w] < q)
inline notpassed(p, n, q) {
	assert(!PASSES(0, p, n, q) && !PASSES(1, p, n, q) && !PASSES(2, p, n, q))
}
#else
inline notpassed(p, n, q) { skip }
#endif

/* statement outcomes */
#define R_FAIL 0        /* held by someone else, or kept for older waiters */
#define R_TAKE 1        /* took it (takeover or fresh insert) */
#define R_REENTER 2     /* same owner, live hold: hold_count+1 */
#define R_NOROW 3       /* the UPDATE found no row: try the insert */
#define R_ERR 4         /* driver error: lost connection, timeout */

/* the process now holds the lock, from a statement sent now */
inline hold(p, t) {
	hc[p] = 1; htok[p] = t; hkey[p] = KEY(p); STARTLDL(ldl[p]); FRESH(p)
}

/* The queued flag (MySQL, migration 4). A row is created queued; a fair
 * waiter sets it, holding the row's lock, before its waiter row is inserted
 * (queue mysqlStore.insert: mySetQueued, myInsert, one transaction); myTake's
 * takeover sets it to whether any waiter row of the name but the taker's is
 * left. An unqueued taker (no ticket) whose row has lapsed and is not
 * queued takes it with myTakeFast, without the head-of-line subquery:
 * FAST. PostgreSQL has no flag; its takes are myTake's, which FAST matches
 * whenever the flag is right, and the head-of-line assertion in take()
 * checks that it is. MUT_NO_MARK_QUEUED: a waiter that does not set it. */
#ifdef QUEUE
#define FAST(n, q) (q == INF && !rq[n])
#define WANY(i, n, q) (wrow[i] && wnm[i] == n && wid[i] != q)
#define SETRQ(n, q) rq[n] = (WANY(0, n, q) || WANY(1, n, q) || WANY(2, n, q))
#define NEWRQ(n) rq[n] = 1
#ifdef MUT_NO_MARK_QUEUED
#define MARKRQ(n) skip
#else
#define MARKRQ(n) if :: rex[n] -> rq[n] = 1 :: else fi
#endif
#else
#define FAST(n, q) false
#define SETRQ(n, q) skip
#define NEWRQ(n) skip
#define MARKRQ(n) skip
#endif

/* pgTake / myTake (or myTakeFast, see FAST): takeover of a lapsed row or
 * re-entry by its owner.
 * WHERE (lapsed AND NOT EXISTS older live waiter) OR (hold_count > 0 AND
 * live AND same owner); SET by CASE lapsed. */
#ifdef MUT_REENTRY_AFTER_LAPSE
/* mutant: the re-entry disjunct without "live" (the code before b7fa91b) */
#define LAPSEDOWNER(n, p) (rhc[n] > 0 && rown[n] == OWN(p))
#else
#define LAPSEDOWNER(n, p) false
#endif
inline take(p, n, q, res) {
	if
	:: !rex[n] -> res = R_NOROW
	:: rex[n] && rexp[n] <= 0 && TAKEOK(rtok[n]) && (FAST(n, q) || !OLDER(n, q) || LAPSEDOWNER(n, p)) ->
		if
		:: TOKFULL(rtok[n]) -> res = R_ERR      /* bound: as if never sent */
		:: else ->
			/* the head-of-line rule: no live waiter older than the taker */
			assert(!OLDER(n, q));
			if :: !FAST(n, q) -> SETRQ(n, q) :: else fi;
			notpassed(p, n, q);
			rtok[n] = NEXTTOK(rtok[n]);
			issued(n, rtok[n]);
			rhc[n] = 1; rown[n] = OWN(p); rexp[n] = TTL; rsk[n] = KEY(p); SETMH(n);
			res = R_TAKE
		fi
	:: rex[n] && rexp[n] > 0 && rhc[n] > 0 && rown[n] == OWN(p) && REOK(rtok[n]) ->
		if
		:: rhc[n] >= 3 -> res = R_ERR           /* bound */
		:: else ->
			rhc[n]++;
			if :: rexp[n] < TTL -> rexp[n] = TTL :: else fi;  /* GREATEST */
			if :: rsk[n] != KEY(p) -> rsk[n] = 0 :: else fi;   /* another key: lease only */
			res = R_REENTER
		fi
	:: else -> res = R_FAIL; record()  /* pgInsert follows, and records */
	fi
}

/* pgInsert (one statement) / mysqlStore.insert (one transaction): a fresh
 * name's row, its token drawn from the stripe counter while the insert
 * wins. MUT_EARLY_TOKEN: the token was drawn earlier (early). */
inline insert(p, n, q, res, early) {
	if
	:: rex[n] -> res = R_FAIL                   /* ON CONFLICT DO NOTHING / 1062 */
	:: !rex[n] && (OLDER(n, q) || !INSOK) -> res = R_FAIL   /* kept for older fair waiters, or paused */
	:: !rex[n] && !OLDER(n, q) && INSOK ->
#ifdef MUT_EARLY_TOKEN
		if
		:: early == 0 -> res = R_ERR
		:: else ->
			notpassed(p, n, q);
			rex[n] = 1; rtok[n] = early; NEWRQ(n);
			issued(n, early);
			rhc[n] = 1; rown[n] = OWN(p); rexp[n] = TTL; rsk[n] = KEY(p); SETMH(n);
			res = R_TAKE
		fi
#else
		if
		:: TOKFULL(fence) -> res = R_ERR        /* bound */
		:: else ->
			notpassed(p, n, q);
			fence = NEXTTOK(fence);
			rex[n] = 1; rtok[n] = fence; NEWRQ(n);
			issued(n, fence);
			rhc[n] = 1; rown[n] = OWN(p); rexp[n] = TTL; rsk[n] = KEY(p); SETMH(n);
			res = R_TAKE
		fi
#endif
	fi;
	record()
}

/* pgRenew / myRenew: never shortens, never revives */
inline renew(p, n, t, ttl, ok) {
	if
	:: rex[n] && rown[n] == OWN(p) && rtok[n] == t && rhc[n] > 0 && rexp[n] > 0 ->
#ifdef MUT_RENEW_SHORTENS
		rexp[n] = ttl;                          /* mutant: SET expires_at = now + ttl */
#else
		if :: rexp[n] < ttl -> rexp[n] = ttl :: else fi;
#endif
		ok = 1
	:: else -> ok = 0
	fi
}

/* pgRelease / myRelease (MinHold 0: the last hold sets expires_at = now) */
inline release(p, n, t) {
	if
	:: rex[n] && rown[n] == OWN(p) && rtok[n] == t && rhc[n] > 0 ->
		if :: rhc[n] == 1 -> RELEXP(n) :: else fi;
		rhc[n]--
	:: else
	fi
}

#ifdef WAITLIST
/* waitlist.first: the lowest ticket id among waiters with a ticket, else
 * the earliest arrival. BEFORE(o, p): o comes before p. */
#ifdef MUT_ARRIVAL_ORDER
#define BEFORE(o, p) (arr[o] < arr[p])          /* mutant: arrival order only */
#else
#define BEFORE(o, p) ((tkt[o] && (!tkt[p] || tid[o] < tid[p])) || (!tkt[o] && !tkt[p] && arr[o] < arr[p]))
#endif
#define SAMEWL(p, o) (o != p && LOCKER(o) == LOCKER(p) && inwl[o] && hn[o] == hn[p])
#define AHEAD(p, o) (SAMEWL(p, o) && BEFORE(o, p))
#define ISFIRST(p) (inwl[p] && !AHEAD(p, (p + 1) % NP) && !AHEAD(p, (p + 2) % NP))
/* wakeFirst: signal the first waiter of name n in Locker l */
inline wakefirst(l, n) {
	if :: LOCKER(0) == l && hn[0] == n && ISFIRST(0) -> wake[0] = 1 :: else fi;
	if :: LOCKER(1) == l && hn[1] == n && ISFIRST(1) -> wake[1] = 1 :: else fi;
	if :: LOCKER(2) == l && hn[2] == n && ISFIRST(2) -> wake[2] = 1 :: else fi
}
#endif

/* waiting.end: Ticket.Leave (DELETE the waiter row), waitlist.remove */
inline leave(p, n, wasfirst) {
	if
	:: tid[p] != 0 && wrow[p] && wid[p] == tid[p] ->
		wrow[p] = 0; wid[p] = 0; wnm[p] = 0; wexp[p] = 0; wsk[p] = 0
	:: else
	fi;
	tid[p] = 0; tkey[p] = 0;
#ifdef WAITLIST
	wasfirst = ISFIRST(p);
	inwl[p] = 0; tkt[p] = 0; arr[p] = 0;
	if :: wasfirst -> wakefirst(LOCKER(p), n) :: else fi;
#endif
	wasfirst = 0
}

/* In the liveness configurations a holder does not renew: it releases (or
 * dies), which is what those properties are about; weak fairness would not
 * make it choose the release over a renewal. */
#ifdef ROUNDS
#define RENEWS false
#else
#define RENEWS true
#endif
#ifdef ROUNDS
#define MORE (rounds < ROUNDS)
#define ROUND_STEP 1
#else
#define MORE true
#define ROUND_STEP 0
#endif
#ifdef CFG_CRASH
#define GOTSTEP(p) (p == 2 -> 1 : 0)
#else
#ifdef CFG_FAIRWAKE
#define GOTSTEP(p) (p < 2 -> 1 : 0)
#else
#define GOTSTEP(p) 0
#endif
#endif

/* the name a round acquires: any, unless the configuration pins them */
#if defined(PIN) && PIN == 1
#define NAME(p, n) if :: p == 0 -> n = 0 :: p == 2 -> n = 1 :: p == 1 -> select (n : 0 .. 1) fi
#endif
#if defined(PIN) && PIN == 2
#define NAME(p, n) n = (p == 2 -> 1 : 0)
#endif
#ifndef NAME
#define NAME(p, n) select (n : 0 .. NN - 1)
#endif

/* a response lost after the statement ran (the client sees an error) */
#define LOSE(res) if :: skip :: FAULTS -> res = R_ERR fi

/* the Client's locals back to their initial values, between rounds */
#define RESET n = 0; q = 0; fair = 0; wasfirst = 0; hn[p] = 0

/* Locker.try, first statement: the UPDATE (and, in the mutant, the token
 * drawn beforehand for a fresh name). trybody is the statement and what the
 * process records of its outcome; trydispatch goes where the outcome leads. */
inline trybody() {
	if :: tid[p] != 0 -> q = tid[p] :: else fi;         /* read at every try */
#ifdef MUT_EARLY_TOKEN
	/* mutant: nextval() before the unique check is won */
	if :: !rex[n] && fence < MAXTOK -> fence++; early = fence :: else -> early = 0 fi;
#endif
	take(p, n, q, res);
	if :: res == R_TAKE || res == R_REENTER -> LOSE(res) :: else fi;
	if
	:: res == R_TAKE || res == R_REENTER ->
		hold(p, rtok[n]); leave(p, n, wasfirst); got = got + GOTSTEP(p); check()
	:: res == R_ERR -> leave(p, n, wasfirst); RESET; check()
	:: res == R_FAIL -> early = 0
	:: else
	fi
}
inline trydispatch() {
	if
	:: res == R_TAKE || res == R_REENTER -> res = 0; goto holding
	:: res == R_ERR -> res = 0; goto done
	:: res == R_NOROW -> res = 0; goto inserting
	:: res == R_FAIL -> goto failed
	fi
}
/* second statement of the try: the insert of a fresh name */
inline insbody() {
	insert(p, n, q, res, early);
	if :: res == R_TAKE -> LOSE(res) :: else fi;
	early = 0;
	if
	:: res == R_TAKE -> hold(p, rtok[n]); leave(p, n, wasfirst); got = got + GOTSTEP(p); check()
	:: res == R_ERR -> leave(p, n, wasfirst); RESET; check()
	:: else -> res = R_FAIL
	fi
}
/* In the safety configurations a try is one atomic step that jumps to where
 * its outcome leads (fewer states). In the liveness configurations it is a
 * d_step, then the jump: see STEP. */
#ifdef TIMELY
#define TRY d_step { trybody() }; trydispatch()
#define INSERT d_step { insbody() }; trydispatch()
#define FIRSTTRY skip
#define FIRSTTRY_OUT TRY        /* waiting.run: the first try before any pause */
#else
#define TRY atomic { trybody(); trydispatch() }
#define INSERT atomic { insbody(); trydispatch() }
#define FIRSTTRY trybody(); trydispatch()
#define FIRSTTRY_OUT skip       /* not reached: FIRSTTRY jumps */
#endif

proctype Client(byte p) {
	byte n, res, q, early;
	bool fair, ok, wasfirst;
	byte rounds;

	do
	:: {
		do
		:: MORE ->
			/* Acquire or TryAcquire of a name, and its first try */
			atomic {
				rounds = rounds + ROUND_STEP;
				NAME(p, n);
				hn[p] = n; q = INF;
#ifdef ALLFAIR
				fair = ALLFAIR(p);
#else
#ifdef QUEUE
				if :: fair = 1 :: fair = 0 fi;
#endif
#endif
#ifdef WAITLIST
				arrseq++; arr[p] = arrseq; inwl[p] = 1;
#endif
				FIRSTTRY
			}
			FIRSTTRY_OUT;
inserting:
#ifdef TIMELY
			skip;           /* a label may not lead into a d_step */
#endif
			INSERT;
failed:
#ifdef QUEUE
			/* beforeSleep: a fair waiter joins the queue, and tries at once */
			if
			:: fair && q == INF ->
				atomic {
					if
					:: nextid < IDMAX ->
						nextid++;
						MARKRQ(n);
						wrow[p] = 1; wid[p] = nextid; wnm[p] = n; wexp[p] = WTTL; wsk[p] = KEY(p);
						tid[p] = nextid; tkey[p] = wsk[p];
#ifndef WAITLIST
						q = tid[p]
#endif
					:: else -> leave(p, n, wasfirst); RESET; res = R_ERR   /* bound: Enqueue failed */
					fi
				}
				if :: res == R_ERR -> res = 0; goto done :: else fi;
#ifdef WAITLIST
				atomic { tkt[p] = 1; q = tid[p] }       /* setTicket */
#endif
			:: else
			fi;
#endif
trying:
			do
#ifdef WAITLIST
			:: /* pause and sleep: only the first waiter of the Locker polls */
				STEP {
					ok = ISFIRST(p);
					if :: wasfirst && !ok -> wakefirst(LOCKER(p), n) :: else fi;
					wasfirst = ok; ok = 0
				}
				if
				:: wasfirst -> wake[p] = 0      /* the pacer's pause, or a wake-up */
				:: else -> STEP { wake[p] -> wake[p] = 0 }  /* idle recheck: never */
				fi;
				TRY
#else
			:: TRY                            /* the next try, after a pause */
#endif
#ifdef MARKERS
			:: /* the holder's marker is gone: shorten its lease to now + G */
				STEP {
					rex[n] && rexp[n] > G && rsk[n] != 0 && GONE(rown[n] % NP, rsk[n]) ->
					SHORTEN(n);
					check()
				}
#ifdef QUEUE
			:: /* a waiter's marker is gone: shorten its row likewise */
				STEP { WGONE(0, p, n) -> wexp[0] = G }
			:: STEP { WGONE(1, p, n) -> wexp[1] = G }
			:: STEP { WGONE(2, p, n) -> wexp[2] = G }
#endif
#endif
			:: GIVEUP -> atomic { leave(p, n, wasfirst); RESET; goto done }  /* ctx ended */
			od;

holding:
			do
			:: RENEWS -> /* renewal (renewLoop / Refresh) */
				atomic {
					renew(p, n, htok[p], TTL, ok);
					if
					:: ok -> STARTLDL(ldl[p]); FRESH(p); ok = 0; check()
					:: else -> goto releasing        /* lost: taken over or lapsed */
					fi
				}
#ifdef REENTRY
			:: hc[p] == 1 && p == 0 ->
				/* a short inner hold by the same owner (Acquire with TTLS) */
				atomic {
					if
					:: rex[n] && rexp[n] > 0 && rhc[n] > 0 && rhc[n] < 3 && rown[n] == OWN(p) ->
						rhc[n]++;
						if :: rexp[n] < TTLS -> rexp[n] = TTLS :: else fi;
						if :: rsk[n] != KEY(p) -> rsk[n] = 0 :: else fi;
						if :: hc[p] = 2 :: FAULTS -> skip fi
					:: else     /* see README: a lapsed re-entry is not modelled here */
					fi;
					check()
				}
			:: hc[p] == 2 -> atomic { renew(p, n, htok[p], TTLS, ok); ok = 0; check() }
			:: hc[p] == 2 -> atomic { release(p, n, htok[p]); hc[p] = 1 }
#endif
			:: hc[p] == 1 -> break                      /* the user releases */
			od;
releasing:
			/* Release: released := true, then the UPDATE (which may fail) */
			atomic {
				hc[p] = 0; ldl[p] = 0; hkey[p] = 0; ok = 0; FRESH(p);
				if
				:: release(p, n, htok[p])
				:: FAULTS -> skip                       /* error: the lease lapses */
				fi;
#ifdef WAITLIST
				wakefirst(LOCKER(p), n);                /* the Locker's waitlist.wakeFirst */
#endif
				htok[p] = 0;
				RESET
			}
done:
			skip
		:: else -> ended[p] = 1; break
		od
	   } unless {
		atomic {
			crashreq[p] ->
			crashreq[p] = 0;
			hc[p] = 0; htok[p] = 0; hkey[p] = 0; ldl[p] = 0;
			tid[p] = 0; tkey[p] = 0;    /* its waiter row stays until it lapses */
			salive[p] = 0;          /* the server session ends with the process */
			sup[p] = 0; sdl[p] = 0;
#ifdef WAITLIST
			inwl[p] = 0; tkt[p] = 0; arr[p] = 0; wake[p] = 0;
#endif
			life[p]++;
#ifndef RESTART
			ended[p] = 1;           /* no restart: its session stays closed too */
#endif
			res = 0; early = 0; ok = 0; RESET
		}
	   };
#ifndef RESTART
		break
#endif
	od;
	ended[p] = 1
}

#ifdef TIMELY
#define HEARTBEATS false    /* they only keep beliefs, which are not checked here */
#else
#define HEARTBEATS true
#endif
#ifdef MARKERS
/* The Locker's session connection: the marker, its heartbeat, and the
 * server ending the session. The session deadline is measured from the
 * last successful heartbeat (or the statement that took the marker). */
proctype Sess(byte p) {
end_sess:
	do
	:: STEP {                                 /* heartbeat */
		HEARTBEATS && sup[p] ->
		if
		:: salive[p] -> STARTSDL(sdl[p]); check()
		:: else -> sup[p] = 0; sdl[p] = 0       /* marker not held: locks with K lost */
		fi
	   }
	:: STEP { salive[p] && SESSFAULTS -> salive[p] = 0 }   /* the session ends: killed, connection lost */
	:: STEP {                                 /* a new session, with a new key */
		!sup[p] && sinc[p] < SMAX && !ended[p] ->
		sinc[p]++; salive[p] = 1; sup[p] = 1; STARTSDL(sdl[p]); check()
	   }
	od
}
#endif

#ifdef QUEUE
/* Queue.beat: each queued waiter's row is pushed to now + WTTL; a row that
 * vanished (deleted as dead) is queued again at the tail */
inline beat(i) {
	if
	:: wrow[i] && wid[i] == tid[i] -> wexp[i] = WTTL
	:: !wrow[i] && nextid < IDMAX ->
		MARKRQ(hn[i]);
		nextid++;
		wrow[i] = 1; wid[i] = nextid; wnm[i] = hn[i]; wexp[i] = WTTL; wsk[i] = tkey[i]; tid[i] = nextid
	:: else                                     /* bound: re-enqueue failed */
	fi
}
#ifndef TIMELY
active proctype Heart() {
end_heart:
	do
	:: STEP { tid[0] != 0 -> beat(0) }
	:: STEP { tid[1] != 0 -> beat(1) }
	:: STEP { tid[2] != 0 -> beat(2) }
	od
}
#endif
#endif

#ifdef REAPER
/* Locker.Sweep (lapsed rows, grace 0: the stripe counter raised to the
 * row's token, then the row deleted) and Queue.DeleteDead */
inline sweep(n) {
	if :: rtok[n] > fence -> fence = rtok[n] :: else fi;
	rex[n] = 0; rtok[n] = 0; rown[n] = 0; rhc[n] = 0; rexp[n] = 0; rsk[n] = 0; MHCLEAR(n);
#ifdef QUEUE
	rq[n] = 0;
#endif
	check()
}
inline reapw(i) {
	wrow[i] = 0; wid[i] = 0; wnm[i] = 0; wexp[i] = 0; wsk[i] = 0
}
active proctype Reaper() {
end_reaper:
	do
	:: STEP { rex[0] && rexp[0] < 0 -> sweep(0) }
	:: STEP { NN > 1 && rex[NN - 1] && rexp[NN - 1] < 0 -> sweep(NN - 1) }
#ifdef QUEUE
	:: STEP { wrow[0] && wexp[0] < 0 -> reapw(0) }
	:: STEP { wrow[1] && wexp[1] < 0 -> reapw(1) }
	:: STEP { wrow[2] && wexp[2] < 0 -> reapw(2) }
#endif
	od
}
#endif

#if CRASHES > 0
active proctype Chaos() {
end_chaos:
	do
	:: STEP { crashes < CRASHES && CRASHABLE(0) && !crashreq[0] && !ended[0] -> crashes++; crashreq[0] = 1 }
	:: STEP { crashes < CRASHES && CRASHABLE(1) && !crashreq[1] && !ended[1] -> crashes++; crashreq[1] = 1 }
	:: STEP { crashes < CRASHES && CRASHABLE(2) && !crashreq[2] && !ended[2] -> crashes++; crashreq[2] = 1 }
	od
}
#endif

#ifdef FAILOVER
/* An unplanned failover of a PostgreSQL primary with an asynchronous
 * standby. First, at any moment, the WAL stops reaching the standby: it
 * keeps the primary's state as it was then (the commits after it are
 * never replicated). Later the primary dies and the standby is promoted:
 * the database is the standby's copy, on a new timeline. The holders keep
 * their beliefs and local deadlines; their connections break, so their
 * next statements go to the new primary (README: why that needs no step
 * here). The database clock goes on: the new primary's clock is taken to
 * agree with the old one's (README). */
active proctype Failover() {
	byte i;
end_failover:
	do
	:: STEP {
		fo == 0 ->
		for (i : 0 .. NN - 1) {
			sb_rex[i] = rex[i]; sb_rtok[i] = rtok[i]; sb_rown[i] = rown[i];
			sb_rhc[i] = rhc[i]; sb_rexp[i] = rexp[i]
		}
		sb_fence = fence; sb_rec1 = rec1;
		i = 0; fo = 1
	   }
	:: STEP {
		fo == 1 ->
		for (i : 0 .. NN - 1) {
			rex[i] = sb_rex[i]; rtok[i] = sb_rtok[i]; rown[i] = sb_rown[i];
			rhc[i] = sb_rhc[i]; rexp[i] = sb_rexp[i]; rsk[i] = 0;
			sb_rex[i] = 0; sb_rtok[i] = 0; sb_rown[i] = 0; sb_rhc[i] = 0; sb_rexp[i] = 0
		}
		fence = sb_fence; rec1 = sb_rec1;
		sb_fence = 0; sb_rec1 = 0;
		for (i : 0 .. NP - 1) {
			stale[i] = (hc[i] > 0)
		}
		tl++;
		i = 0; fo = 2;
		check()
	   }
	od
}
#endif

/* a countdown in db ticks */
inline down(x) {
	if :: x > 0 -> x-- :: else fi
}
/* a database timestamp relative to now, clamped at "lapsed a while ago" */
inline age(x) {
	if :: x > -1 -> x-- :: else fi
}
#ifdef TIMELY
/* In the liveness configurations live processes are timely: a queued
 * waiter's heartbeat runs before its row lapses (the Clock does it just in
 * time; a crashed process has no ticket, so its row lapses). */
#define BEATDUE(i) if :: tid[i] != 0 && wrow[i] && wexp[i] <= 1 -> beat(i) :: else fi
#else
#define BEATDUE(i) skip
#endif

active proctype Clock() {
	byte i;
end_clock:
	do
	:: STEP {
		BEATDUE(0); BEATDUE(1); BEATDUE(2);
		for (i : 0 .. NN - 1) {
			if :: rex[i] -> age(rexp[i]) :: else fi;
#ifdef FAILOVER
			if :: sb_rex[i] -> age(sb_rexp[i]) :: else fi;
#endif
#ifdef MINHOLD
			down(rmh[i])
#endif
		}
		for (i : 0 .. NP - 1) {
			if :: wrow[i] -> age(wexp[i]) :: else fi;
			down(ldl[i]);
			/* only a hold that relies on the marker reads the session
			 * deadline; otherwise it is kept at its longest (README) */
			if
			:: hc[i] > 0 && hkey[i] != 0 -> down(sdl[i])
			:: else -> STARTSDL(sdl[i]); sdl[i] = (sup[i] -> sdl[i] : 0)
			fi
		}
#ifdef FAILOVER
		down(pl);
#endif
		i = 0;
		check()
	   }
	od
}

init {
	atomic {
#ifdef USEDROW
		/* the name is fresh, or was used before: its row lapsed and not
		 * queued (a takeover found no waiter left), token 0; within the
		 * token bound, that is what lets myTakeFast run */
		if :: skip :: rex[0] = 1; rexp[0] = -1; rq[0] = 0 fi;
#endif
		run Client(0); run Client(1); run Client(2);
#ifdef MARKERS
		/* a Locker takes its first marker when it starts */
		if :: HASSESS(0) -> sinc[0] = 1; salive[0] = 1; sup[0] = 1; STARTSDL(sdl[0]); run Sess(0) :: else fi;
		if :: HASSESS(1) -> sinc[1] = 1; salive[1] = 1; sup[1] = 1; STARTSDL(sdl[1]); run Sess(1) :: else fi;
		if :: HASSESS(2) -> sinc[2] = 1; salive[2] = 1; sup[2] = 1; STARTSDL(sdl[2]); run Sess(2) :: else fi;
#endif
		skip
	}
}

#ifdef CFG_CRASH
/* the process that never crashes eventually acquires, whichever others die */
ltl progress_crash { <> (got > 0) }
#endif
#ifdef CFG_FAIRWAKE
/* both fair waiters of the shared Locker eventually acquire */
ltl progress_fair { <> (got == 2) }
#endif

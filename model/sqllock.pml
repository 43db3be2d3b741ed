/*
 * sqllock's lock protocol at the level of its SQL statements, for spin.
 *
 * README.md beside this file maps every step to the statement and the Go
 * function it stands for, says what is abstracted away, and which parts are
 * modelled from the crash-detection design (session markers) rather than
 * from code. Change this file with the code.
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
 *                  fresh inserts, the reaper, lost connections, a crash
 *   CFG_MARKERS    3 processes, 1 name: crash detection through session
 *                  markers, sessions killed, a crash, lost connections
 *   CFG_QUEUE      3 processes, 2 names: the fair queue with heartbeats,
 *                  re-enqueue, dead waiters, the reaper, markers, a crash
 *                  (these three: safety, by assertions)
 *   CFG_CRASH      progress when the holder dies (LTL progress_crash)
 *   CFG_FAIRWAKE   two fair waiters in one Locker: the head of the queue is
 *                  the one that polls (LTL progress_fair)
 * Mutants (model/mutants/*.pml) define one MUT_* switch and include this file.
 */

#define NP 3            /* client processes, each its own Locker unless LOCKER says */

#ifdef CFG_LEASE
#define NN 2
#define REENTRY
#define REAPER
#define FAULTS 1
#define GIVEUP 1
#define CRASHES 1
#define RESTART
#endif

#ifdef CFG_MARKERS
#define NN 1
#define MARKERS
#define FAULTS 1
#define GIVEUP 1
#define CRASHES 1
#define RESTART
#endif

#ifdef CFG_QUEUE
#define NN 2
#define QUEUE
#define MARKERS
#define NOKILL          /* sessions end only with their process */
#define REAPER
#define FAULTS 1
#define GIVEUP 1
#define CRASHES 1
#define RESTART
#endif

#ifdef CFG_CRASH
#define NN 1
#define QUEUE
#define MARKERS
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
#error "choose a configuration: -DCFG_LEASE, -DCFG_MARKERS, -DCFG_QUEUE, -DCFG_CRASH or -DCFG_FAIRWAKE"
#endif
#ifndef CRASHABLE
#define CRASHABLE(p) true
#endif
#ifndef LOCKER
#define LOCKER(p) (p)
#endif
#ifdef NOKILL
#define SESSFAULTS 0
#else
#define SESSFAULTS FAULTS
#endif

/* ---- durations, in database ticks ---- */
#define TTL 5           /* lease of a hold */
#define TTLS 2          /* TTL of a short inner (reentrant) hold */
#define G 3             /* crash grace */
#define WTTL 4          /* waiter TTL */

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
 *   lease deadline   0.9*TTL = 4.5   5..5        4..6
 *   session deadline 0.9*G = 2.7     3..3        3..4
 *   MUT_SESSION_DEADLINE: 1.1*G = 3.3, RHO 10%: 4..4
 */
#ifdef MUT_DRIFT
#define LDL_LO 4
#define LDL_HI 6
#define SDL_LO 3
#define SDL_HI 4
#else
#define LDL_LO 5
#define LDL_HI 5
#ifdef MUT_SESSION_DEADLINE
#define SDL_LO 4
#define SDL_HI 4
#else
#define SDL_LO 3
#define SDL_HI 3
#endif
#endif
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

/* ---- bounds of the state space ---- */
#ifndef MAXTOK
#define MAXTOK 3        /* tokens drawn per stripe / per name row */
#endif
#define IDMAX 4         /* waiter ids */
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
/* dblock_fences: both names on one stripe */
byte  fence;
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
byte  sinc[NP];         /* current session incarnation (its marker key), 0 none yet */
bool  sup[NP];          /* the Locker trusts its session */
byte  sdl[NP];          /* db ticks left until the session deadline, by the local clock */
bool  crashreq[NP];
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

/* p believes it holds hn[p]: a hold, not released, and neither its lease
 * deadline nor (with a marker) its session deadline has passed by its own
 * clock. That is Lock.Err() == nil when the process looks. */
#define BEL(p) (hc[p] > 0 && ldl[p] > 0 && SESSOK(p))
/* what p believes is true in the database: the row is p's, with p's token,
 * and its lease has not lapsed by the database clock */
#define LEASE(p) (!BEL(p) || (rex[hn[p]] && rown[hn[p]] == OWN(p) && rtok[hn[p]] == htok[p] && rexp[hn[p]] > 0))
#define EXCL(p, q) (!(BEL(p) && BEL(q) && hn[p] == hn[q]))

/* Checked after every step that can make either false: every step that
 * writes a lock row, starts or extends a belief, and every clock tick. */
inline check() {
	assert(EXCL(0, 1) && EXCL(0, 2) && EXCL(1, 2));
	assert(LEASE(0) && LEASE(1) && LEASE(2))
}

/* a token is written into the row of name n: it must exceed every earlier
 * one of n, across takeovers, sweeps and fresh inserts */
inline issued(n, t) {
	assert(t > lasttok[n]);
	lasttok[n] = t
}

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
	hc[p] = 1; htok[p] = t; hkey[p] = KEY(p); STARTLDL(ldl[p])
}

/* pgTake / myTake: takeover of a lapsed row or re-entry by its owner.
 * WHERE (lapsed AND NOT EXISTS older live waiter) OR (hold_count > 0 AND
 * same owner); SET by CASE lapsed. */
inline take(p, n, q, res) {
	if
	:: !rex[n] -> res = R_NOROW
	:: rex[n] && rexp[n] <= 0 && (!OLDER(n, q) || (rhc[n] > 0 && rown[n] == OWN(p))) ->
		if
		:: rtok[n] >= MAXTOK -> res = R_ERR     /* bound: as if never sent */
		:: else ->
#ifdef STRICT_FAIR
			/* finding: an owner whose lapsed row still counts its holds
			 * re-enters past live older waiters (README) */
			assert(!OLDER(n, q));
#endif
			notpassed(p, n, q);
			rtok[n]++;
			issued(n, rtok[n]);
			rhc[n] = 1; rown[n] = OWN(p); rexp[n] = TTL; rsk[n] = KEY(p);
			res = R_TAKE
		fi
	:: rex[n] && rexp[n] > 0 && rhc[n] > 0 && rown[n] == OWN(p) ->
		if
		:: rhc[n] >= 3 -> res = R_ERR           /* bound */
		:: else ->
			rhc[n]++;
			if :: rexp[n] < TTL -> rexp[n] = TTL :: else fi;  /* GREATEST */
			if :: rsk[n] != KEY(p) -> rsk[n] = 0 :: else fi;   /* another key: lease only */
			res = R_REENTER
		fi
	:: else -> res = R_FAIL
	fi
}

/* pgInsert (one statement) / mysqlStore.insert (one transaction): a fresh
 * name's row, its token drawn from the stripe counter while the insert
 * wins. MUT_EARLY_TOKEN: the token was drawn earlier (early). */
inline insert(p, n, q, res, early) {
	if
	:: rex[n] -> res = R_FAIL                   /* ON CONFLICT DO NOTHING / 1062 */
	:: !rex[n] && OLDER(n, q) -> res = R_FAIL   /* kept for older fair waiters */
	:: !rex[n] && !OLDER(n, q) ->
#ifdef MUT_EARLY_TOKEN
		if
		:: early == 0 -> res = R_ERR
		:: else ->
			notpassed(p, n, q);
			rex[n] = 1; rtok[n] = early;
			issued(n, early);
			rhc[n] = 1; rown[n] = OWN(p); rexp[n] = TTL; rsk[n] = KEY(p);
			res = R_TAKE
		fi
#else
		if
		:: fence >= MAXTOK -> res = R_ERR       /* bound */
		:: else ->
			notpassed(p, n, q);
			fence++;
			rex[n] = 1; rtok[n] = fence;
			issued(n, fence);
			rhc[n] = 1; rown[n] = OWN(p); rexp[n] = TTL; rsk[n] = KEY(p);
			res = R_TAKE
		fi
#endif
	fi
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
		if :: rhc[n] == 1 -> rexp[n] = 0 :: else fi;
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
	tid[p] = 0;
#ifdef WAITLIST
	wasfirst = ISFIRST(p);
	inwl[p] = 0; tkt[p] = 0; arr[p] = 0;
	if :: wasfirst -> wakefirst(LOCKER(p), n) :: else fi;
#endif
	wasfirst = 0
}

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

proctype Client(byte p) {
	byte n, res, q, early;
	bool fair, ok, wasfirst;
	byte rounds;

	do
	:: {
		do
		:: MORE ->
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
			}
try:
#ifdef MUT_EARLY_TOKEN
			/* mutant: nextval() before the unique check, its own statement */
			atomic {
				if
				:: !rex[n] && fence < MAXTOK -> fence++; early = fence
				:: else -> early = 0
				fi
			}
#endif
			/* Locker.try, first statement: the UPDATE */
			atomic {
				if
				:: take(p, n, q, res);
				   if :: res == R_TAKE || res == R_REENTER -> LOSE(res) :: else fi
				fi;
				if
				:: res == R_TAKE || res == R_REENTER ->
					hold(p, rtok[n]); leave(p, n, wasfirst); got = got + GOTSTEP(p)
				:: res == R_ERR -> leave(p, n, wasfirst)   /* Acquire returns the error */
				:: else
				fi;
				check()
			}
			if
			:: res == R_NOROW ->
				/* second statement: the insert of a fresh name */
				atomic {
					if
					:: insert(p, n, q, res, early);
					   if :: res == R_TAKE -> LOSE(res) :: else fi
					fi;
					if
					:: res == R_TAKE -> hold(p, rtok[n]); leave(p, n, wasfirst); got = got + GOTSTEP(p)
					:: res == R_ERR -> leave(p, n, wasfirst)
					:: else
					fi;
					early = 0;
					check()
				}
			:: else -> early = 0
			fi;
			if
			:: hc[p] > 0 -> res = 0; goto holding
			:: res == R_ERR -> res = 0; goto done
			:: else -> res = 0
			fi;
#ifdef QUEUE
			/* beforeSleep: a fair waiter joins the queue, and tries at once */
			if
			:: fair && q == INF ->
				atomic {
					if
					:: nextid < IDMAX ->
						nextid++;
						wrow[p] = 1; wid[p] = nextid; wnm[p] = n; wexp[p] = WTTL; wsk[p] = KEY(p);
						tid[p] = nextid
					:: else -> res = R_ERR                /* bound: Enqueue failed */
					fi
				}
				if :: res == R_ERR -> res = 0; goto done :: else fi;
				atomic {
#ifdef WAITLIST
					tkt[p] = 1;                         /* setTicket */
#endif
					q = tid[p]
				}
				goto try
			:: else
			fi;
#endif
			do
#ifdef WAITLIST
			:: /* pause and sleep: only the first waiter of the Locker polls */
				atomic {
					ok = ISFIRST(p);
					if :: wasfirst && !ok -> wakefirst(LOCKER(p), n) :: else fi;
					wasfirst = ok; ok = 0
				}
				if
				:: wasfirst -> wake[p] = 0      /* the pacer's pause, or a wake-up */
				:: else -> atomic { wake[p] -> wake[p] = 0 }  /* idle recheck: never */
				fi;
				atomic { q = (tid[p] != 0 -> tid[p] : INF) };  /* read at every try */
				goto try
#else
			:: atomic { q = (tid[p] != 0 -> tid[p] : INF) };  /* poll */
				goto try
#endif
#ifdef MARKERS
			:: /* the holder's marker is gone: shorten its lease to now + G */
				atomic {
					rex[n] && rexp[n] > G && rsk[n] != 0 && rown[n] != OWN(p) && GONE(rown[n] % NP, rsk[n]) ->
					rexp[n] = G;
					check()
				}
#ifdef QUEUE
			:: /* an older waiter's marker is gone: shorten its row likewise */
				atomic {
					select (res : 0 .. NP - 1);
					if
					:: res != p && wrow[res] && wnm[res] == n && wexp[res] > G && wsk[res] != 0 && !MKALIVE(res, wsk[res]) ->
						wexp[res] = G
					:: else
					fi;
					res = 0
				}
#endif
#endif
			:: GIVEUP -> atomic { leave(p, n, wasfirst) }; goto done  /* ctx ended */
			od;

holding:
			do
			:: /* renewal (renewLoop / Refresh) */
				atomic {
					renew(p, n, htok[p], TTL, ok);
					if
					:: ok -> STARTLDL(ldl[p])
					:: else -> hc[p] = 0; ldl[p] = 0      /* lost: taken over or lapsed */
					fi;
					ok = 0;
					check()
				}
				if :: hc[p] == 0 -> goto releasing :: else fi
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
			atomic { hc[p] = 0; ldl[p] = 0; hkey[p] = 0 }   /* released := true */
			atomic {
				if
				:: release(p, n, htok[p])
				:: FAULTS -> skip                       /* error: the lease lapses */
				fi;
#ifdef WAITLIST
				wakefirst(LOCKER(p), n);                /* busyWaitlists.wakeFirst */
#endif
				htok[p] = 0
			}
done:
			atomic { n = 0; q = 0; fair = 0; wasfirst = 0; hn[p] = 0 }
		:: else -> break
		od
	   } unless {
		atomic {
			crashreq[p] ->
			crashreq[p] = 0;
			hc[p] = 0; htok[p] = 0; hkey[p] = 0; ldl[p] = 0;
			tid[p] = 0;             /* its waiter row stays until it lapses */
			salive[p] = 0;          /* the server session ends with the process */
			sup[p] = 0; sdl[p] = 0;
#ifdef WAITLIST
			inwl[p] = 0; tkt[p] = 0; arr[p] = 0; wake[p] = 0;
#endif
			life[p]++;
			n = 0; res = 0; q = 0; early = 0; fair = 0; ok = 0; wasfirst = 0; hn[p] = 0
		}
	   };
#ifndef RESTART
		break
#endif
	od
}

#ifdef MARKERS
/* The Locker's session connection: the marker, its heartbeat, and the
 * server ending the session. The session deadline is measured from the
 * last successful heartbeat (or the statement that took the marker). */
proctype Sess(byte p) {
end_sess:
	do
	:: atomic {                                 /* heartbeat */
		sup[p] ->
		if
		:: salive[p] -> STARTSDL(sdl[p]); check()
		:: else -> sup[p] = 0; sdl[p] = 0       /* marker not held: locks with K lost */
		fi
	   }
	:: atomic { sup[p] && SESSFAULTS -> sup[p] = 0; sdl[p] = 0; salive[p] = 0 }  /* connection failed: closed */
	:: atomic { sup[p] && sdl[p] == 0 -> sup[p] = 0 }        /* session deadline passed */
	:: atomic { salive[p] && SESSFAULTS -> salive[p] = 0 }   /* the server ends the session */
	:: atomic {                                 /* a new session, with a new key */
		!sup[p] && sinc[p] < SMAX ->
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
		nextid++;
		wrow[i] = 1; wid[i] = nextid; wnm[i] = hn[i]; wexp[i] = WTTL; wsk[i] = KEY(i); tid[i] = nextid
	:: else                                     /* bound: re-enqueue failed */
	fi
}
active proctype Heart() {
end_heart:
	do
	:: atomic { tid[0] != 0 -> beat(0) }
	:: atomic { tid[1] != 0 -> beat(1) }
	:: atomic { tid[2] != 0 -> beat(2) }
	od
}
#endif

#ifdef REAPER
/* Locker.Sweep (lapsed rows, grace 0: the stripe counter raised to the
 * row's token, then the row deleted) and Queue.DeleteDead */
inline sweep(n) {
	if :: rtok[n] > fence -> fence = rtok[n] :: else fi;
	rex[n] = 0; rtok[n] = 0; rown[n] = 0; rhc[n] = 0; rexp[n] = 0; rsk[n] = 0;
	check()
}
inline reapw(i) {
	wrow[i] = 0; wid[i] = 0; wnm[i] = 0; wexp[i] = 0; wsk[i] = 0
}
active proctype Reaper() {
end_reaper:
	do
	:: atomic { rex[0] && rexp[0] < 0 -> sweep(0) }
	:: atomic { NN > 1 && rex[NN - 1] && rexp[NN - 1] < 0 -> sweep(NN - 1) }
#ifdef QUEUE
	:: atomic { wrow[0] && wexp[0] < 0 -> reapw(0) }
	:: atomic { wrow[1] && wexp[1] < 0 -> reapw(1) }
	:: atomic { wrow[2] && wexp[2] < 0 -> reapw(2) }
#endif
	od
}
#endif

#if CRASHES > 0
active proctype Chaos() {
end_chaos:
	do
	:: atomic { crashes < CRASHES && CRASHABLE(0) && !crashreq[0] -> crashes++; crashreq[0] = 1 }
	:: atomic { crashes < CRASHES && CRASHABLE(1) && !crashreq[1] -> crashes++; crashreq[1] = 1 }
	:: atomic { crashes < CRASHES && CRASHABLE(2) && !crashreq[2] -> crashes++; crashreq[2] = 1 }
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
/* A live process is not paused in the liveness configurations: its queue
 * heartbeat runs before its waiter row lapses. */
#define DUE(i) (tid[i] != 0 && wrow[i] && wexp[i] <= 1)
#define MAYTICK (!DUE(0) && !DUE(1) && !DUE(2))
#else
#define MAYTICK true
#endif

active proctype Clock() {
	byte i;
end_clock:
	do
	:: atomic {
		MAYTICK ->
		for (i : 0 .. NN - 1) { if :: rex[i] -> age(rexp[i]) :: else fi }
		for (i : 0 .. NP - 1) {
			if :: wrow[i] -> age(wexp[i]) :: else fi;
			down(ldl[i]); down(sdl[i])
		}
		i = 0;
		check()
	   }
	od
}

init {
	atomic {
		run Client(0); run Client(1); run Client(2);
#ifdef MARKERS
		run Sess(0); run Sess(1); run Sess(2);
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

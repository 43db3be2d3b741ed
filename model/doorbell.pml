/*
 * The MySQL doorbell's wake-up protocol (internal/wake/bell.go), for spin:
 * waiters block on a GET_LOCK that the holder's session connection holds,
 * and the holder's session releases it ("rings") after a release that a
 * waiter asked to be told of. README.md beside this file maps the steps to
 * the statements and functions.
 *
 * Only the wake-up is modelled: the lock row as far as taking, arming and
 * releasing it go, the sessions' markers and bells, crashes. The lease
 * never lapses while its holder lives (its renewal is not modelled), and no
 * wait times out: the property is that nobody needs a timeout, the
 * fallback (GET_LOCK's timeout, the pacer's sleep bounded by the lease
 * left) is not relied on. Safety is not checked here: every acquisition is
 * still the take statement, which sqllock.pml checks.
 *
 * Property (LTL, under weak fairness): every process that does not crash
 * eventually makes all its acquisitions; so a waiter blocked on a
 * bell always wakes when the lock is released or its holder dies.
 *
 * Mutants: MUT_NO_GENERATION (one bell per session, released and taken
 * again at each ring: the lost wake-up the generations prevent),
 * MUT_ARM_FIRST (the waiter reads the bell's generation after arming,
 * not before), MUT_BELL_AHEAD (the waiter takes the generation after the
 * recorded one even when the recorded bell is still held) and
 * MUT_STALE_POLLS (the code before the model's finding: a waiter whose
 * watcher declines a generation it saw rung polls without crash
 * detection, so a dead holder's lease must run out).
 */

#define NP 3            /* client processes, each a Locker with its own session */
/* acquisitions per process: process 0 makes two, so that its session
 * rings twice (a waiter may read a generation that is already stale) */
#ifdef ONEROUND
#define ROUNDS(p) 1
#else
#define ROUNDS(p) (p == 0 -> 2 : 1)
#endif
#define GMAX 3          /* bell generations per session: one per ring, at most one ring per release */

/* ======== the database ======== */
/* dblock_locks: the one name's row (it exists from the start, free) */
byte  rtok;             /* token */
byte  rown;             /* owner: process + 1, 0 none yet */
byte  rhc;              /* hold_count */
bool  rlive;            /* expires_at > now */
bool  rshort;           /* the lease was shortened to G: it lapses on its own */
byte  rsk;              /* session_key: the holder's session (process + 1), 0 none */
bool  wanted;           /* a waiter of another process asked for a ring */
/* dblock_sessions: the current bell generation of each session */
byte  tab[NP];
/* GET_LOCK names held by the sessions: the marker sqllock.<K> and the
 * bells sqllock.<K>.<g>; the server frees them all when the session ends,
 * one after the other (either first) */
bool  salive[NP];       /* the session's marker is held */
bool  sbells[NP];       /* its bells are held */
byte  bcur[NP];         /* it holds bells bcur and bcur + 1 (bells.cur once recorded) */

/* ======== the clients ======== */
bool  ringreq[NP];      /* a release asked the session to ring */
bool  dead[NP];         /* crashed */
bool  fin[NP];          /* has made all its acquisitions: the property's ghost */
/* watcher.rung: per waiting process (Locker) and session, 1 + the newest
 * bell generation its watcher found rung while the marker was held */
byte  rung[NP * NP];
#define RUNG(p, s) rung[(p) * NP + (s)]
byte  crashes;

/* bell g of session s is held */
#ifdef MUT_NO_GENERATION
/* mutant: one bell per session (generation 0 always), released and taken
 * again at each ring */
#define BELLHELD(s, g) (sbells[s] && bcur[s] == 0)
#else
#define BELLHELD(s, g) (sbells[s] && ((g) == bcur[s] || (g) == bcur[s] + 1))
#endif

/* The session connection of process s: rings on request (bells.ring). A
 * ring is two statements: myRecordBell records c + 1, then myRing
 * releases bell c and takes c + 2. A request is taken off the session's
 * one-slot channel (session.ring) before the ring starts, so one made
 * during a ring brings another. (Clearing it when the ring ends instead
 * would lose nothing: a waiter that armed for the lost request read the
 * generation before the record, which this ring releases: the model
 * finds no lost wake-up that way.) */
proctype Sess(byte s) {
end_sess:
	do
	:: atomic { salive[s] && sbells[s] && ringreq[s] && bcur[s] < GMAX - 1 -> ringreq[s] = 0;
#ifdef MUT_NO_GENERATION
		bcur[s] = 1 }                           /* RELEASE_LOCK(bell K) */
		atomic { bcur[s] = 0 }                  /* GET_LOCK(bell K, 0) again */
#else
		tab[s] = bcur[s] + 1 }                  /* myRecordBell: bell = c + 1 */
		atomic { bcur[s]++ }                    /* myRing: RELEASE_LOCK(K.c) + GET_LOCK(K.c+2, 0) */
#endif
	od
}

/* A crash: the process stops, the server ends its session and frees its
 * bells and its marker, in either order (MySQL releases a session's
 * user-level locks one by one). At most one; Chaos may also decide that
 * none happens, so that weak fairness does not force one. */
active proctype Chaos() {
	byte v;
	if
	:: skip                                         /* no crash */
	:: atomic { crashes == 0 -> crashes = 1; v = 0; dead[0] = 1 }
	:: atomic { crashes == 0 -> crashes = 1; v = 1; dead[1] = 1 }
	:: atomic { crashes == 0 -> crashes = 1; v = 2; dead[2] = 1 }
	fi;
	if
	:: crashes > 0 ->
		if
		:: atomic { sbells[v] = 0 }; atomic { salive[v] = 0 }
		:: atomic { salive[v] = 0 }; atomic { sbells[v] = 0 }
		fi
	:: else
	fi
}

/* The lease of a shortened row lapses, now + G later. */
active proctype Lapse() {
end_lapse:
	do
	:: atomic { rlive && rshort -> rlive = 0; rshort = 0 }
	od
}

#define ALIVE (!dead[p])

proctype Client(byte p) {
	byte t, k, g;           /* what the waiter read: token, key, generation */
	byte rounds;
	do
	:: rounds == ROUNDS(p) -> fin[p] = 1; break
	:: /* the take statement: a free or lapsed row */
		atomic {
			ALIVE && rounds < ROUNDS(p) && !rlive ->
			rtok++; rown = p + 1; rhc = 1; rlive = 1; rshort = 0; rsk = p + 1
		}
		/* held; the final release frees the row and reports wanted */
		atomic {
			ALIVE && rown == p + 1 && rhc == 1 ->
			rhc = 0; rlive = 0; rshort = 0;
			if :: wanted -> wanted = 0; ringreq[p] = 1 :: else fi;
			rounds++; t = 0; k = 0; g = 0
		}
	:: /* a failed try: the row is held; its token and key (myRemaining) */
		atomic { ALIVE && rounds < ROUNDS(p) && rlive -> t = rtok; k = rsk }
#ifndef MUT_ARM_FIRST
		/* (a) the holder session's current generation (myBellOf): the
		 * recorded one, then, in the same statement but not atomically
		 * with it, one more if that bell is free already (the session
		 * ended; the record goes before the ring) */
		atomic { ALIVE -> g = (k > 0 -> tab[k - 1] : 0) }
#ifdef MUT_BELL_AHEAD
		/* mutant: one more whatever the bell's state */
		atomic { ALIVE -> if :: k > 0 && g < GMAX -> g++ :: else fi }
#else
		atomic { ALIVE -> if :: k > 0 && !BELLHELD(k - 1, g) && g < GMAX -> g++ :: else fi }
#endif
#endif
		/* (b) arm (myArm): the release of hold t will see wanted */
		if
		:: atomic { ALIVE && rtok == t && rhc > 0 && rlive -> wanted = 1 }
		:: atomic { ALIVE && !(rtok == t && rhc > 0 && rlive) -> skip }   /* retry the take at once */
			goto next
		fi;
#ifdef MUT_ARM_FIRST
		/* mutant: the generation is read after arming */
		atomic { ALIVE -> g = (k > 0 -> tab[k - 1] : 0) }
#endif
		/* watcher.watch declines a generation its watcher has seen rung
		 * (the waiter read it before the ring's record): the waiter polls,
		 * and here it still has its holder's marker watched, so that a
		 * holder that died is found. The code does not do that yet:
		 * MUT_STALE_POLLS (README, Findings). */
		if
		:: atomic { ALIVE && g < RUNG(p, k - 1) ->
#ifdef MUT_STALE_POLLS
			skip
#else
			if :: !salive[k - 1] && rtok == t && rsk == k && rlive -> rshort = 1 :: else fi
#endif
		   }
			goto next
		:: atomic { ALIVE && g >= RUNG(p, k - 1) -> skip }
		fi;
		/* (c) the watcher's GET_LOCK(bell K.g) granted (myAwaitBell; the
		 * bell is released at once) */
		atomic { ALIVE && k > 0 && !BELLHELD(k - 1, g) -> skip };
		/* then IS_FREE_LOCK(sqllock.K) = 1 means the session ended: shorten
		 * the lease of hold t as the crash watcher does; else it rang:
		 * record that in rung and wake the waiter, which tries again */
		atomic {
			ALIVE ->
			if
			:: !salive[k - 1] && rtok == t && rsk == k && rlive -> rshort = 1
			:: !salive[k - 1] && !(rtok == t && rsk == k && rlive) -> skip
			:: salive[k - 1] -> if :: RUNG(p, k - 1) < g + 1 -> RUNG(p, k - 1) = g + 1 :: else fi
			fi
		}
next:
		atomic { t = 0; k = 0; g = 0 }
	od
}

init {
	atomic {
		salive[0] = 1; salive[1] = 1; salive[2] = 1;
		sbells[0] = 1; sbells[1] = 1; sbells[2] = 1;
		run Sess(0); run Sess(1); run Sess(2);
		run Client(0); run Client(1); run Client(2)
	}
}

/* every process that does not crash makes all its acquisitions */
ltl progress_bell { <> ((fin[0] || dead[0]) && (fin[1] || dead[1]) && (fin[2] || dead[2])) }

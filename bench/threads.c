/*
 * threads.c - the shape of MPICH's conformance test threads/pt2pt/threads.c
 * as a benchmark (the shim must never be slower than raw): written anew, no code
 * taken from it.
 *
 * 2 ranks (any even number: pairs 2k, 2k+1); even ranks send, odd ranks
 * receive, every thread on MPI_COMM_WORLD with tag 0, so any message may
 * match any thread's receive. For nt = 1 .. T threads in turn (threads made
 * and joined for each nt, a thread barrier before and after, as the test
 * does), each thread runs LOOPS x 16 messages, in three phases:
 *   procnull     blocking MPI_Send/MPI_Recv to MPI_PROC_NULL, 0 bytes;
 *   blocking     blocking MPI_Send/MPI_Recv, sizes 0, 1, 4, ..., 1024 bytes;
 *   nonblocking  windows of 16 MPI_Isend/MPI_Irecv + MPI_Waitall, same sizes.
 * The received data is checked (every byte the sender's pattern for that size).
 *
 * Usage: mpirun -np 2 threads [-t T] [-l LOOPS] [-p PHASES] [-w test] [-b spin]
 * (defaults T = 4, LOOPS = 1000, PHASES = pbn: the letters of the phases to
 * run, for profiling one of them; a phase not run reports 0).
 * -w test: no thread ever waits inside MPI. A blocking call becomes the
 * nonblocking one plus MPI_Test, a window's MPI_Waitall becomes MPI_Testsome
 * passes, and a thread whose test found nothing calls sched_yield. This is
 * the form design rule 2 gives the shim's calls (and rule 3 its Testsome),
 * run on the raw host: what the host charges for it, without the shim.
 * -b spin: the thread barrier spins (a mutex locked and unlocked in a loop,
 * never yielding), as the MPICH test's own MTest_thread_barrier does; the
 * default is a pthread barrier, which sleeps. Threads that finish first then
 * compete for the core with those still communicating.
 * Output (rank 0), one line:
 *   threads: T=4 loops=1000 shim=0|1 procnull=S blocking=S nonblocking=S total=S
 * seconds of each phase (max over ranks).
 */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#define BENCH_PROG "threads"
#include "common.h"

#define WIN 16
#define MAXSZ 1024
#define MAXT 64

static int nthreads = 4, loops = 1000;
static const char *phases = "pbn";
static int test_mode; /* -w test */
static int peer_of_rank, procnull, blocking, msg;
static pthread_barrier_t bar;
static int spin_barrier; /* -b spin */
static pthread_mutex_t sb_mtx = PTHREAD_MUTEX_INITIALIZER;
static int sb_count, sb_gen, sb_n; /* under sb_mtx */

static void barrier_wait(void)
{
    if (!spin_barrier) {
        pthread_barrier_wait(&bar);
        return;
    }
    pthread_mutex_lock(&sb_mtx);
    int gen = sb_gen;
    if (++sb_count == sb_n) {
        sb_count = 0;
        sb_gen++;
    }
    pthread_mutex_unlock(&sb_mtx);
    for (int g = gen; g == gen;) {
        pthread_mutex_lock(&sb_mtx);
        g = sb_gen;
        pthread_mutex_unlock(&sb_mtx);
    }
}

static void check_data(const unsigned char *b, int n)
{
    for (int i = 0; i < n; i++)
        if (b[i] != (unsigned char)(n + i))
            die("received data differs from what was sent");
}

/* -w test: complete req by MPI_Test calls, yielding between them. */
static void test_one(MPI_Request *req, const char *what)
{
    int flag = 0;
    for (;;) {
        check_mpi(MPI_Test(req, &flag, MPI_STATUS_IGNORE), what);
        if (flag)
            return;
        sched_yield();
    }
}

/* -w test: complete a window by MPI_Testsome passes, yielding after a
 * pass that completed nothing. */
static void test_window(MPI_Request *rq, MPI_Status *st)
{
    int left = WIN, idx[WIN], n;
    while (left > 0) {
        check_mpi(MPI_Testsome(WIN, rq, &n, idx, st), "MPI_Testsome");
        if (n == MPI_UNDEFINED)
            break;
        left -= n;
        if (n == 0)
            sched_yield();
    }
}

static void *run(void *arg)
{
    (void)arg;
    unsigned char sb[MAXSZ], rb[WIN][MAXSZ];
    MPI_Request rq[WIN];
    MPI_Status st[WIN];
    int peer = procnull ? MPI_PROC_NULL : peer_of_rank, sender = rank % 2 == 0;
    for (int i = 0; i < msg; i++)
        sb[i] = (unsigned char)(msg + i);
    barrier_wait();
    for (int l = 0; l < loops; l++) {
        if (blocking) {
            for (int j = 0; j < WIN; j++) {
                if (test_mode) {
                    if (sender)
                        check_mpi(MPI_Isend(sb, msg, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &rq[0]), "MPI_Isend");
                    else
                        check_mpi(MPI_Irecv(rb[0], msg, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &rq[0]), "MPI_Irecv");
                    test_one(&rq[0], "MPI_Test");
                } else if (sender) {
                    check_mpi(MPI_Send(sb, msg, MPI_BYTE, peer, 0, MPI_COMM_WORLD), "MPI_Send");
                } else {
                    check_mpi(MPI_Recv(rb[0], msg, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
                }
            }
            if (!sender && !procnull)
                check_data(rb[0], msg);
            continue;
        }
        for (int j = 0; j < WIN; j++) {
            if (sender)
                check_mpi(MPI_Isend(sb, msg, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &rq[j]), "MPI_Isend");
            else
                check_mpi(MPI_Irecv(rb[j], msg, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &rq[j]), "MPI_Irecv");
        }
        if (test_mode)
            test_window(rq, st);
        else
            check_mpi(MPI_Waitall(WIN, rq, st), "MPI_Waitall");
        if (!sender)
            for (int j = 0; j < WIN; j++)
                check_data(rb[j], msg);
    }
    barrier_wait();
    return NULL;
}

/* One phase at the current settings: nt = 1 .. T threads in turn. */
static double phase(void)
{
    double t0 = now();
    for (int nt = 1; nt <= nthreads; nt++) {
        pthread_t th[MAXT];
        check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        pthread_barrier_init(&bar, NULL, (unsigned)nt);
        sb_n = nt;
        for (int i = 1; i < nt; i++)
            if (pthread_create(&th[i], NULL, run, NULL) != 0)
                die("pthread_create failed");
        run(NULL);
        for (int i = 1; i < nt; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&bar);
    }
    double t = now() - t0, tmax = 0;
    check_mpi(MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    return tmax;
}

int main(int argc, char **argv)
{
    int provided, size, c;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((c = getopt(argc, argv, "t:l:p:w:b:")) != -1) {
        if (c == 't')
            nthreads = atoi(optarg);
        else if (c == 'l')
            loops = atoi(optarg);
        else if (c == 'p')
            phases = optarg;
        else if (c == 'w' && strcmp(optarg, "test") == 0)
            test_mode = 1;
        else if (c == 'b' && strcmp(optarg, "spin") == 0)
            spin_barrier = 1;
        else
            die("usage: threads [-t T] [-l LOOPS] [-p PHASES] [-w test] [-b spin]");
    }
    if (provided < MPI_THREAD_MULTIPLE)
        die("MPI_THREAD_MULTIPLE not provided");
    if (size % 2 || nthreads < 1 || nthreads > MAXT || loops < 1)
        die("needs an even number of ranks, 1 <= T <= 64 and LOOPS >= 1");
    peer_of_rank = rank % 2 ? rank - 1 : rank + 1;

    double tp = 0, tb = 0, tn = 0;
    procnull = 1, blocking = 1, msg = 0;
    if (strchr(phases, 'p'))
        tp = phase();
    procnull = 0;
    for (msg = 0; msg <= MAXSZ && strchr(phases, 'b'); msg = msg ? msg * 4 : 1)
        tb += phase();
    blocking = 0;
    for (msg = 0; msg <= MAXSZ && strchr(phases, 'n'); msg = msg ? msg * 4 : 1)
        tn += phase();
    if (rank == 0)
        printf("threads: T=%d loops=%d shim=%d procnull=%.3f blocking=%.3f nonblocking=%.3f total=%.3f\n", nthreads,
               loops, shim_active(), tp, tb, tn, tp + tb + tn);
    MPI_Finalize();
    return 0;
}

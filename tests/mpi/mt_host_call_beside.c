/* A thread that waits for a message while another thread of its process
 * sits in a host call that cannot end before that message's answer.
 *
 * While a program thread is inside a host call that runs the host's
 * progress engine, a progress thread (MPISHIM_PROGRESS=thread, offload)
 * leaves the host alone, except while a program thread sleeps in a shim
 * wait: raw, that thread would be in the host's progress engine too, and
 * it may need a completion only a host poll reports. Here it does: on the
 * left rank of each pair the main thread enters MPI_Win_fence while a
 * second thread waits for a message from the right rank and answers it;
 * the right rank sends that message only after a pause (so the waiter is
 * asleep by then), waits for the answer, and only then enters its fence.
 * If the waiter's completion were left until the fence returns, both
 * ranks would wait forever (the watchdog fails the test).
 *
 * Even rounds wait with MPI_Recv (asleep in a shim wait), odd rounds with
 * a loop of MPI_Test (which polls by itself). Checks each message's value,
 * source and tag. Ranks without a partner only fence. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

enum { ROUNDS = 16, PAUSE_MS = 20, TAG_ASK = 1, TAG_ANSWER = 2 };

static int partner, round_no;

static void *waiter(void *arg)
{
    (void)arg;
    int v = -1;
    MPI_Status st;
    MPI_Request r;
    if (round_no % 2 == 0) {
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, partner, TAG_ASK, MPI_COMM_WORLD, &st));
    } else {
        CHECK_MPI(MPI_Irecv(&v, 1, MPI_INT, partner, TAG_ASK, MPI_COMM_WORLD, &r));
        for (int done = 0; !done;)
            CHECK_MPI(MPI_Test(&r, &done, &st));
    }
    CHECK(v == round_no && st.MPI_SOURCE == partner && st.MPI_TAG == TAG_ASK,
          "round %d: got %d from %d, tag %d; %d from %d, tag %d was sent", round_no, v, st.MPI_SOURCE,
          st.MPI_TAG, round_no, partner, TAG_ASK);
    int answer = 1000 + round_no;
    CHECK_MPI(MPI_Send(&answer, 1, MPI_INT, partner, TAG_ANSWER, MPI_COMM_WORLD));
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_skip_below_multiple(provided, "mt_host_call_beside");
    test_watchdog("mt_host_call_beside", 60);
    int me, np;
    test_rank_size(MPI_COMM_WORLD, &me, &np);
    int left = me % 2 == 0 && me + 1 < np, right = me % 2 == 1;
    partner = left ? me + 1 : me - 1;

    int cell = 0;
    MPI_Win win;
    CHECK_MPI(MPI_Win_create(&cell, sizeof cell, sizeof cell, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (round_no = 0; round_no < ROUNDS; round_no++) {
        test_step = "a round";
        if (left) {
            pthread_t t;
            CHECK(pthread_create(&t, NULL, waiter, NULL) == 0, "pthread_create");
            CHECK_MPI(MPI_Win_fence(0, win));
            pthread_join(t, NULL);
        } else if (right) {
            test_sleep_ms(PAUSE_MS);
            int answer = -1;
            MPI_Status st;
            CHECK_MPI(MPI_Send(&round_no, 1, MPI_INT, partner, TAG_ASK, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(&answer, 1, MPI_INT, partner, TAG_ANSWER, MPI_COMM_WORLD, &st));
            CHECK(answer == 1000 + round_no && st.MPI_SOURCE == partner && st.MPI_TAG == TAG_ANSWER,
                  "round %d: the answer was %d from %d, tag %d; %d from %d, tag %d was sent", round_no, answer,
                  st.MPI_SOURCE, st.MPI_TAG, 1000 + round_no, partner, TAG_ANSWER);
            CHECK_MPI(MPI_Win_fence(0, win));
        } else {
            CHECK_MPI(MPI_Win_fence(0, win));
        }
    }
    test_step = "MPI_Win_free";
    CHECK_MPI(MPI_Win_free(&win));
    test_watchdog("mt_host_call_beside", 0);
    test_finish("mt_host_call_beside");
    return 0;
}

/* Collective file I/O, split collectives included, beside an open lane.
 *
 * While a lane is open (MPISHIM_FABRIC), a helper thread reads the lanes
 * whenever a thread sits in a host call that waits for other processes,
 * collective file I/O among them. It used to poll the host's side of each
 * lane too, and so entered the host's progress engine from a second thread
 * while the program's one thread was inside MPI_File_read_all_end: Open MPI
 * 4.1's ompio walks its list of pending file requests in that engine without
 * a lock, and a single-threaded program (mpi4py's test_io) died of SIGSEGV
 * in about one run in three.
 *
 * A progress thread (MPISHIM_PROGRESS=thread, offload) did the same with
 * or without a lane: it polled the host for a receive the program had
 * pending, or poked the host's progress for a lane, while the program's one
 * thread was inside a file call (SIGSEGV or abort in most runs at 2 and 3
 * processes). Such a call moves the host itself; the progress thread now
 * leaves the host alone while one runs.
 *
 * Each rank owns a block of a shared file and keeps a receive pending
 * throughout (from the next rank, satisfied at the end). Every round it
 * writes its block with MPI_File_write_at_all or the split
 * MPI_File_write_all_begin/end, reads it back with MPI_File_read_at_all,
 * MPI_File_read_at_all_begin/end and MPI_File_read_all_begin/end, writes
 * and reads it with MPI_File_iwrite_at and MPI_File_iread_at completed by
 * MPI_Wait, MPI_Test and MPI_Waitall, and checks every byte and the count
 * in each status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { BLK = 2048, ROUNDS = 200 };

static void fill(unsigned char *b, int rank, int round)
{
    for (int i = 0; i < BLK; i++)
        b[i] = (unsigned char)(rank * 31 + round * 7 + i);
}

static void check(const unsigned char *got, const MPI_Status *st, int rank, int round, const char *how)
{
    unsigned char want[BLK];
    fill(want, rank, round);
    int n = -1;
    CHECK_MPI(MPI_Get_count(st, MPI_BYTE, &n));
    CHECK(n == BLK, "round %d, %s: the status counts %d bytes, %d were read", round, how, n, BLK);
    for (int i = 0; i < BLK; i++)
        CHECK(got[i] == want[i], "round %d, %s: byte %d is %u, %u was written", round, how, i, got[i], want[i]);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_watchdog("io_split", 120);
    int me, np;
    test_rank_size(MPI_COMM_WORLD, &me, &np);

    char path[TEST_PATH_BYTES];
    MPI_File fh = test_open_job_file("io_split", path);
    MPI_Offset at = (MPI_Offset)me * BLK;
    unsigned char out[BLK], in[BLK];
    MPI_Status st;
    /* A receive pending through every round: the shim tracks it, and its
     * progress thread (MPISHIM_PROGRESS=thread) polls the host for it. */
    int from = (me + 1) % np, to = (me + np - 1) % np, token = -1;
    MPI_Request pending;
    CHECK_MPI(MPI_Irecv(&token, 1, MPI_INT, from, 77, MPI_COMM_WORLD, &pending));
    for (int round = 0; round < ROUNDS; round++) {
        fill(out, me, round);
        test_step = "write";
        if (round % 2) {
            CHECK_MPI(MPI_File_seek(fh, at, MPI_SEEK_SET));
            CHECK_MPI(MPI_File_write_all_begin(fh, out, BLK, MPI_BYTE));
            CHECK_MPI(MPI_File_write_all_end(fh, out, &st));
        } else {
            CHECK_MPI(MPI_File_write_at_all(fh, at, out, BLK, MPI_BYTE, &st));
        }
        CHECK_MPI(MPI_File_sync(fh));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_File_sync(fh));

        test_step = "MPI_File_read_at_all";
        memset(in, 0, sizeof in);
        CHECK_MPI(MPI_File_read_at_all(fh, at, in, BLK, MPI_BYTE, &st));
        check(in, &st, me, round, "read_at_all");

        test_step = "MPI_File_read_at_all_begin/end";
        memset(in, 0, sizeof in);
        CHECK_MPI(MPI_File_read_at_all_begin(fh, at, in, BLK, MPI_BYTE));
        CHECK_MPI(MPI_File_read_at_all_end(fh, in, &st));
        check(in, &st, me, round, "read_at_all_begin/end");

        /* Nonblocking independent I/O: requests the shim did not make,
         * completed by MPI_Wait, a loop of MPI_Test and MPI_Waitall. */
        test_step = "MPI_File_iwrite_at + MPI_Wait";
        MPI_Request fr;
        CHECK_MPI(MPI_File_iwrite_at(fh, at, out, BLK, MPI_BYTE, &fr));
        CHECK_MPI(MPI_Wait(&fr, &st));
        CHECK(fr == MPI_REQUEST_NULL, "round %d: MPI_Wait left the file request active", round);

        test_step = "MPI_File_iread_at + MPI_Test";
        memset(in, 0, sizeof in);
        CHECK_MPI(MPI_File_iread_at(fh, at, in, BLK, MPI_BYTE, &fr));
        for (int done = 0; !done;)
            CHECK_MPI(MPI_Test(&fr, &done, &st));
        check(in, &st, me, round, "iread_at + test");

        test_step = "MPI_File_iread_at + MPI_Waitall";
        memset(in, 0, sizeof in);
        CHECK_MPI(MPI_File_iread_at(fh, at, in, BLK, MPI_BYTE, &fr));
        CHECK_MPI(MPI_Waitall(1, &fr, &st));
        check(in, &st, me, round, "iread_at + waitall");

        test_step = "MPI_File_read_all_begin/end";
        memset(in, 0, sizeof in);
        CHECK_MPI(MPI_File_seek(fh, at, MPI_SEEK_SET));
        CHECK_MPI(MPI_File_read_all_begin(fh, in, BLK, MPI_BYTE));
        CHECK_MPI(MPI_File_read_all_end(fh, in, &st));
        check(in, &st, me, round, "read_all_begin/end");
    }
    test_step = "the pending receive";
    int mine = 1000 + me;
    CHECK_MPI(MPI_Send(&mine, 1, MPI_INT, to, 77, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Wait(&pending, &st));
    CHECK(token == 1000 + from && st.MPI_SOURCE == from && st.MPI_TAG == 77,
          "the pending receive got %d from %d, tag %d; %d from %d, tag 77 was sent", token, st.MPI_SOURCE, st.MPI_TAG,
          1000 + from, from);
    test_step = "MPI_File_close";
    CHECK_MPI(MPI_File_close(&fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        CHECK_MPI(MPI_File_delete(path, MPI_INFO_NULL));
    test_watchdog("io_split", 0);
    test_finish("io_split");
    return 0;
}

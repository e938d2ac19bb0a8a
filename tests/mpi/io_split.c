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
 * Each rank owns a block of a shared file. Every round it writes its block
 * with MPI_File_write_at_all or the split MPI_File_write_all_begin/end,
 * reads it back with MPI_File_read_at_all, MPI_File_read_at_all_begin/end
 * and MPI_File_read_all_begin/end, and checks every byte and the count in
 * each status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

enum { BLK = 2048, ROUNDS = 300 };

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

    char path[256] = "";
    if (me == 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/mpishim-io_split-%ld", dir && *dir ? dir : "/tmp", (long)getpid());
    }
    CHECK_MPI(MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD));

    test_step = "MPI_File_open";
    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_Offset at = (MPI_Offset)me * BLK;
    unsigned char out[BLK], in[BLK];
    MPI_Status st;
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

        test_step = "MPI_File_read_all_begin/end";
        memset(in, 0, sizeof in);
        CHECK_MPI(MPI_File_seek(fh, at, MPI_SEEK_SET));
        CHECK_MPI(MPI_File_read_all_begin(fh, in, BLK, MPI_BYTE));
        CHECK_MPI(MPI_File_read_all_end(fh, in, &st));
        check(in, &st, me, round, "read_all_begin/end");
    }
    test_step = "MPI_File_close";
    CHECK_MPI(MPI_File_close(&fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        CHECK_MPI(MPI_File_delete(path, MPI_INFO_NULL));
    test_watchdog("io_split", 0);
    test_finish("io_split");
    return 0;
}

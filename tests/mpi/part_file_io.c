/* Collective file I/O while a partitioned receive waits for its header.
 *
 * While a partitioned receive waits for its header and a thread sits in a
 * host call that waits for other processes, the shim's helper thread runs
 * the partitioned sweep, which enters the host. On Open MPI 4.1 a file call
 * does not bear that: its ompio walks the pending file requests in the
 * host's progress engine without a lock, and this program, single-threaded,
 * died of SIGSEGV in MPI_File_read_all_end in 3 runs of 8 under
 * MPISHIM_PROGRESS=thread. There the helper leaves the sweep out during file
 * calls.
 *
 * Pairs of ranks (0-1, 2-3, ...; an odd last rank only does the file
 * I/O): each round the even rank starts its partitioned receive, every
 * rank writes its block of one file collectively and reads it with split
 * collectives, then the odd rank starts its send and marks every partition
 * ready; the even rank checks the data. After the last round each rank
 * checks every byte of its block. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "mpishim.h"

enum { BLK = 2048, ROUNDS = 100, CALLS = 5, PARTS = 4, TAG = 5 };

static void fill(unsigned char *b, int rank, int round)
{
    for (int i = 0; i < BLK; i++)
        b[i] = (unsigned char)(rank * 13 + round * 5 + i);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_skip_without_partitioned("part_file_io");
    test_watchdog("part_file_io", 120);
    int me, np;
    test_rank_size(MPI_COMM_WORLD, &me, &np);
    int recv_side = me % 2 == 0 && me + 1 < np, send_side = me % 2 == 1;
    int peer = recv_side ? me + 1 : me - 1;

    char path[TEST_PATH_BYTES];
    MPI_File fh = test_open_job_file("part_file_io", path);

    int pbuf[PARTS];
    MPI_Request pr = MPI_REQUEST_NULL;
    if (recv_side)
        CHECK_MPI(MPI_Precv_init(pbuf, PARTS, 1, MPI_INT, peer, TAG, MPI_COMM_WORLD, MPI_INFO_NULL, &pr));
    else if (send_side)
        CHECK_MPI(MPI_Psend_init(pbuf, PARTS, 1, MPI_INT, peer, TAG, MPI_COMM_WORLD, MPI_INFO_NULL, &pr));

    MPI_Offset at = (MPI_Offset)me * BLK;
    unsigned char out[BLK], in[BLK], want[BLK];
    MPI_Status st;
    for (int round = 0; round < ROUNDS; round++) {
        if (recv_side) {
            test_step = "MPI_Start (receive)";
            CHECK_MPI(MPI_Start(&pr));
        }
        fill(out, me, round);
        for (int k = 0; k < CALLS; k++) {
            test_step = "MPI_File_write_at_all";
            CHECK_MPI(MPI_File_write_at_all(fh, at, out, BLK, MPI_BYTE, &st));
            /* Read back without the sync and barrier that MPI's consistency
             * rule asks for (which made the failure rare): the bytes are
             * checked once, after the last round. */
            test_step = "MPI_File_read_all_begin/end";
            CHECK_MPI(MPI_File_seek(fh, at, MPI_SEEK_SET));
            CHECK_MPI(MPI_File_read_all_begin(fh, in, BLK, MPI_BYTE));
            CHECK_MPI(MPI_File_read_all_end(fh, in, &st));
        }
        if (send_side) {
            test_step = "MPI_Start, MPI_Pready_range (send)";
            for (int i = 0; i < PARTS; i++)
                pbuf[i] = round * 100 + i;
            CHECK_MPI(MPI_Start(&pr));
            CHECK_MPI(MPI_Pready_range(0, PARTS - 1, pr));
        }
        if (pr != MPI_REQUEST_NULL) {
            test_step = "MPI_Wait (partitioned)";
            CHECK_MPI(MPI_Wait(&pr, &st));
        }
        if (recv_side)
            for (int i = 0; i < PARTS; i++)
                CHECK(pbuf[i] == round * 100 + i, "round %d: partition %d holds %d, %d was sent", round, i, pbuf[i],
                      round * 100 + i);
    }
    if (pr != MPI_REQUEST_NULL)
        CHECK_MPI(MPI_Request_free(&pr));
    test_step = "the last block read back";
    CHECK_MPI(MPI_File_sync(fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_File_sync(fh));
    memset(in, 0, sizeof in);
    CHECK_MPI(MPI_File_read_at_all(fh, at, in, BLK, MPI_BYTE, &st));
    fill(want, me, ROUNDS - 1);
    CHECK(memcmp(in, want, BLK) == 0, "the block read back differs from the one last written");
    test_step = "MPI_File_close";
    CHECK_MPI(MPI_File_close(&fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        CHECK_MPI(MPI_File_delete(path, MPI_INFO_NULL));
    test_watchdog("part_file_io", 0);
    test_finish("part_file_io");
    return 0;
}

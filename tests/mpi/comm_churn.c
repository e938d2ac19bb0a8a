/* comm_churn: many MPI_Comm_dup + MPI_Comm_free cycles, then dup +
 * MPI_Comm_disconnect cycles, keep the shim's side tables bounded (issue
 * 13): their size is read from mpishim_table_bytes() (looked up with dlsym,
 * so the program runs raw too) after a warm-up and must not grow with the
 * number of cycles. A communicator made in between still works. Then an
 * MPI_Comm_idup that rank 0 completes only after a blocking constructor (on
 * another communicator: Open MPI 4.1 hangs raw in one on the idup's own
 * parent), while the others wait for it first: its completion may need
 * nothing but the host's progress inside that constructor (the shim must
 * not add a step to it that only a sweeping call moves on). */
#include "testutil.h"

/* Cycles at 2 ranks: 4000 are dozens of table rebuilds past the warm-up
 * (the table that kept its tombstones grew from 16 KB to 524 KB over 20000
 * cycles, doubling as it went: far past 2x within 4000) and fit the runner's timeout under AddressSanitizer on a loaded 2-core
 * machine. Above 2 ranks a dup costs MPICH about 30 ms here
 * (oversubscribed), so fewer. */
static int warmup = 500, free_cycles = 4000, disconnect_cycles = 400;

static size_t (*table_bytes)(void);

static size_t bytes_now(void) { return table_bytes ? table_bytes() : 0; }

/* One communicator made from world, used once, then released by how. */
static void cycle(int disconnect, int use)
{
    MPI_Comm c;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    if (use) {
        int one = 1, sum = 0, size = 0;
        CHECK_MPI(MPI_Comm_size(c, &size));
        CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c));
        CHECK(sum == size, "allreduce on a fresh duplicate gave %d, expected %d", sum, size);
    }
    if (disconnect)
        CHECK_MPI(MPI_Comm_disconnect(&c));
    else
        CHECK_MPI(MPI_Comm_free(&c));
    CHECK(c == MPI_COMM_NULL, "the handle is not MPI_COMM_NULL after release");
}

static void run(const char *what, int disconnect, int n)
{
    for (int i = 0; i < warmup; i++)
        cycle(disconnect, 0);
    size_t base = bytes_now(), max = base;
    for (int i = 0; i < n; i++) {
        cycle(disconnect, i % 1000 == 0);
        size_t b = bytes_now();
        if (b > max)
            max = b;
    }
    /* A rebuild may briefly hold the old table too (grace period), never
     * an amount that grows with the cycles. */
    CHECK(max <= 2 * base, "%s: side tables grew from %zu to %zu bytes over %d cycles", what, base, max, n);
}

static void idup_beside_blocking(void)
{
    int rank = 0, size = 0, same = MPI_UNEQUAL;
    MPI_Comm o, c, d;
    MPI_Request r;
    test_step = "idup beside a blocking constructor";
    test_watchdog("comm_churn", 30);
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &o));
    CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &c, &r));
    if (rank == 0)
        CHECK_MPI(MPI_Comm_dup(o, &d));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    if (rank != 0)
        CHECK_MPI(MPI_Comm_dup(o, &d));
    CHECK(r == MPI_REQUEST_NULL, "MPI_Wait left the idup's request");
    CHECK_MPI(MPI_Comm_compare(c, MPI_COMM_WORLD, &same));
    CHECK(same == MPI_CONGRUENT, "the idup's communicator compares %d to its parent", same);
    CHECK_MPI(MPI_Comm_size(c, &size));
    int one = 1, sum = 0;
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK(sum == size, "allreduce on the idup's communicator gave %d, expected %d", sum, size);
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK_MPI(MPI_Comm_free(&d));
    CHECK_MPI(MPI_Comm_free(&o));
    test_watchdog("comm_churn", 0);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    int size = 0;
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (size > 2) {
        warmup = 64;
        free_cycles = 256;
        disconnect_cycles = 64;
    }
    void *sym = dlsym(RTLD_DEFAULT, "mpishim_table_bytes");
    if (sym)
        memcpy(&table_bytes, &sym, sizeof table_bytes);
    run("dup/free", 0, free_cycles);
    run("dup/disconnect", 1, disconnect_cycles);
    idup_beside_blocking();
    test_finish("comm_churn");
    return 0;
}

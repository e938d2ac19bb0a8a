/* The transports a VCI can open (see transport.h). */
#include <string.h>

#include "mpishim.h"

#include "transport/lane.h"
#include "transport/transport.h"

/* Each transport's open function, defined in its own file. */
msh_tp *msh_tp_host_open(int idx, const char **why);
msh_tp *msh_tp_fabric_open(int idx, const char **why);
msh_tp *msh_tp_ucx_open(int idx, const char **why);

int msh_tp_direct = 1;
MSH_TLS int msh_tp_lanes_only;
MSH_TLS int msh_tp_exhaustive;

static const struct {
    const char *name;
    msh_tp *(*open)(int idx, const char **why);
} transports[] = {
    { "host", msh_tp_host_open },
    { "fabric", msh_tp_fabric_open },
    { "ucx", msh_tp_ucx_open },
};

msh_tp *msh_tp_open(const char *name, int idx, const char **why)
{
    for (size_t i = 0; i < sizeof transports / sizeof transports[0]; i++)
        if (strcmp(name, transports[i].name) == 0)
            return transports[i].open(idx, why);
    *why = "no such transport";
    return NULL;
}

int msh_tp_comm_add(MPI_Comm c, int inter, int no_any_tag)
{
    return msh_tp_direct ? MPI_SUCCESS : msh_lane_comm_add(c, inter, no_any_tag);
}

void msh_tp_comm_remove(MPI_Comm c)
{
    if (!msh_tp_direct)
        msh_lane_comm_remove(c);
}

int msh_tp_comm_home(MPI_Comm c, int n)
{
    return msh_tp_direct ? -1 : msh_lane_comm_home(c, n);
}

const void *msh_tp_comm_record(MPI_Comm c)
{
    return msh_tp_direct ? NULL : msh_lane_comm_of(c);
}

int msh_tp_comm_reclaim_begin(void)
{
    return !msh_tp_direct && msh_lane_reclaim_begin();
}

void msh_tp_comm_reclaim_end(int all)
{
    msh_lane_reclaim_end(all);
}

const char *msh_tp_fabric_provider(void)
{
    return msh_lane_provider();
}

/* Here, not in core: a lane's entries are side-table memory too. */
MSH_EXPORT size_t mpishim_table_bytes(void)
{
    return msh_htab_bytes_total() + msh_lane_entry_bytes();
}

MSH_EXPORT const char *mpishim_lane(void)
{
    return msh_tp_direct ? NULL : msh_lane_provider();
}

int msh_tp_message_vci(MPI_Message m)
{
    int vci, slot;
    return !msh_tp_direct && msh_lane_msg_dec(m, &vci, &slot) ? vci : -1;
}

/* Open MPI's Fortran handles for a lane's messages: msh_fint_of_code of
 * the message's VCI and slot, as the shim's requests have. */
#define MSG_CODES ((long long)MSH_MAX_VCIS << MSH_LANE_MSG_SLOT_BITS)
int msh_tp_message_c2f(MPI_Message m, MPI_Fint *f)
{
    int vci, slot;
    if (msh_tp_direct || !msh_lane_msg_dec(m, &vci, &slot))
        return 0;
    *f = (MPI_Fint)msh_fint_of_code((long long)vci << MSH_LANE_MSG_SLOT_BITS | slot);
    return 1;
}

int msh_tp_message_f2c(MPI_Fint f, MPI_Message *m)
{
    long long code = msh_code_of_fint(f);
    if (msh_tp_direct || code < 0 || code >= MSG_CODES)
        return 0;
    *m = msh_lane_msg_enc((int)(code >> MSH_LANE_MSG_SLOT_BITS),
                          (int)(code & ((1 << MSH_LANE_MSG_SLOT_BITS) - 1)));
    return 1;
}

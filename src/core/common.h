/* Small definitions shared by every layer. */
#ifndef MSH_CORE_COMMON_H
#define MSH_CORE_COMMON_H

/* The library is built with -fvisibility=hidden so that its internals can
 * neither clash with nor be interposed by the application's symbols; only
 * the MPI entry points and the public mpishim_* API are exported. */
#define MSH_EXPORT __attribute__((visibility("default")))

/* Thread-locals on hot paths: the library is preloaded or linked, so the
 * static TLS model applies and an access is one instruction, not a call to
 * __tls_get_addr. */
#define MSH_TLS _Thread_local __attribute__((tls_model("initial-exec")))

#define MSH_LIKELY(x)   __builtin_expect(!!(x), 1)
#define MSH_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Slow paths out of line, so that a fast path needs no stack frame and can
 * end in a tail call to the host. */
#define MSH_NOINLINE __attribute__((noinline, cold))
/* A step of a per-message path that GCC would call: inline, so that the
 * path pays no call, prologue or epilogue per step. */
#define MSH_INLINE static inline __attribute__((always_inline))

#define MSH_CACHELINE 64

/* Fortran handles of the shim's own handles (requests, a lane's matched
 * messages) where the host's are small non-negative indices (Open MPI):
 * code c is -c - 2, below anything the host gives; msh_code_of_fint is -1
 * for a handle that is not the shim's. */
static inline int msh_fint_of_code(long long code) { return (int)(-code - 2); }
static inline long long msh_code_of_fint(int f) { return f >= -1 ? -1 : -(long long)f - 2; }

/* memset(p, 0, n) for a request or record zeroed once per message. GCC
 * expands a constant memset above about 80 bytes into `rep stos`, whose
 * start-up costs tens of cycles and whose stores the loads that follow
 * (the fields just zeroed, read back at once) wait for; pieces of at most
 * 64 bytes become a few vector stores instead. */
static inline void msh_zero(void *p, __SIZE_TYPE__ n)
{
    unsigned char *c = (unsigned char *)p;
    for (; n >= 64; n -= 64, c += 64)
        __builtin_memset(c, 0, 64);
    __builtin_memset(c, 0, n);
}

#endif

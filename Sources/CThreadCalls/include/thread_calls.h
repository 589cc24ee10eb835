/* The calling thread's library calls (ThreadCalls,
 * Sources/AppNorthC/ThreadCalls.swift): the nesting of exported-function bodies and of host
 * callbacks, and the handles those bodies entered. Every exported call
 * reads it, so it is a C thread-local read through a static inline
 * accessor (about 12 instructions) rather than a pthread key behind a lazy
 * Swift global (about 45): callgrind counts 2,489 instructions per
 * appnorth_events_track() before, 2,396 after (bench/profile_track.py).
 *
 * TLS model: a dynamic one, stated here (tls_model) so that no flag turns
 * it into initial-exec. libappnorth.so is often dlopen()ed (Python's ctypes,
 * test_dlclose, engines' plugins), and an initial-exec variable of a
 * dlopen()ed library must fit in the static TLS surplus glibc reserves at
 * start-up ("cannot allocate memory in static TLS block" when it does not).
 * Asked for as global-dynamic, the compiler narrows it to local-dynamic
 * for this hidden symbol (readelf -r shows one R_X86_64_DTPMOD64, no
 * TPOFF; no STATIC_TLS flag): one __tls_get_addr call (its fast path, a
 * few loads) per read, valid however the library is loaded. TLSDESC
 * (-mtls-dialect=gnu2) is not used: in a dlopen()ed library it goes
 * through glibc's _dl_tlsdesc_dynamic, whose x86_64 slow path did not keep
 * every register the TLSDESC convention promises until glibc 2.40 (2024),
 * and our floor is glibc 2.31 (docs/platforms.md). */
#ifndef APPNORTH_THREAD_CALLS_H
#define APPNORTH_THREAD_CALLS_H

typedef struct appnorth_thread_calls {
    /* Nesting of exported-function bodies (host callbacks may call in). */
    long scopes;
    /* Nesting of host callbacks the library is running on this thread. */
    long in_callback;
    /* Holds of the callback gate this thread made (appnorth_callbacks_hold)
     * and has not resumed: its own callbacks pass a held gate. */
    long holding;
    /* Handles entered (innermost last) and the room for them. */
    long count;
    long capacity;
    const void **entered;
} appnorth_thread_calls;

/* One definition, in thread_calls.c; zero in every new thread. Hidden: no
 * other module reads it (scripts/exports.map exports appnorth_* functions
 * only anyway). */
extern __thread appnorth_thread_calls appnorth_thread_calls_record
    __attribute__((tls_model("global-dynamic"), visibility("hidden")));

/* This thread's record. Never NULL. */
static inline appnorth_thread_calls *appnorth_thread_calls_current(void) {
    return &appnorth_thread_calls_record;
}

/* Makes room for at least one more handle in `calls->entered` (8, then
 * doubling), and registers the thread-exit clean-up that frees it. Returns
 * 0, or -1 when there is no memory or no thread key left: the caller then
 * does not count its call (Handle.admit). */
__attribute__((visibility("hidden")))
int appnorth_thread_calls_grow(appnorth_thread_calls *calls);

#endif

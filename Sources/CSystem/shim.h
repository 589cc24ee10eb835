/* Linux system interfaces that Glibc's Swift module does not expose.
 * No feature macro (_GNU_SOURCE, _XOPEN_SOURCE) is defined here: it would
 * give this module other definitions of the system types than SwiftGlibc's
 * (fd_set's fds_bits against __fds_bits), which a clean build of a package
 * importing both refuses. GNU extensions are declared below instead. */
#include <sys/random.h>
#include <time.h>

/* strptime is declared only under _XOPEN_SOURCE; declare it here. */
extern char *strptime(const char *s, const char *format, struct tm *tm);

/* A small number for the calling thread, handed out round-robin the first
 * time the thread asks (the event journal's stripe: threads that track at
 * once write to different files). Thread-local, so it costs no lock and no
 * shared write after the first call. */
static inline unsigned appnorth_thread_slot(void) {
    static unsigned next;
    static __thread unsigned mine; /* the slot + 1; 0 until the first call */
    unsigned slot = mine;
    if (slot == 0) {
        slot = __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
        if (slot == 0) slot = 1;  /* wrapped after 4 billion threads */
        mine = slot;
    }
    return slot - 1;
}

#include <stdint.h>

/* Atomic access to a word in a MAP_SHARED mapping, which another process
   writes too (Swift's Atomic cannot be placed on memory it did not make). */
static inline uint64_t appnorth_shared_load(const uint64_t *word) {
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

static inline uint64_t appnorth_shared_increment(uint64_t *word) {
    return __atomic_add_fetch(word, 1, __ATOMIC_SEQ_CST);
}

/* Sequentially consistent, for the upload slots of consent.watch
   (ConsentWatch): an attempt stores its slot then loads the revocation
   counter; a revocation moves the counter then loads the slots. */
static inline uint64_t appnorth_shared_load_seq_cst(const uint64_t *word) {
    return __atomic_load_n(word, __ATOMIC_SEQ_CST);
}

static inline void appnorth_shared_store_seq_cst(uint64_t *word, uint64_t value) {
    __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
}

static inline _Bool appnorth_shared_compare_exchange(uint64_t *word, uint64_t expected, uint64_t desired) {
    return __atomic_compare_exchange_n(word, &expected, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/* eventfd: Platform/WakeDescriptor.swift (the dispatch descriptor, the transfer engine). */
#include <sys/eventfd.h>

/* Names the calling thread (at most 15 bytes are kept), as /proc/<pid>/task/
 * <tid>/comm, top and gdb show it. prctl is variadic: Swift cannot call it. */
#include <sys/prctl.h>
static inline void appnorth_set_thread_name(const char *name) {
    (void)prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

/* Marks the shared object that holds `address` as never to be unloaded
 * (dlopen RTLD_NOLOAD | RTLD_NODELETE of its own file): a host's dlclose()
 * then leaves it mapped while its threads run. Returns 1 when done. */
#include <dlfcn.h>
/* glibc's Dl_info and dladdr(), declared only under _GNU_SOURCE (see above). */
typedef struct {
    const char *dli_fname;
    void *dli_fbase;
    const char *dli_sname;
    void *dli_saddr;
} appnorth_dl_info;
extern int dladdr(const void *address, appnorth_dl_info *info);
static inline int appnorth_pin_library(const void *address) {
    appnorth_dl_info info;
    if (dladdr(address, &info) == 0 || info.dli_fname == NULL) return 0;
    return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) != NULL;
}

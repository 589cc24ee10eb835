/* Linux system interfaces that Glibc's Swift module does not expose. */
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
    return __atomic_add_fetch(word, 1, __ATOMIC_ACQ_REL);
}

/* eventfd: the dispatch mode's descriptor (CallbackDispatcher). */
#include <sys/eventfd.h>

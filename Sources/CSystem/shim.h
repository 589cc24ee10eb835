/* Linux system interfaces that Glibc's Swift module does not expose. */
#include <sys/random.h>
#include <time.h>

/* strptime is declared only under _XOPEN_SOURCE; declare it here. */
extern char *strptime(const char *s, const char *format, struct tm *tm);

#include <stdint.h>

/* Atomic access to a word in a MAP_SHARED mapping, which another process
   writes too (Swift's Atomic cannot be placed on memory it did not make). */
static inline uint64_t appnorth_shared_load(const uint64_t *word) {
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

static inline uint64_t appnorth_shared_increment(uint64_t *word) {
    return __atomic_add_fetch(word, 1, __ATOMIC_ACQ_REL);
}

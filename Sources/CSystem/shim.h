/* Linux system interfaces that Glibc's Swift module does not expose. */
#include <sys/random.h>
#include <time.h>

/* strptime is declared only under _XOPEN_SOURCE; declare it here. */
extern char *strptime(const char *s, const char *format, struct tm *tm);

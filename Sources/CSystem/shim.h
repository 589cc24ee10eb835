/* Linux system headers that Glibc's Swift module does not include. */
#include <sys/random.h>

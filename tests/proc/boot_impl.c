/* The bootstrap compiled into proc/boot_check on its own, without the rest of libcor, so
 * that cor-run and the bootstrap protocol can be tested in isolation. It reads its variables
 * through the core's knob table (knobs.c), whose messages go through cor__log: here, plain
 * stderr. */
#include <stdarg.h>

#include "boot.c"
#include "bootstrap.c"
#ifdef COR_HAVE_PMIX
#include "boot_pmix.c"
#endif
#include "knobs.c"

void cor__log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cor: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

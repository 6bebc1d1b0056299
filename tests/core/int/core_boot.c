/* The core's boot.c compiled into an internal test program (reaches cor__* symbols). */
#include "boot.c"
#ifdef COR_HAVE_PMIX
#include "boot_pmix.c"
#endif

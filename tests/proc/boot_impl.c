/* The bootstrap compiled into proc/boot_check on its own, without the rest of libcor, so
 * that cor-run and the bootstrap protocol can be tested in isolation. */
#include "boot.c"
#include "bootstrap.c"
#ifdef COR_HAVE_PMIX
#include "boot_pmix.c"
#endif

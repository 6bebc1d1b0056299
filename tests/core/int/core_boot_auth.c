/* The core's boot_auth.c compiled into an internal test program. */
#include "boot_auth.c"

/* The core's bootline.c compiled into an internal test program. */
#include "bootline.c"

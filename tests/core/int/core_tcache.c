/* The core's tcache.c compiled into an internal test program (reaches cor__* symbols). */
#include "tcache.c"

/* The core's counters.c compiled into an internal test program (reaches cor__* symbols). */
#include "counters.c"

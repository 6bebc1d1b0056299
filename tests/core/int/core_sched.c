/* The core's sched.c compiled into an internal test program (reaches cor__* symbols). */
#include "sched.c"

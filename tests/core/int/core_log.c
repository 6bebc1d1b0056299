/* The core's log.c compiled into an internal test program (reaches cor__* symbols). */
#include "log.c"

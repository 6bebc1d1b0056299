/* The core's progress.c compiled into an internal test program (reaches cor__* symbols). */
#include "progress.c"

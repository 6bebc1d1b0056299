/* The core's raw.c compiled into an internal test program (reaches cor__* symbols). */
#include "raw.c"

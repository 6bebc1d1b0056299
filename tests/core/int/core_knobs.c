/* The core's knobs.c compiled into an internal test program (reaches cor__* symbols). */
#include "knobs.c"

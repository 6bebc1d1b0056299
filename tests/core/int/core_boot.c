/* The core's boot.c compiled into an internal test program (reaches cor__* symbols). */
#include "boot.c"

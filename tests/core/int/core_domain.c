/* The core's domain.c compiled into an internal test program (reaches cor__* symbols). */
#include "domain.c"

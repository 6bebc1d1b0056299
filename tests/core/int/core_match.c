/* The core's match.c compiled into an internal test program (reaches cor__* symbols). */
#include "match.c"

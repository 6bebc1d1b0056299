/* The core's idp.c compiled into an internal test program (reaches cor__* symbols). */
#include "idp.c"

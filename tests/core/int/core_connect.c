/* The core's connect.c compiled into an internal test program (reaches cor__* symbols). */
#include "connect.c"

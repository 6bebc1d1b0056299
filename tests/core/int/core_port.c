/* The core's port.c compiled into an internal test program (reaches cor__* symbols). */
#include "port.c"

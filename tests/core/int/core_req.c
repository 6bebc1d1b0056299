/* The core's req.c compiled into an internal test program (reaches cor__* symbols). */
#include "req.c"

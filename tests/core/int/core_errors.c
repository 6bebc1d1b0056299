/* The core's errors.c compiled into an internal test program (reaches cor__* symbols). */
#include "errors.c"

/* The core's hport.c compiled into an internal test program (reaches cor__* symbols). */
#include "hport.c"

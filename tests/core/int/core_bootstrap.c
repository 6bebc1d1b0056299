/* The core's bootstrap.c compiled into an internal test program (reaches cor__* symbols). */
#include "bootstrap.c"

/* The core's resources.c compiled into an internal test program (reaches cor__* symbols). */
#include "resources.c"

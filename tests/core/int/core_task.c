/* The core's task.c compiled into an internal test program (reaches cor__* symbols). */
#include "task.c"

/* The core's buffer.c compiled into an internal test program (reaches cor__* symbols). */
#include "buffer.c"

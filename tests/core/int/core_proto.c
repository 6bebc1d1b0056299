/* The core's proto.c compiled into an internal test program (reaches cor__* symbols). */
#include "proto.c"

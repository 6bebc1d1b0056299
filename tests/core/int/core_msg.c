/* The core's msg.c compiled into an internal test program (reaches cor__* symbols). */
#include "msg.c"

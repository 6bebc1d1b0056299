/* The core's loader.c compiled into an internal test program (reaches cor__* symbols). */
#ifndef COR_PLUGINDIR
#define COR_PLUGINDIR "/nonexistent"
#endif
#include "loader.c"

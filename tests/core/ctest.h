/* Moved: the CUnit helpers are tests/ctest.h. Kept until no suite includes this name. */
#include "../ctest.h"

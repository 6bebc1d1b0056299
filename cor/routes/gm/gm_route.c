/* CoRgmRoute: being written (issue 4). */
#include "route.h"

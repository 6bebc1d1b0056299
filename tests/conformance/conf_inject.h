/* Feeds foreign data to a hard port of route `route` at `addr` (see conf_inject.c). */
#ifndef CONF_INJECT_H
#define CONF_INJECT_H

#include <stdint.h>

/* Returns how many foreign messages were sent (each must be dropped and counted), or -1 when
 * this build cannot inject into that route. `cookie` is the session's (a stray sender may know
 * it). */
/* `pump(arg)` is called while the injector waits for its sends to complete (the target's
 * route must make progress for GM to complete a send); NULL for none. */
int conf_inject(const char *route, const char *addr, uint64_t cookie, void (*pump)(void *),
                void *arg);

#endif

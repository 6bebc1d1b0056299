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

/* The gm route's control messages, sent from GM port `as_port` (taken while the test runs:
 * a rank's earlier port) to the port at `to_addr`: each is {op, arg, sender incarnation,
 * receiver incarnation} after the session cookie (the layout in cor/routes/gm/gm_ctrl.h).
 * conf_gm_ctrl_open returns NULL when this build has no libgm or the port id is taken. */
struct conf_gm_ctrl;
struct conf_gm_ctrl *conf_gm_ctrl_open(unsigned as_port);
/* 0 once all n were taken by the target (pump runs meanwhile), -1 otherwise. */
int conf_gm_ctrl_send(struct conf_gm_ctrl *c, const char *to_addr, uint64_t cookie,
                      const uint32_t (*msgs)[4], int n, void (*pump)(void *), void *arg);
/* Data frames from that port, in the large class: each {credits returned (small | large <<
 * 16), sender incarnation, receiver incarnation}, then 64 bytes of a core frame; n <= 4. */
int conf_gm_data_send(struct conf_gm_ctrl *c, const char *to_addr, uint64_t cookie,
                      const uint32_t (*frames)[3], int n, void (*pump)(void *), void *arg);
void conf_gm_ctrl_close(struct conf_gm_ctrl *c);

#endif

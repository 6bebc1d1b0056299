/*
 * Raw route access for benchmarks and route tests: frames straight over one hard port of a
 * route, with no tasks, matching or protocol on top. This is what `cor-bench --raw` measures,
 * so the task layer's cost is visible beside it.
 *
 * Set COR_RAW=1 in the environment before cor_init() (cor-bench does it with setenv): every
 * domain then opens one extra hard port per route, reserved for raw use, and publishes its
 * address with the others. Without COR_RAW the calls return COR_ESTATE.
 * A raw port is used by one thread at a time.
 */
#ifndef COR_RAW_H
#define COR_RAW_H

#include "cor/cor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cor_raw cor_raw_t;

COR_API int cor_raw_open(const char *route, cor_raw_t **raw);
COR_API int cor_raw_close(cor_raw_t *raw);
/* Largest frame the route takes. */
COR_API size_t cor_raw_frame_max(cor_raw_t *raw);
/* Sends one frame to domain `peer`; polls the route until it is accepted. */
COR_API int cor_raw_send(cor_raw_t *raw, int peer, const void *buf, size_t len);
/* Polls until a frame arrives; copies it into buf (COR_ETRUNC if larger than max). */
COR_API int cor_raw_recv(cor_raw_t *raw, void *buf, size_t max, size_t *len, int *peer);
/* Polls until every accepted send completed. */
COR_API int cor_raw_flush(cor_raw_t *raw);

#ifdef __cplusplus
}
#endif
#endif

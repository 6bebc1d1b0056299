/* gm-pingpong's control messages (high priority, one size class; data
 * never uses high priority).  Both sides are the same program on the same
 * architecture, so the struct travels as is. */
#ifndef PP_PROTO_H
#define PP_PROTO_H

#include <stdint.h>

#define PP_MAGIC 0x474d5050u /* "GMPP" */
#define PP_CTRL_SIZE 7       /* gm_max_length_for_size(7) = 120 bytes */
#define PP_MAX_LEN 1048576u

enum pp_op { PP_HELLO = 1, PP_SETUP, PP_READY, PP_REFUSED, PP_RESULT, PP_DONE };
enum pp_mode { PP_PINGPONG = 1, PP_STREAM };

struct pp_ctrl {
    uint32_t magic;
    uint32_t op;         /* enum pp_op */
    uint32_t mode;       /* enum pp_mode (SETUP) */
    uint32_t len;        /* message length in bytes (SETUP, RESULT) */
    uint32_t iters;      /* timed messages (SETUP, RESULT) */
    uint32_t warmup;     /* untimed messages first (SETUP) */
    uint32_t check;      /* verify payloads (SETUP) */
    uint32_t errors;     /* wrong messages seen by the server (RESULT) */
    uint64_t elapsed_ns; /* receiver's time for `iters' messages (RESULT) */
    uint64_t first_ns;   /* stream: CLOCK_MONOTONIC at the first timed arrival (RESULT) */
};

#endif

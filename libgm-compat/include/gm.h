/*
 * gm.h - the GM 2.0 user API (Myricom GM, API 2.0.16), implemented by
 * libgm-compat on libfabric.  Programs written against Myricom's gm.h build
 * with this header and -lgm (pkg-config gm) and run unchanged.
 *
 * Constants, enum values, types and the 64-byte receive-event layout follow
 * GM 2.0 exactly; the implementation is our own (see README.md).
 *
 * Threading: like GM, a port is not thread-safe.  A client that uses one
 * port from several threads serialises its calls on that port with its own
 * lock; calls on different ports from different threads are safe.
 * gm_init/gm_finalize/gm_open/gm_close may be called from any thread.
 *
 * Callbacks (send completion, alarms) run only inside gm_unknown(), in the
 * calling thread, and may send, provide buffers or set alarms.
 */
#ifndef GM_H
#define GM_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---- API versions ---------------------------------------------------- */

#define GM_API_VERSION_1_0 0x100
#define GM_API_VERSION_1_1 0x101
#define GM_API_VERSION_1_2 0x102
#define GM_API_VERSION_1_3 0x103
#define GM_API_VERSION_1_4 0x104
#define GM_API_VERSION_1_5 0x105
#define GM_API_VERSION_1_6 0x106
#define GM_API_VERSION_2_0 0x200
#define GM_API_VERSION_2_0_6 0x20006
#define GM_API_VERSION_2_0_12 0x2000c
#define GM_API_VERSION_2_0_16 0x20010

#ifndef GM_API_VERSION
#define GM_API_VERSION GM_API_VERSION_2_0_16
#endif

/* Old versions are 0xMMmm, new ones 0xMMmmss. */
#define GM_API_MAJOR                                                                               \
    ((GM_API_VERSION & 0xffff) == GM_API_VERSION ? GM_API_VERSION >> 8 : GM_API_VERSION >> 16)
#define GM_API_MINOR                                                                               \
    ((GM_API_VERSION & 0xffff) == GM_API_VERSION ? GM_API_VERSION & 0xff                           \
                                                 : (GM_API_VERSION >> 8) & 0xff)
#define GM_API_SUBMINOR ((GM_API_VERSION & 0xffff) == GM_API_VERSION ? 0 : GM_API_VERSION & 0xff)

#if GM_API_VERSION < GM_API_VERSION_1_0
#error GM_API_VERSION is too small.
#elif GM_API_VERSION > GM_API_VERSION_2_0_16
#error GM_API_VERSION is too large.
#endif

/* ---- constants ------------------------------------------------------- */

#define GM_MAX_HOST_NAME_LEN 128
#define GM_MAX_PORT_NAME_LEN 32
#define GM_NO_SUCH_NODE_ID 0
#define GM_RDMA_GRANULARITY 64
#define GM_MAX_DMA_GRANULARITY 8
#define GM_DMA_GRANULARITY GM_MAX_DMA_GRANULARITY
#define GM_STRONG_TYPES 1

#ifndef gm_inline
#define gm_inline __inline__
#endif
#ifndef GM_ENTRY_POINT
#define GM_ENTRY_POINT
#endif
#define GM_CPU_BIGENDIAN (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
#define GM_SIZEOF_VOID_P __SIZEOF_POINTER__
#define GM_SIZEOF_UP_T GM_SIZEOF_VOID_P

/* ---- sized types ----------------------------------------------------- */

typedef signed long long gm_s64_t;
typedef unsigned long long gm_u64_t;
typedef signed int gm_s32_t;
typedef unsigned int gm_u32_t;
typedef signed short gm_s16_t;
typedef unsigned short gm_u16_t;
typedef signed char gm_s8_t;
typedef unsigned char gm_u8_t;

#if GM_SIZEOF_UP_T == 8
typedef gm_u64_t gm_up_t; /* a user pointer as an integer */
#else
typedef gm_u32_t gm_up_t;
#endif
typedef gm_u64_t gm_remote_ptr_t; /* a virtual address in another process */
typedef unsigned long gm_size_t;
typedef signed long gm_offset_t;
typedef gm_u32_t gm_pid_t;

/* Network-order values are wrapped in structs so that the compiler catches
 * a field used without gm_ntoh_*(). */
typedef struct {
    gm_remote_ptr_t n;
} gm_remote_ptr_n_t;
typedef struct {
    gm_s8_t n;
} gm_s8_n_t;
typedef struct {
    gm_s16_t n;
} gm_s16_n_t;
typedef struct {
    gm_s32_t n;
} gm_s32_n_t;
typedef struct {
    gm_s64_t n;
} gm_s64_n_t;
typedef struct {
    gm_u8_t n;
} gm_u8_n_t;
typedef struct {
    gm_u16_t n;
} gm_u16_n_t;
typedef struct {
    gm_u32_t n;
} gm_u32_n_t;
typedef struct {
    gm_u64_t n;
} gm_u64_n_t;
typedef struct {
    gm_up_t n;
} gm_up_n_t;
typedef gm_up_n_t gm_up_n_up_n_t;
#define GM_N(x) ((x).n)

/* ---- byte order (network order is big-endian) ------------------------ */

#if GM_CPU_BIGENDIAN
#define GM_NET_SWAP 0
#define _GM_SW16(x) (x)
#define _GM_SW32(x) (x)
#define _GM_SW64(x) (x)
#else
#define GM_NET_SWAP 1
#define _GM_SW16(x) __builtin_bswap16(x)
#define _GM_SW32(x) __builtin_bswap32(x)
#define _GM_SW64(x) __builtin_bswap64(x)
#endif

static gm_inline gm_u8_t gm_ntoh_u8(gm_u8_n_t x)
{
    return x.n;
}
static gm_inline gm_s8_t gm_ntoh_s8(gm_s8_n_t x)
{
    return x.n;
}
static gm_inline gm_u16_t gm_ntoh_u16(gm_u16_n_t x)
{
    return (gm_u16_t)_GM_SW16(x.n);
}
static gm_inline gm_s16_t gm_ntoh_s16(gm_s16_n_t x)
{
    return (gm_s16_t)_GM_SW16((gm_u16_t)x.n);
}
static gm_inline gm_u32_t gm_ntoh_u32(gm_u32_n_t x)
{
    return _GM_SW32(x.n);
}
static gm_inline gm_s32_t gm_ntoh_s32(gm_s32_n_t x)
{
    return (gm_s32_t)_GM_SW32((gm_u32_t)x.n);
}
static gm_inline gm_u64_t gm_ntoh_u64(gm_u64_n_t x)
{
    return _GM_SW64(x.n);
}
static gm_inline gm_s64_t gm_ntoh_s64(gm_s64_n_t x)
{
    return (gm_s64_t)_GM_SW64((gm_u64_t)x.n);
}

static gm_inline gm_u8_n_t gm_hton_u8(gm_u8_t x)
{
    gm_u8_n_t r;
    r.n = x;
    return r;
}
static gm_inline gm_s8_n_t gm_hton_s8(gm_s8_t x)
{
    gm_s8_n_t r;
    r.n = x;
    return r;
}
static gm_inline gm_u16_n_t gm_hton_u16(gm_u16_t x)
{
    gm_u16_n_t r;
    r.n = (gm_u16_t)_GM_SW16(x);
    return r;
}
static gm_inline gm_s16_n_t gm_hton_s16(gm_s16_t x)
{
    gm_s16_n_t r;
    r.n = (gm_s16_t)_GM_SW16((gm_u16_t)x);
    return r;
}
static gm_inline gm_u32_n_t gm_hton_u32(gm_u32_t x)
{
    gm_u32_n_t r;
    r.n = _GM_SW32(x);
    return r;
}
static gm_inline gm_s32_n_t gm_hton_s32(gm_s32_t x)
{
    gm_s32_n_t r;
    r.n = (gm_s32_t)_GM_SW32((gm_u32_t)x);
    return r;
}
static gm_inline gm_u64_n_t gm_hton_u64(gm_u64_t x)
{
    gm_u64_n_t r;
    r.n = _GM_SW64(x);
    return r;
}
static gm_inline gm_s64_n_t gm_hton_s64(gm_s64_t x)
{
    gm_s64_n_t r;
    r.n = (gm_s64_t)_GM_SW64((gm_u64_t)x);
    return r;
}

/* Older short names: c = 8, s = 16, l = 32, ll = 64 bits. */
static gm_inline gm_u8_t gm_ntohc(gm_u8_n_t x)
{
    return gm_ntoh_u8(x);
}
static gm_inline gm_u16_t gm_ntohs(gm_u16_n_t x)
{
    return gm_ntoh_u16(x);
}
static gm_inline gm_u32_t gm_ntohl(gm_u32_n_t x)
{
    return gm_ntoh_u32(x);
}
static gm_inline gm_u64_t gm_ntohll(gm_u64_n_t x)
{
    return gm_ntoh_u64(x);
}
static gm_inline gm_u8_n_t gm_htonc(gm_u8_t x)
{
    return gm_hton_u8(x);
}
static gm_inline gm_u16_n_t gm_htons(gm_u16_t x)
{
    return gm_hton_u16(x);
}
static gm_inline gm_u32_n_t gm_htonl(gm_u32_t x)
{
    return gm_hton_u32(x);
}
static gm_inline gm_u64_n_t gm_htonll(gm_u64_t x)
{
    return gm_hton_u64(x);
}

/* A user pointer carried in an event (there is no gm_htonp, as in GM). */
static gm_inline void *gm_ntohp(gm_up_n_t x)
{
#if GM_SIZEOF_UP_T == 8
    return (void *)(unsigned long)_GM_SW64(x.n);
#else
    return (void *)(unsigned long)_GM_SW32(x.n);
#endif
}

/* ---- small macros clients use ---------------------------------------- */

#define GM_OFFSETOF(type, field) ((gm_offset_t) & ((type *)0)->field)
#define GM_STRUCT_CONTAINING(type, field, field_instance)                                          \
    ((type *)((char *)(field_instance)-GM_OFFSETOF(type, field)))
#define GM_NUM_ELEM(ar) (sizeof(ar) / sizeof(*(ar)))
#define GM_POWER_OF_TWO(n) (!((n) & ((n)-1)))
#define __GM_MISALIGNMENT(n, m) ((gm_size_t)(n) & ((gm_size_t)(m)-1))
#define GM_MISALIGNMENT(n, m) __GM_MISALIGNMENT(n, m)
#define GM_ALIGNED(n, m) (__GM_MISALIGNMENT(n, m) == 0)
#define GM_DMA_ALIGNED(p) GM_ALIGNED(p, GM_DMA_GRANULARITY)
#define GM_PARAMETER_MAY_BE_UNUSED(p) ((void)(p))
#define GM_VAR_MAY_BE_UNUSED(v) ((void)(v))
#ifndef GM_DEBUG
#define GM_DEBUG 0
#endif
#define gm_assert(a)                                                                               \
    do {                                                                                           \
        if (0) (void)(a);                                                                          \
    } while (0)
#define gm_always_assert(a)                                                                        \
    do {                                                                                           \
        if (!(a)) _gm_assertion_failed(#a, __LINE__, __FILE__);                                    \
    } while (0)
#define gm_assert_p(a) gm_assert(a)
#define GM_ABORT() _gm_assertion_failed("0", __LINE__, __FILE__)

/* ---- status codes ---------------------------------------------------- */

typedef enum gm_status {
    GM_SUCCESS = 0,
    GM_FAILURE = 1,
    GM_INPUT_BUFFER_TOO_SMALL = 2,
    GM_OUTPUT_BUFFER_TOO_SMALL = 3,
    GM_TRY_AGAIN = 4,
    GM_BUSY = 5,
    GM_MEMORY_FAULT = 6,
    GM_INTERRUPTED = 7,
    GM_INVALID_PARAMETER = 8,
    GM_OUT_OF_MEMORY = 9,
    GM_INVALID_COMMAND = 10,
    GM_PERMISSION_DENIED = 11,
    GM_INTERNAL_ERROR = 12,
    GM_UNATTACHED = 13,
    GM_UNSUPPORTED_DEVICE = 14,
    GM_SEND_TIMED_OUT = 15, /* no matching receive buffer in time */
    GM_SEND_REJECTED = 16,  /* size not acceptable to the receiver */
    GM_SEND_TARGET_PORT_CLOSED = 17,
    GM_SEND_TARGET_NODE_UNREACHABLE = 18,
    GM_SEND_DROPPED = 19,     /* gm_drop_sends() dropped it; not an error */
    GM_SEND_PORT_CLOSED = 20, /* internal */
    GM_NODE_ID_NOT_YET_SET = 21,
    GM_STILL_SHUTTING_DOWN = 22,
    GM_CLONE_BUSY = 23,
    GM_NO_SUCH_DEVICE = 24,
    GM_ABORTED = 25,
    GM_INCOMPATIBLE_LIB_AND_DRIVER = 26,
    GM_UNTRANSLATED_SYSTEM_ERROR = 27,
    GM_ACCESS_DENIED = 28,
    GM_NO_DRIVER_SUPPORT = 29,
    GM_PTE_REF_CNT_OVERFLOW = 30,
    GM_NOT_SUPPORTED_IN_KERNEL = 31,
    GM_NOT_SUPPORTED_ON_ARCH = 32,
    GM_NO_MATCH = 33,
    GM_USER_ERROR = 34,
    GM_TIMED_OUT = 35,
    GM_DATA_CORRUPTED = 36,
    GM_HARDWARE_FAULT = 37,
    GM_SEND_ORPHANED = 38,
    GM_MINOR_OVERFLOW = 39,
    GM_PAGE_TABLE_FULL = 40,
    GM_UC_ERROR = 41,
    GM_INVALID_PORT_NUMBER = 42,
    GM_DEV_NOT_FOUND = 43,
    GM_FIRMWARE_NOT_RUNNING = 44,
    GM_YP_NO_MATCH = 45,
    GM_SRAM_PARITY_ERROR = 46,
    GM_FIRMWARE_ABORT = 47,
    GM_NUM_STATUS_CODES,
    GM_NUM_ERROR_CODES = GM_NUM_STATUS_CODES /* deprecated */
} gm_status_t;

enum gm_priority { GM_LOW_PRIORITY = 0, GM_HIGH_PRIORITY = 1, GM_NUM_PRIORITIES = 2 };

/* Ends at 2_0_6 as in GM; clients cast newer values. */
enum gm_api_version {
    _GM_API_VERSION_1_0 = GM_API_VERSION_1_0,
    _GM_API_VERSION_1_1 = GM_API_VERSION_1_1,
    _GM_API_VERSION_1_2 = GM_API_VERSION_1_2,
    _GM_API_VERSION_1_3 = GM_API_VERSION_1_3,
    _GM_API_VERSION_1_4 = GM_API_VERSION_1_4,
    _GM_API_VERSION_1_5 = GM_API_VERSION_1_5,
    _GM_API_VERSION_1_6 = GM_API_VERSION_1_6,
    _GM_API_VERSION_2_0 = GM_API_VERSION_2_0,
    _GM_API_VERSION_2_0_6 = GM_API_VERSION_2_0_6,
    __GM_API_VERSION_IGNORE_COMMA
};

struct gm_port;

/* ---- alarms ---------------------------------------------------------- */

/* A complete struct that clients allocate; initialise it with
 * gm_initialize_alarm() before first use.  Fields are private. */
typedef struct gm_alarm {
    struct gm_alarm *next;
    enum { GM_ALARM_FREE = 0, GM_ALARM_SET } state;
    struct gm_port *port;
    void (*callback)(void *context);
    void *context;
    gm_u64_t deadline;
} gm_alarm_t;

/* ---- receive events -------------------------------------------------- */

enum gm_recv_event_type {
    GM_NO_RECV_EVENT = 0,
    GM_SENDS_FAILED_EVENT = 1, /* deprecated */
    GM_ALARM_EVENT = 2,
    GM_SENT_EVENT = 3,
    _GM_SLEEP_EVENT = 4,
    GM_RAW_RECV_EVENT = 5,
    GM_BAD_SEND_DETECTED_EVENT = 6,
    GM_SEND_TOKEN_VIOLATION_EVENT = 7,
    GM_RECV_TOKEN_VIOLATION_EVENT = 8,
    GM_BAD_RECV_TOKEN_EVENT = 9,
    GM_ALARM_VIOLATION_EVENT = 10,
    GM_RECV_EVENT = 11,
    GM_HIGH_RECV_EVENT = 12,
    GM_PEER_RECV_EVENT = 13,
    GM_HIGH_PEER_RECV_EVENT = 14,
    GM_FAST_RECV_EVENT = 15,
    GM_FAST_HIGH_RECV_EVENT = 16,
    GM_FAST_PEER_RECV_EVENT = 17,
    GM_FAST_HIGH_PEER_RECV_EVENT = 18,
    GM_REJECTED_SEND_EVENT = 19,
    GM_ORPHANED_SEND_EVENT = 20,
    GM_BAD_RESEND_DETECTED_EVENT = 24,
    GM_DROPPED_SEND_EVENT = 25,
    GM_BAD_SEND_VMA_EVENT = 26,
    GM_BAD_RECV_VMA_EVENT = 27,
    _GM_FLUSHED_ALARM_EVENT = 28,
    GM_SENT_TOKENS_EVENT = 29,
    GM_IGNORE_RECV_EVENT = 30,
    GM_ETHERNET_RECV_EVENT = 31,
    GM_FATAL_FIRMWARE_ERROR_EVENT = 32,
    /* 128 + n: internal "new event" forms of the types above. */
    GM_NEW_NO_RECV_EVENT = 128,
    GM_NEW_RECV_EVENT = 139,
    GM_NUM_RECV_EVENT_TYPES = 161
};

/* A receive: 32 bytes of padding, then the fields, type in the last byte.
 * For GM_RECV_EVENT and GM_HIGH_RECV_EVENT (the only receive types this
 * library emits) the data is in `buffer' and `message' equals `buffer'. */
typedef struct gm_recv {
    gm_u8_n_t _rdma_padding[32];
#if GM_SIZEOF_UP_T == 4
    gm_u32_n_t message_pad;
#endif
    gm_up_n_t message;
#if GM_SIZEOF_UP_T == 4
    gm_u32_n_t buffer_pad;
#endif
    gm_up_n_t buffer;
    gm_u32_n_t reserved_after_buffer;
    gm_u32_n_t length;
    gm_u16_n_t sender_node_id;
    gm_u16_n_t reserved_after_sender_node_id;
    gm_u8_n_t tag;
    gm_u8_n_t size;
    gm_u8_n_t sender_port_id;
    gm_u8_n_t type;
} gm_recv_t;

struct _gm_sent_token_report {
    gm_u8_n_t token;
    gm_u8_n_t status;
};
#define GM_MAX_SENT_TOKEN_REPORTS_PER_EVENT ((GM_RDMA_GRANULARITY / 2) - 1)

typedef struct gm_tokens_sent {
    struct _gm_sent_token_report report[GM_MAX_SENT_TOKEN_REPORTS_PER_EVENT];
    gm_u8_n_t reserved_before_type;
    gm_u8_n_t type;
} gm_tokens_sent_t;

typedef struct gm_sent {
    gm_u8_n_t _rdma_padding[32];
    gm_u8_n_t _reserved[16];
#if GM_SIZEOF_UP_T == 4
    gm_u8_n_t _reserved_before_message_list[4];
#endif
    gm_up_n_up_n_t message_list;
    gm_u8_n_t _reserved_after_message_list[8 - 1];
    gm_u8_n_t type;
} gm_sent_t;

typedef struct gm_failed_send_event {
    gm_u8_n_t _rdma_padding[32];
    gm_u8_n_t _reserved[16];
#if GM_SIZEOF_UP_T == 4
    gm_u32_n_t message_pad;
#endif
    gm_up_n_t message;
    gm_u32_n_t reserved_after_message;
    gm_u16_n_t target_node_id;
    gm_u8_n_t target_subport_id;
    gm_u8_n_t type;
} gm_failed_send_event_t;

typedef struct gm_flushed_alarm {
    gm_u8_n_t _rdma_padding[32];
    gm_u8_n_t _reserved[24];
    gm_u32_n_t usecs_remaining;
    gm_u8_n_t reserved_after_usecs_remaining[3];
    gm_u8_n_t type;
} gm_flushed_alarm_t;

/* 64 bytes; every member ends with the type byte. */
typedef union gm_recv_event {
    gm_tokens_sent_t tokens_sent;
    gm_recv_t recv;
    gm_sent_t sent;
    gm_failed_send_event_t failed_send;
    gm_flushed_alarm_t flushed_alarm;
    gm_u8_n_t _bytes[64];
} gm_recv_event_t;

#define GM_RECV_EVENT_TYPE(e) (gm_ntoh_u8((e)->recv.type))

/* Send, put, get, drop and resume completions.  Runs inside gm_unknown(). */
typedef void (*gm_send_completion_callback_t)(struct gm_port *p, void *context, gm_status_t status);
typedef void (*gm_on_exit_callback_t)(gm_status_t status, void *arg);

/* ---- initialisation and ports ---------------------------------------- */

/* Reference-counted library initialisation; gm_open() also initialises.
 * Returns GM_SUCCESS or GM_FAILURE (bad node map / environment, message on
 * stderr).  Thread-safe. */
GM_ENTRY_POINT gm_status_t gm_init(void);
/* Balances one gm_init().  Thread-safe. */
GM_ENTRY_POINT void gm_finalize(void);
/* Runs gm_on_exit() callbacks (last registered first), then exit()s with 0
 * for GM_SUCCESS and 1 otherwise.  Does not return. */
GM_ENTRY_POINT void gm_exit(gm_status_t status) __attribute__((noreturn));
/* Registers a callback for gm_exit().  GM_OUT_OF_MEMORY on failure. */
GM_ENTRY_POINT gm_status_t gm_on_exit(gm_on_exit_callback_t cb, void *arg);

/* Opens port `port' (0 .. gm_num_ports()-1) of board `unit' (only unit 0
 * exists).  Ports 0, 1 and 3 are reserved as in GM (GM_BUSY).  A port
 * already open on this node gives GM_BUSY; a bad unit GM_NO_SUCH_DEVICE;
 * a bad port id GM_INVALID_PARAMETER; an unknown version
 * GM_INCOMPATIBLE_LIB_AND_DRIVER; no usable fabric GM_NO_SUCH_DEVICE.
 * `port_name' is informational (may be NULL).  Blocks briefly. */
GM_ENTRY_POINT gm_status_t gm_open(struct gm_port **p, unsigned int unit, unsigned int port,
                                   const char *port_name, enum gm_api_version version);
/* Closes the port; pending sends are abandoned without callbacks, buffers
 * and registrations released.  NULL is ignored. */
GM_ENTRY_POINT void gm_close(struct gm_port *p);

/* ---- identity -------------------------------------------------------- */

GM_ENTRY_POINT gm_status_t gm_get_node_id(struct gm_port *p, unsigned int *n);
GM_ENTRY_POINT unsigned int gm_get_port_id(struct gm_port *p);
/* Node ids are the same on every node (from the node map), so global ids
 * equal node ids; unknown ids give GM_INVALID_PARAMETER. */
GM_ENTRY_POINT gm_status_t gm_node_id_to_global_id(struct gm_port *p, unsigned int node_id,
                                                   unsigned int *global_id);
GM_ENTRY_POINT gm_status_t gm_global_id_to_node_id(struct gm_port *p, unsigned int global_id,
                                                   unsigned int *node_id);
GM_ENTRY_POINT gm_status_t gm_get_host_name(struct gm_port *p, char name[GM_MAX_HOST_NAME_LEN]);
/* Deprecated forms: GM_NO_SUCH_NODE_ID / NULL on failure.  Accept "host"
 * and "host:0".  The returned string belongs to the library. */
GM_ENTRY_POINT unsigned int gm_host_name_to_node_id(struct gm_port *p, char *host_name);
GM_ENTRY_POINT char *gm_node_id_to_host_name(struct gm_port *p, unsigned int node_id);
/* GM_SUCCESS, or GM_INVALID_PARAMETER when unknown; never blocks. */
GM_ENTRY_POINT gm_status_t gm_host_name_to_node_id_ex(struct gm_port *p, unsigned int timeout_usecs,
                                                      const char *host_name, unsigned int *node_id);
GM_ENTRY_POINT gm_status_t gm_node_id_to_host_name_ex(struct gm_port *p, unsigned int timeout_usecs,
                                                      unsigned int node_id,
                                                      char (*name)[GM_MAX_HOST_NAME_LEN + 1]);
/* libgm-compat extension (not in GM 2.0): gives node `node_id` of the node map, listed
 * without an address, its IPv4 address and TCP port base, for processes that learn their
 * peers at run time (a node map entry "<id> <host>" first, then this). Only while the
 * provider is TCP-like; an address already set may only be set again to the same.
 * GM_SUCCESS, GM_INVALID_PARAMETER (unknown node, bad address or base, another address). */
GM_ENTRY_POINT gm_status_t gm_node_set_address(unsigned int node_id, const char *ipv4,
                                               unsigned int port_base);
/* 6-byte board ids, derived from the node id (or given in the node map). */
GM_ENTRY_POINT gm_status_t gm_get_unique_board_id(struct gm_port *p, char unique[6]);
GM_ENTRY_POINT gm_status_t gm_unique_id(struct gm_port *p, char unique[6]);
GM_ENTRY_POINT gm_status_t gm_get_mapper_unique_id(struct gm_port *p, char unique[6]);
GM_ENTRY_POINT gm_status_t gm_unique_id_to_node_id(struct gm_port *p, char unique[6],
                                                   unsigned int *node_id);
GM_ENTRY_POINT gm_status_t gm_node_id_to_unique_id(struct gm_port *p, unsigned int n,
                                                   char unique[6]);
GM_ENTRY_POINT gm_status_t gm_max_node_id(struct gm_port *p, unsigned int *n);
GM_ENTRY_POINT gm_status_t gm_max_node_id_in_use(struct gm_port *p, unsigned int *n);
GM_ENTRY_POINT gm_status_t gm_max_node_id_inuse(struct gm_port *p, unsigned int *n);
GM_ENTRY_POINT gm_status_t gm_get_node_type(struct gm_port *p, int *node_type);

/* ---- counts, sizes, tokens ------------------------------------------- */

/* 16; p may be NULL (works before gm_init). */
GM_ENTRY_POINT unsigned int gm_num_ports(struct gm_port *p);
GM_ENTRY_POINT unsigned int gm_num_send_tokens(struct gm_port *p);
GM_ENTRY_POINT unsigned int gm_num_receive_tokens(struct gm_port *p);
/* Per-priority client token pool, starts empty: alloc returns nonzero and
 * takes one if available; free adds.  No GM state behind it. */
GM_ENTRY_POINT int gm_alloc_send_token(struct gm_port *p, unsigned int priority);
GM_ENTRY_POINT void gm_free_send_token(struct gm_port *p, unsigned int priority);
GM_ENTRY_POINT void gm_free_send_tokens(struct gm_port *p, unsigned int priority,
                                        unsigned int count);
GM_ENTRY_POINT int gm_send_token_available(struct gm_port *p, unsigned int priority);
/* ceil(log2(len + 8)), at least 3. */
GM_ENTRY_POINT unsigned int gm_min_size_for_length(gm_size_t length);
/* 2^size - 8; 0 for size < 3 or size > 63. */
GM_ENTRY_POINT gm_size_t gm_max_length_for_size(unsigned int size);
GM_ENTRY_POINT unsigned int gm_min_message_size(struct gm_port *p); /* 3 */
GM_ENTRY_POINT unsigned int gm_mtu(struct gm_port *p);              /* 4096 */
/* Bit s of mask set = messages of size class s accepted at this priority
 * (all accepted by default).  A message of another size completes at its
 * sender with GM_SEND_REJECTED (also one already waiting for a buffer).
 * GM_INVALID_PARAMETER for a bad priority. */
GM_ENTRY_POINT gm_status_t gm_set_acceptable_sizes(struct gm_port *p, enum gm_priority priority,
                                                   gm_size_t mask);

/* ---- memory ---------------------------------------------------------- */

/* Registered ("DMA-able") memory, 64-byte aligned; NULL on failure. */
GM_ENTRY_POINT void *gm_dma_malloc(struct gm_port *p, gm_size_t length);
GM_ENTRY_POINT void *gm_dma_calloc(struct gm_port *p, gm_size_t count, gm_size_t length);
GM_ENTRY_POINT void gm_dma_free(struct gm_port *p, void *addr);
/* Registers [ptr, ptr+length) for receives and as a put/get target; nests.
 * GM_INVALID_PARAMETER for NULL/0, GM_OUT_OF_MEMORY. */
GM_ENTRY_POINT gm_status_t gm_register_memory(struct gm_port *p, void *ptr, gm_size_t length);
GM_ENTRY_POINT gm_status_t gm_register_memory_ex(struct gm_port *p, void *ptr, gm_size_t length,
                                                 void *pvma);
/* Undoes one matching gm_register_memory(); GM_INVALID_PARAMETER if none. */
GM_ENTRY_POINT gm_status_t gm_deregister_memory(struct gm_port *p, void *ptr, gm_size_t length);
/* Lets other ports put into / get from this port's registered memory. */
GM_ENTRY_POINT gm_status_t gm_allow_remote_memory_access(struct gm_port *p);

/* ---- sending (all asynchronous, never block) ------------------------- */

/* Sends len bytes (len <= gm_max_length_for_size(size)) of message at
 * `priority' to (target_node_id, target_port_id).  Uses one send token;
 * `message' must stay unchanged until the callback, which runs in
 * gm_unknown() once the message is in a receive buffer of the target
 * (GM_SUCCESS) or with an error: GM_SEND_TARGET_PORT_CLOSED,
 * GM_SEND_TARGET_NODE_UNREACHABLE, GM_SEND_TIMED_OUT (no buffer provided,
 * or the target unreachable, for long), GM_SEND_REJECTED, GM_SEND_DROPPED,
 * GM_INVALID_PARAMETER (bad size/length/priority; reported through the
 * callback, never a crash).  Delivery is reliable and ordered per
 * (target port, priority); a message waits at the target (never lost)
 * until a buffer of exactly its size and priority is provided.  After an
 * error, later sends to that (port, priority) wait for gm_drop_sends() or
 * gm_resume_sending(). */
GM_ENTRY_POINT void gm_send_with_callback(struct gm_port *p, void *message, unsigned int size,
                                          gm_size_t len, unsigned int priority,
                                          unsigned int target_node_id, unsigned int target_port_id,
                                          gm_send_completion_callback_t callback, void *context);
/* Same, to the port with the sender's own port id. */
GM_ENTRY_POINT void
gm_send_to_peer_with_callback(struct gm_port *p, void *message, unsigned int size, gm_size_t len,
                              unsigned int priority, unsigned int target_node_id,
                              gm_send_completion_callback_t callback, void *context);
/* PUT: writes len bytes from source_buffer to target_buffer, a virtual
 * address registered by the target port, which must have called
 * gm_allow_remote_memory_access() (else the callback gets
 * GM_PERMISSION_DENIED and nothing lands).  No event at the target; the
 * callback means the data landed.  Ordered with the sender's later sends
 * to that port.  After the first put into a region, RMA where the provider
 * has it (see README.md: GM_RMA). */
GM_ENTRY_POINT void gm_directed_send_with_callback(
    struct gm_port *p, void *source_buffer, gm_remote_ptr_t target_buffer, gm_size_t len,
    enum gm_priority priority, unsigned int target_node_id, unsigned int target_port_id,
    gm_send_completion_callback_t callback, void *context);
GM_ENTRY_POINT void gm_put(struct gm_port *p, void *local_buffer, gm_remote_ptr_t remote_buffer,
                           gm_size_t len, enum gm_priority priority, unsigned int target_node_id,
                           unsigned int target_port_id, gm_send_completion_callback_t callback,
                           void *context);
/* GET: reads len bytes at remote_buffer (registered by the target, which
 * allowed remote access) into local_buffer; the callback runs once the data
 * is in local_buffer. */
GM_ENTRY_POINT void gm_get(struct gm_port *p, gm_remote_ptr_t remote_buffer, void *local_buffer,
                           gm_size_t len, enum gm_priority priority, unsigned int target_node_id,
                           unsigned int target_port_id, gm_send_completion_callback_t callback,
                           void *context);
/* Legacy forms without callback: completion is silent (token returned). */
GM_ENTRY_POINT void gm_send(struct gm_port *p, void *message, unsigned int size, gm_size_t len,
                            unsigned int priority, unsigned int target_node_id,
                            unsigned int target_port_id);
GM_ENTRY_POINT void gm_send_to_peer(struct gm_port *p, void *message, unsigned int size,
                                    gm_size_t len, unsigned int priority,
                                    unsigned int target_node_id);
GM_ENTRY_POINT void gm_directed_send(struct gm_port *p, void *source_buffer,
                                     gm_remote_ptr_t target_buffer, gm_size_t len,
                                     enum gm_priority priority, unsigned int target_node_id,
                                     unsigned int target_port_id);
/* Treated as a reliable send (delivery is never worse than GM's). */
GM_ENTRY_POINT void gm_datagram_send(struct gm_port *p, void *message, unsigned int size,
                                     gm_size_t len, unsigned int priority,
                                     unsigned int target_node_id, unsigned int target_port_id,
                                     gm_send_completion_callback_t callback, void *context);
/* Completes every send still queued in this library to (node, port,
 * priority) with GM_SEND_DROPPED, then calls callback with GM_SUCCESS.
 * Uses a send token.  Sends already handed to the fabric are not recalled. */
GM_ENTRY_POINT void gm_drop_sends(struct gm_port *p, unsigned int priority,
                                  unsigned int target_node_id, unsigned int target_port_id,
                                  gm_send_completion_callback_t callback, void *context);
/* Re-enables sending after an error; callback gets GM_SUCCESS. */
GM_ENTRY_POINT void gm_resume_sending(struct gm_port *p, unsigned int priority,
                                      unsigned int target_node_id, unsigned int target_port_id,
                                      gm_send_completion_callback_t callback, void *context);

/* ---- receiving ------------------------------------------------------- */

/* Gives GM a buffer of gm_max_length_for_size(size) bytes for one message
 * of exactly (size, priority); uses one receive token, returned with the
 * receive event.  tag (0..255) comes back in the event.  Bad arguments are
 * ignored with a message on stderr. */
GM_ENTRY_POINT void gm_provide_receive_buffer_with_tag(struct gm_port *p, void *ptr,
                                                       unsigned int size, unsigned int priority,
                                                       unsigned int tag);
GM_ENTRY_POINT void gm_provide_receive_buffer(struct gm_port *p, void *ptr, unsigned int size,
                                              unsigned int priority);
/* Non-blocking poll; never NULL (GM_NO_RECV_EVENT when idle).  The event
 * stays valid until the next receive call on the port.  Pass every event
 * you do not handle to gm_unknown(). */
GM_ENTRY_POINT gm_recv_event_t *gm_receive(struct gm_port *p);
/* Spins about 1 ms, then returns _GM_SLEEP_EVENT (gm_unknown sleeps). */
GM_ENTRY_POINT gm_recv_event_t *gm_blocking_receive(struct gm_port *p);
/* Returns _GM_SLEEP_EVENT at once when nothing is pending. */
GM_ENTRY_POINT gm_recv_event_t *gm_blocking_receive_no_spin(struct gm_port *p);
/* Nonzero if an event is ready (polls the fabric, does not consume). */
GM_ENTRY_POINT int gm_receive_pending(struct gm_port *p);
/* Type of the next event (0 if none); *sender gets its node id if known. */
GM_ENTRY_POINT int gm_next_event_peek(struct gm_port *p, gm_u16_t *sender);
/* Handles any event: runs send callbacks and due alarms, sleeps on
 * _GM_SLEEP_EVENT until something happens (at most ~10 ms), gives a receive
 * event's buffer back (re-provides it). */
GM_ENTRY_POINT void gm_unknown(struct gm_port *p, gm_recv_event_t *e);
/* Copies len bytes of message to buffer unless they are the same; returns
 * buffer. */
GM_ENTRY_POINT void *gm_memorize_message(void *message, void *buffer, unsigned int len);

/* ---- alarms and time ------------------------------------------------- */

GM_ENTRY_POINT void gm_initialize_alarm(gm_alarm_t *my_alarm);
/* (Re)schedules the alarm usecs from now; callback(context) runs inside
 * gm_unknown() on a GM_ALARM_EVENT. */
GM_ENTRY_POINT void gm_set_alarm(struct gm_port *p, gm_alarm_t *my_alarm, gm_u64_t usecs,
                                 void (*callback)(void *), void *context);
/* No-op if the alarm is not set. */
GM_ENTRY_POINT void gm_cancel_alarm(gm_alarm_t *my_alarm);
GM_ENTRY_POINT void gm_flush_alarm(struct gm_port *p);
/* Monotonic clock in units of 0.5 us (GM's LANai clock rate). */
GM_ENTRY_POINT gm_u64_t gm_ticks(struct gm_port *p);

/* ---- errors and helpers ---------------------------------------------- */

/* Static text; never NULL. */
GM_ENTRY_POINT char *gm_strerror(gm_status_t error);
/* Prints "message: text" on stderr. */
GM_ENTRY_POINT void gm_perror(const char *message, gm_status_t error);
GM_ENTRY_POINT void _gm_assertion_failed(const char *txt, int line, const char *file);
GM_ENTRY_POINT void gm_abort(void) __attribute__((noreturn));
GM_ENTRY_POINT void gm_bcopy(const void *from, void *to, gm_size_t len);
GM_ENTRY_POINT void gm_bzero(void *ptr, gm_size_t len);
GM_ENTRY_POINT void *gm_memset(void *s, int c, gm_size_t n);
GM_ENTRY_POINT int gm_memcmp(const void *a, const void *b, gm_size_t len);
GM_ENTRY_POINT void *gm_malloc(gm_size_t len);
GM_ENTRY_POINT void *gm_calloc(gm_size_t len, gm_size_t cnt);
GM_ENTRY_POINT void gm_free(void *ptr);
GM_ENTRY_POINT void *gm_page_alloc(void);
GM_ENTRY_POINT void gm_page_free(void *addr);
GM_ENTRY_POINT void *gm_alloc_pages(gm_size_t len);
GM_ENTRY_POINT void gm_free_pages(void *addr, gm_size_t len);
GM_ENTRY_POINT gm_size_t gm_strlen(const char *cptr);
GM_ENTRY_POINT char *gm_strncpy(char *to, const char *from, int len);
GM_ENTRY_POINT int gm_strcmp(const char *a, const char *b);
GM_ENTRY_POINT int gm_strncmp(const char *a, const char *b, int len);
GM_ENTRY_POINT int gm_strncasecmp(const char *a, const char *b, int len);
GM_ENTRY_POINT char *gm_strdup(const char *s);
GM_ENTRY_POINT int gm_isprint(int c);
GM_ENTRY_POINT int gm_printf(const char *format, ...) __attribute__((format(printf, 1, 2)));
GM_ENTRY_POINT int gm_eprintf(const char *format, ...) __attribute__((format(printf, 1, 2)));
GM_ENTRY_POINT void gm_hex_dump(const void *ptr, gm_size_t len);
GM_ENTRY_POINT int gm_sleep(unsigned seconds);
GM_ENTRY_POINT gm_pid_t gm_getpid(void);
GM_ENTRY_POINT unsigned long gm_log2_roundup(unsigned long n);
GM_ENTRY_POINT unsigned long gm_crc(void *ptr, gm_size_t len);
GM_ENTRY_POINT unsigned long gm_crc_str(const char *ptr);
GM_ENTRY_POINT int gm_rand(void);
GM_ENTRY_POINT void gm_srand(int seed);
GM_ENTRY_POINT unsigned int gm_rand_mod(unsigned int modulus);

/* Mutexes (a thin layer over pthreads). */
struct gm_mutex;
GM_ENTRY_POINT struct gm_mutex *gm_create_mutex(void);
GM_ENTRY_POINT void gm_destroy_mutex(struct gm_mutex *mu);
GM_ENTRY_POINT void gm_mutex_enter(struct gm_mutex *mu);
GM_ENTRY_POINT void gm_mutex_exit(struct gm_mutex *mu);

/* Lookaside lists: fixed-size entry allocators. */
struct gm_lookaside;
GM_ENTRY_POINT struct gm_lookaside *gm_create_lookaside(gm_size_t entry_len,
                                                        gm_size_t min_entry_cnt);
GM_ENTRY_POINT void gm_destroy_lookaside(struct gm_lookaside *l);
GM_ENTRY_POINT void *gm_lookaside_alloc(struct gm_lookaside *l);
GM_ENTRY_POINT void *gm_lookaside_zalloc(struct gm_lookaside *l);
GM_ENTRY_POINT void gm_lookaside_free(void *ptr);

/* Hash tables.  key_len/data_len 0 = store the pointers themselves;
 * otherwise keys/data of that many bytes are copied in. */
#define GM_HASH_SMOOTH 1
struct gm_hash;
GM_ENTRY_POINT struct gm_hash *gm_create_hash(long (*compare)(void *, void *),
                                              unsigned long (*hash)(void *), gm_size_t key_len,
                                              gm_size_t data_len, gm_size_t min_entries, int flags);
GM_ENTRY_POINT void gm_destroy_hash(struct gm_hash *h);
GM_ENTRY_POINT void *gm_hash_remove(struct gm_hash *h, void *key);
GM_ENTRY_POINT void *gm_hash_find(struct gm_hash *h, void *key);
GM_ENTRY_POINT gm_status_t gm_hash_insert(struct gm_hash *h, void *key, void *datum);
GM_ENTRY_POINT void gm_hash_rekey(struct gm_hash *h, void *old_key, void *new_key);
GM_ENTRY_POINT long gm_hash_compare_strings(void *key1, void *key2);
GM_ENTRY_POINT unsigned long gm_hash_hash_string(void *key);
GM_ENTRY_POINT long gm_hash_compare_longs(void *key1, void *key2);
GM_ENTRY_POINT unsigned long gm_hash_hash_long(void *key);
GM_ENTRY_POINT long gm_hash_compare_ints(void *key1, void *key2);
GM_ENTRY_POINT unsigned long gm_hash_hash_int(void *key);
GM_ENTRY_POINT long gm_hash_compare_ptrs(void *key1, void *key2);
GM_ENTRY_POINT unsigned long gm_hash_hash_ptr(void *key);

#ifdef __cplusplus
}
#endif

#endif /* GM_H */

/*
 * getBuffer: typed buffers allocated by the core. A header in front of the data records type
 * and size, so sendI needs no type argument and a misuse (releasing a foreign pointer) is
 * detected instead of corrupting the heap.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define BUF_MAGIC 0xC0B0FFE5C0B0FFE5ull
#define BUF_DEAD 0xDEADC0B0DEADC0B0ull

void *cor__buf_alloc(cor_type_t type, size_t n)
{
    size_t es = cor_type_size(type);
    if (!es || n > (SIZE_MAX - sizeof(struct cor_bufhdr)) / es) return NULL;
    struct cor_bufhdr *h;
    /* 64-byte alignment suits DMA and vector loads; the header is 40 bytes, so data starts
     * 64 bytes in. */
    if (posix_memalign((void **)&h, 64, 64 + n * es + (n == 0)) != 0) return NULL;
    h = (struct cor_bufhdr *)((char *)h + 64 - sizeof *h);
    h->magic = BUF_MAGIC;
    h->type = type;
    h->n = n;
    h->bytes = n * es;
    return h + 1;
}

struct cor_bufhdr *cor__buf_hdr(const void *data)
{
    if (!data || ((uintptr_t)data & 63)) return NULL;
    struct cor_bufhdr *h = (struct cor_bufhdr *)data - 1;
    return h->magic == BUF_MAGIC ? h : NULL;
}

COR_API void *cor_getBuffer(cor_type_t type, size_t n)
{
    return cor__buf_alloc(type, n);
}

COR_API int cor_releaseBuffer(void *buf)
{
    struct cor_bufhdr *h = cor__buf_hdr(buf);
    if (!h) return COR_EINVAL;
    h->magic = BUF_DEAD;
    free((char *)(h + 1) - 64);
    return COR_OK;
}

COR_API int cor_buffer_info(const void *buf, cor_type_t *type, size_t *n)
{
    struct cor_bufhdr *h = cor__buf_hdr(buf);
    if (!h) return COR_EINVAL;
    if (type) *type = h->type;
    if (n) *n = h->n;
    return COR_OK;
}

/* hash.c - GM's hash table helper: chained buckets.  With key_len/data_len
 * nonzero, keys/data are copied into the table; with 0 the pointers are kept. */
#include "gm_internal.h"

#include <stdlib.h>
#include <string.h>

struct hash_ent {
    struct hash_ent *next;
    void *key, *data;
};
struct gm_hash {
    long (*cmp)(void *, void *);
    unsigned long (*hash)(void *);
    gm_size_t key_len, data_len;
    struct hash_ent **b;
    size_t nb, n;
};

GMX_EXPORT struct gm_hash *gm_create_hash(long (*cmp)(void *, void *),
                                          unsigned long (*hash)(void *), gm_size_t key_len,
                                          gm_size_t data_len, gm_size_t min_entries, int flags)
{
    (void)flags;
    if (!cmp || !hash) return NULL;
    struct gm_hash *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->cmp = cmp;
    h->hash = hash;
    h->key_len = key_len;
    h->data_len = data_len;
    h->nb = 64;
    while (h->nb < min_entries && h->nb < (1u << 24))
        h->nb *= 2;
    h->b = calloc(h->nb, sizeof *h->b);
    if (!h->b) {
        free(h);
        return NULL;
    }
    return h;
}

static void ent_free(struct gm_hash *h, struct hash_ent *e)
{
    if (h->key_len) free(e->key);
    if (h->data_len) free(e->data);
    free(e);
}

GMX_EXPORT void gm_destroy_hash(struct gm_hash *h)
{
    if (!h) return;
    for (size_t i = 0; i < h->nb; i++)
        for (struct hash_ent *e = h->b[i], *n; e; e = n) {
            n = e->next;
            ent_free(h, e);
        }
    free(h->b);
    free(h);
}

static struct hash_ent **find(struct gm_hash *h, void *key)
{
    struct hash_ent **link = &h->b[h->hash(key) % h->nb];
    while (*link && h->cmp((*link)->key, key) != 0)
        link = &(*link)->next;
    return link;
}

GMX_EXPORT void *gm_hash_find(struct gm_hash *h, void *key)
{
    if (!h) return NULL;
    struct hash_ent *e = *find(h, key);
    return e ? e->data : NULL;
}

GMX_EXPORT void *gm_hash_remove(struct gm_hash *h, void *key)
{
    if (!h) return NULL;
    struct hash_ent **link = find(h, key);
    struct hash_ent *e = *link;
    if (!e) return NULL;
    *link = e->next;
    void *data = h->data_len ? NULL : e->data;
    ent_free(h, e);
    h->n--;
    return data;
}

static void *dup_or_keep(void *p, gm_size_t len)
{
    if (!len) return p;
    void *c = malloc(len);
    if (c) memcpy(c, p, len);
    return c;
}

GMX_EXPORT gm_status_t gm_hash_insert(struct gm_hash *h, void *key, void *datum)
{
    if (!h) return GM_INVALID_PARAMETER;
    if (*find(h, key)) return GM_FAILURE;
    struct hash_ent *e = calloc(1, sizeof *e);
    if (!e) return GM_OUT_OF_MEMORY;
    e->key = dup_or_keep(key, h->key_len);
    e->data = dup_or_keep(datum, h->data_len);
    if (!e->key || (!e->data && datum)) {
        ent_free(h, e);
        return GM_OUT_OF_MEMORY;
    }
    struct hash_ent **head = &h->b[h->hash(e->key) % h->nb];
    e->next = *head;
    *head = e;
    h->n++;
    return GM_SUCCESS;
}

GMX_EXPORT void gm_hash_rekey(struct gm_hash *h, void *old_key, void *new_key)
{
    if (!h) return;
    struct hash_ent **link = find(h, old_key);
    struct hash_ent *e = *link;
    if (!e) return;
    *link = e->next;
    if (h->key_len)
        memcpy(e->key, new_key, h->key_len);
    else
        e->key = new_key;
    struct hash_ent **head = &h->b[h->hash(e->key) % h->nb];
    e->next = *head;
    *head = e;
}

GMX_EXPORT long gm_hash_compare_strings(void *a, void *b)
{
    return strcmp(a, b);
}
GMX_EXPORT unsigned long gm_hash_hash_string(void *key)
{
    unsigned long x = 5381;
    for (const unsigned char *s = key; *s; s++)
        x = x * 33 + *s;
    return x;
}
GMX_EXPORT long gm_hash_compare_longs(void *a, void *b)
{
    long x = *(long *)a, y = *(long *)b;
    return x < y ? -1 : x > y;
}
GMX_EXPORT unsigned long gm_hash_hash_long(void *key)
{
    return (unsigned long)*(long *)key * 2654435761UL;
}
GMX_EXPORT long gm_hash_compare_ints(void *a, void *b)
{
    int x = *(int *)a, y = *(int *)b;
    return x < y ? -1 : x > y;
}
GMX_EXPORT unsigned long gm_hash_hash_int(void *key)
{
    return (unsigned long)(unsigned)*(int *)key * 2654435761UL;
}
GMX_EXPORT long gm_hash_compare_ptrs(void *a, void *b)
{
    return a == b ? 0 : (a < b ? -1 : 1);
}
GMX_EXPORT unsigned long gm_hash_hash_ptr(void *key)
{
    return (unsigned long)(uintptr_t)key >> 3;
}

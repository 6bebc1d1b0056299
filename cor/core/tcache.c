/* Per-thread caches of freed objects (tcache.h): the one slow step, a thread's first push. */
#include "tcache.h"
#include "internal.h"

static pthread_mutex_t keys_lock = PTHREAD_MUTEX_INITIALIZER; /* every kind's key_made */

void cor__tcache_register(struct cor_tcache *c, struct cor_tcache_kind *k)
{
    COR_LOCK(&keys_lock);
    if (!k->key_made) {
        if (pthread_key_create(&k->key, k->retire) != 0)
            cor__fatal("pthread_key_create", __FILE__, __LINE__);
        k->key_made = true;
    }
    COR_UNLOCK(&keys_lock);
    pthread_setspecific(k->key, c);
    c->registered = true;
}

/* The core's proto.c compiled into an internal test program (reaches cor__* symbols). A test
 * may stop a send between its look at the peer and its frame's number (COR_TEST_SEND_HOOK). */
extern void (*cor_test_send_hook)(int at);
void (*cor_test_send_hook)(int at);
#define COR_TEST_SEND_HOOK(at) (cor_test_send_hook ? cor_test_send_hook(at) : (void)0)
#include "proto.c"

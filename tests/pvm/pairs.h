/*
 * What the threaded PVM tests (peers.c, receivers.c) share: a master task spawns helper tasks
 * (the same program), waits until each one is enrolled and has said so (its pair then takes
 * the route), and threads of the master exchange numbered messages with them, whose payload
 * is a pattern of the sender and the number.
 */
#ifndef TESTS_PVM_PAIRS_H
#define TESTS_PVM_PAIRS_H

#include <stdbool.h>

#define PAIRS_WAIT_S 60 /* the longest wait for one message */

/* The number in s, from lo to hi; exits 2 with a message naming `what` if it is not. */
long pairs_number(const char *s, long lo, long hi, const char *what);
/* len bytes that differ between senders a and messages n. */
void pairs_pattern(char *data, int len, int a, int n);
/* Spawns n tasks of argv0 with args (NULL-terminated); with `index_arg` not NULL, task i gets
 * i written there (a buffer of args) and is spawned alone. Then waits for each task's message
 * of tag ready_tag (pairs_ready). Fills tids; false after a message on stderr (pvm_exit done). */
bool pairs_start(const char *argv0, char **args, char *index_arg, int n, int *tids, int ready_tag);
/* In a spawned task: enrolled, says so to the parent with tag ready_tag. */
void pairs_ready(int ready_tag);

#endif
